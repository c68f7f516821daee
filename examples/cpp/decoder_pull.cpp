// decoder_pull: the pulling side of the pull pair. Registers its own 4 INT32 {8, 16} tensors
// (decoder pattern), waits for prompt_pull to come up, links to <remote_ip>:26000, pulls blocks
// 1-3 and batch 0 as the official sample does plus two layer-to-layer pulls (sample_transfers.h),
// checks every byte of its tensors (pulled rows hold the prompt's rows, all others are
// unchanged), unlinks and tells the prompt over TCP (<remote_ip>:26002). Exit status 0 only if
// everything verified. Behaves like hicann/hixl examples/cpp/decoder_pull_cache_and_blocks.cpp.
#include <chrono>
#include <cstdio>
#include <thread>

#include "common.h"
#include "sample_cache.h"
#include "sample_transfers.h"

namespace example {
namespace {

constexpr char kUsage[] =
    "decoder_pull device_id local_ip remote_ip [transfer_backend [local_comm_res]]";
constexpr int kWaitPromptSec = 5;

bool PullAndVerify(const Args& args, LlmDataDist& dist, DeviceTensors& tensors, int64_t& cache_id) {
  EXAMPLE_CHECK(SetUpSampleCache(dist, tensors, kDecoderSeed, cache_id));
  // The prompt must be listening with its cache registered before the link.
  std::this_thread::sleep_for(std::chrono::seconds(kWaitPromptSec));
  EXAMPLE_CHECK(LinkPeer(dist,
                         MakePeer(kPromptClusterId, args.local_ip, kDecoderListenPort,
                                  args.remote_ip, kPromptListenPort),
                         kSampleLinkTimeoutMs));

  const std::vector<TransferStep> steps = PullSteps();
  bool ok = RunPulls(dist, steps, kPromptClusterId, kSampleCacheId, cache_id);
  if (ok) {
    ExpectedContent expected(kDecoderSeed, kSampleTensors, kSampleRows);
    ExpectTransfers(steps, kPromptSeed, kSampleTensors, expected);
    ok = VerifyTensors(tensors, expected, "pulled cache");
  }
  // Unlink and report even after a failure, so that the prompt does not wait out its timeout.
  ok = UnlinkPeer(dist, MakePeer(kPromptClusterId, "", 0, args.remote_ip, kPromptListenPort),
                  kSampleLinkTimeoutMs, /*force=*/false) &&
       ok;
  ok = SendMessage(args.remote_ip, kPullControlPort, kUnlinkedMessage) && ok;
  return ok;
}

int Main(int argc, char** argv) {
  return RunSample(argc, argv, "decoder_pull", kUsage, /*takes_remote=*/true, kDecoderClusterId,
                   LlmRole::kDecoder, kDecoderListenPort, PullAndVerify);
}

}  // namespace
}  // namespace example

int main(int argc, char** argv) {
  return example::Main(argc, argv);
}
