// decoder_switch_roles: starts as a client decoder (Initialize with the device only) with its own
// 4 INT32 {8, 16} tensors (decoder pattern), links to prompt_switch_roles on <remote_ip>:26000,
// pulls from it and checks every byte, unlinks, calls SetRole(kPrompt) with
// OPTION_LISTEN_IP_INFO = <local_ip>:26001 to become the server, sleeps while the prompt links and
// pushes to it, checks every byte again (pulled and pushed rows hold the prompt's rows, all others
// are unchanged) and finalizes. Exit status 0 only if both checks passed. Behaves like
// hicann/hixl examples/cpp/decoder_switch_roles.cpp.
#include <chrono>
#include <cstdio>
#include <thread>

#include "common.h"
#include "sample_cache.h"
#include "sample_transfers.h"

namespace example {
namespace {

constexpr char kUsage[] = "decoder_switch_roles device_id local_ip remote_ip";
constexpr int kWaitPromptInitSec = 5;
constexpr int kWaitPromptPushSec = 30;
constexpr int32_t kLinkTimeoutMs = 1000;  // the API default, which the original relies on

bool PullThenReceive(const Args& args, LlmDataDist& dist, DeviceTensors& tensors,
                     int64_t& cache_id) {
  EXAMPLE_CHECK(SetUpSampleCache(dist, tensors, kDecoderSeed, cache_id));
  std::this_thread::sleep_for(std::chrono::seconds(kWaitPromptInitSec));

  // The original names the prompt's port in its local IpInfo too.
  EXAMPLE_CHECK(LinkPeer(dist,
                         MakePeer(kPromptClusterId, args.local_ip, kPromptListenPort,
                                  args.remote_ip, kPromptListenPort),
                         kLinkTimeoutMs));
  const std::vector<TransferStep> pulls = PullSteps();
  ExpectedContent expected(kDecoderSeed, kSampleTensors, kSampleRows);
  ExpectTransfers(pulls, kPromptSeed, kSampleTensors, expected);
  bool ok = RunPulls(dist, pulls, kPromptClusterId, kSampleCacheId, cache_id) &&
            VerifyTensors(tensors, expected, "pulled cache");
  ok = UnlinkPeer(dist, MakePeer(kPromptClusterId, "", 0, args.remote_ip, kPromptListenPort),
                  kLinkTimeoutMs, /*force=*/false) &&
       ok;

  Options listen;
  listen[llm_datadist::OPTION_LISTEN_IP_INFO] = Endpoint(args.local_ip, kDecoderListenPort).c_str();
  EXAMPLE_CHECK(LlmOk(dist.SetRole(LlmRole::kPrompt, listen), "SetRole(kPrompt)"));
  std::this_thread::sleep_for(std::chrono::seconds(kWaitPromptPushSec));

  ExpectTransfers(PushSteps(), kPromptSeed, kSampleTensors, expected);
  ok = VerifyTensors(tensors, expected, "pulled and pushed cache") && ok;
  return ok;
}

int Main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // keep the log in order when stdout is a pipe
  Args args;
  if (!ParseArgs(argc, argv, /*takes_remote=*/true, /*takes_backend=*/false, kUsage, args)) {
    return 1;
  }
  LlmDataDist dist(kDecoderClusterId, LlmRole::kDecoder);
  if (!LlmOk(dist.Initialize(InitOptions(args, /*listen_port=*/0)), "Initialize")) return 1;
  DeviceTensors tensors(kSampleTensors, kSampleRows, kSampleRowBytes);
  int64_t cache_id = -1;
  const bool ok = PullThenReceive(args, dist, tensors, cache_id);
  dist.Finalize();
  std::printf("[INFO] decoder_switch_roles %s\n", ok ? "passed" : "FAILED");
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace example

int main(int argc, char** argv) {
  return example::Main(argc, argv);
}
