// prompt_pull: the serving side of the pull pair. Registers 4 INT32 {8, 16} tensors holding the
// prompt pattern, listens on <local_ip>:26000, waits until decoder_pull reports over TCP
// (<local_ip>:26002) that it has pulled and unlinked, checks that the pulls left its own tensors
// alone, then unregisters, frees and finalizes. Behaves like hicann/hixl
// examples/cpp/prompt_pull_cache_and_blocks.cpp.
#include <cstdio>

#include "common.h"
#include "sample_cache.h"

namespace example {
namespace {

constexpr char kUsage[] = "prompt_pull device_id local_ip [transfer_backend [local_comm_res]]";

bool Serve(const Args& args, LlmDataDist& dist, DeviceTensors& tensors, int64_t& cache_id) {
  EXAMPLE_CHECK(SetUpSampleCache(dist, tensors, kPromptSeed, cache_id));
  EXAMPLE_CHECK(
      WaitForMessage(args.local_ip, kPullControlPort, kUnlinkedMessage, kControlTimeoutSec));
  const ExpectedContent own(kPromptSeed, kSampleTensors, kSampleRows);
  return VerifyTensors(tensors, own, "prompt cache after the pulls");
}

int Main(int argc, char** argv) {
  return RunSample(argc, argv, "prompt_pull", kUsage, /*takes_remote=*/false, kPromptClusterId,
                   LlmRole::kPrompt, kPromptListenPort, Serve);
}

}  // namespace
}  // namespace example

int main(int argc, char** argv) {
  return example::Main(argc, argv);
}
