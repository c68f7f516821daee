// decoder_push: the receiving side of the push pair. Registers its own 4 INT32 {8, 16} tensors
// (decoder pattern), listens on <local_ip>:26001, sleeps while prompt_push links and pushes,
// waits for its TCP message on <local_ip>:26003 that it has pushed and unlinked, then checks every
// byte of its tensors (pushed rows hold the prompt's rows, all others are unchanged), unregisters,
// frees and finalizes. Exit status 0 only if everything verified. Behaves like hicann/hixl
// examples/cpp/decoder_push_cache_and_blocks.cpp.
#include <chrono>
#include <cstdio>
#include <thread>

#include "common.h"
#include "sample_cache.h"
#include "sample_transfers.h"

namespace example {
namespace {

constexpr char kUsage[] = "decoder_push device_id local_ip [transfer_backend [local_comm_res]]";
constexpr int kWaitPromptSec = 10;

bool ReceiveAndVerify(const Args& args, LlmDataDist& dist, DeviceTensors& tensors,
                      int64_t& cache_id) {
  EXAMPLE_CHECK(SetUpSampleCache(dist, tensors, kDecoderSeed, cache_id));
  std::this_thread::sleep_for(std::chrono::seconds(kWaitPromptSec));
  EXAMPLE_CHECK(
      WaitForMessage(args.local_ip, kPushControlPort, kUnlinkedMessage, kControlTimeoutSec));
  ExpectedContent expected(kDecoderSeed, kSampleTensors, kSampleRows);
  ExpectTransfers(PushSteps(), kPromptSeed, kSampleTensors, expected);
  return VerifyTensors(tensors, expected, "pushed cache");
}

int Main(int argc, char** argv) {
  return RunSample(argc, argv, "decoder_push", kUsage, /*takes_remote=*/false, kDecoderClusterId,
                   LlmRole::kDecoder, kDecoderListenPort, ReceiveAndVerify);
}

}  // namespace
}  // namespace example

int main(int argc, char** argv) {
  return example::Main(argc, argv);
}
