// prompt_switch_roles: starts as a listening prompt (<local_ip>:26000) with 4 INT32 {8, 16}
// tensors holding the prompt pattern, sleeps while decoder_switch_roles links, pulls and unlinks,
// then calls SetRole(kDecoder) without OPTION_LISTEN_IP_INFO to become a client, links to the
// decoder (now listening on <remote_ip>:26001), pushes to it (sample_transfers.h), checks its own
// tensors are unchanged and finalizes without unlinking first, as the original does: Finalize
// tears down the link and the registration. Behaves like hicann/hixl
// examples/cpp/prompt_switch_roles.cpp.
#include <chrono>
#include <cstdio>
#include <thread>

#include "common.h"
#include "sample_cache.h"
#include "sample_transfers.h"

namespace example {
namespace {

constexpr char kUsage[] = "prompt_switch_roles device_id local_ip remote_ip";
constexpr int kWaitDecoderPullSec = 10;
constexpr int32_t kLinkTimeoutMs = 1000;  // the API default, which the original relies on

bool PullThenPush(const Args& args, LlmDataDist& dist, DeviceTensors& tensors, int64_t& cache_id) {
  EXAMPLE_CHECK(SetUpSampleCache(dist, tensors, kPromptSeed, cache_id));
  std::this_thread::sleep_for(std::chrono::seconds(kWaitDecoderPullSec));

  EXAMPLE_CHECK(LlmOk(dist.SetRole(LlmRole::kDecoder, Options{}), "SetRole(kDecoder)"));
  EXAMPLE_CHECK(LinkPeer(dist,
                         MakePeer(kDecoderClusterId, args.local_ip, kDecoderListenPort,
                                  args.remote_ip, kDecoderListenPort),
                         kLinkTimeoutMs));
  bool ok = RunPushes(dist, PushSteps(), cache_id, kDecoderClusterId, kSampleCacheId);
  const ExpectedContent own(kPromptSeed, kSampleTensors, kSampleRows);
  ok = VerifyTensors(tensors, own, "prompt cache after pull and push") && ok;
  return ok;
}

int Main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // keep the log in order when stdout is a pipe
  Args args;
  if (!ParseArgs(argc, argv, /*takes_remote=*/true, /*takes_backend=*/false, kUsage, args)) {
    return 1;
  }
  LlmDataDist dist(kPromptClusterId, LlmRole::kPrompt);
  if (!LlmOk(dist.Initialize(InitOptions(args, kPromptListenPort)), "Initialize")) return 1;
  DeviceTensors tensors(kSampleTensors, kSampleRows, kSampleRowBytes);
  int64_t cache_id = -1;
  const bool ok = PullThenPush(args, dist, tensors, cache_id);
  dist.Finalize();
  std::printf("[INFO] prompt_switch_roles %s\n", ok ? "passed" : "FAILED");
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace example

int main(int argc, char** argv) {
  return example::Main(argc, argv);
}
