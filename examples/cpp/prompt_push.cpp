// prompt_push: the pushing side of the push pair. Registers 4 INT32 {8, 16} tensors holding the
// prompt pattern (listening on <local_ip>:26000 as the original does), waits for decoder_push to
// come up, links to <remote_ip>:26001, pushes blocks 5-7 tensor by tensor (one tensor per layer),
// batch 4 as one 4-tensor layer and one layer-to-layer batch (sample_transfers.h), unlinks and
// tells the decoder over TCP (<remote_ip>:26003), checks its own tensors are unchanged, then
// unregisters, frees and finalizes. Behaves like hicann/hixl
// examples/cpp/prompt_push_cache_and_blocks.cpp.
#include <chrono>
#include <cstdio>
#include <thread>

#include "common.h"
#include "sample_cache.h"
#include "sample_transfers.h"

namespace example {
namespace {

constexpr char kUsage[] =
    "prompt_push device_id local_ip remote_ip [transfer_backend [local_comm_res]]";
constexpr int kWaitDecoderSec = 5;

bool Push(const Args& args, LlmDataDist& dist, DeviceTensors& tensors, int64_t& cache_id) {
  EXAMPLE_CHECK(SetUpSampleCache(dist, tensors, kPromptSeed, cache_id));
  // The decoder must be listening with its cache registered before the link.
  std::this_thread::sleep_for(std::chrono::seconds(kWaitDecoderSec));
  EXAMPLE_CHECK(LinkPeer(dist,
                         MakePeer(kDecoderClusterId, args.local_ip, kPromptListenPort,
                                  args.remote_ip, kDecoderListenPort),
                         kSampleLinkTimeoutMs));

  bool ok = RunPushes(dist, PushSteps(), cache_id, kDecoderClusterId, kSampleCacheId);
  // Unlink and report even after a failure, so that the decoder does not wait out its timeout.
  ok = UnlinkPeer(dist, MakePeer(kDecoderClusterId, "", 0, args.remote_ip, kDecoderListenPort),
                  kSampleLinkTimeoutMs, /*force=*/false) &&
       ok;
  ok = SendMessage(args.remote_ip, kPushControlPort, kUnlinkedMessage) && ok;
  const ExpectedContent own(kPromptSeed, kSampleTensors, kSampleRows);
  ok = VerifyTensors(tensors, own, "prompt cache after the pushes") && ok;
  return ok;
}

int Main(int argc, char** argv) {
  return RunSample(argc, argv, "prompt_push", kUsage, /*takes_remote=*/true, kPromptClusterId,
                   LlmRole::kPrompt, kPromptListenPort, Push);
}

}  // namespace
}  // namespace example

int main(int argc, char** argv) {
  return example::Main(argc, argv);
}
