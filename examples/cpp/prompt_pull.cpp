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
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // keep the log in order when stdout is a pipe
  Args args;
  if (!ParseArgs(argc, argv, /*takes_remote=*/false, /*takes_backend=*/true, kUsage, args)) {
    return 1;
  }
  LlmDataDist dist(kPromptClusterId, LlmRole::kPrompt);
  if (!LlmOk(dist.Initialize(InitOptions(args, kPromptListenPort)), "Initialize")) return 1;
  DeviceTensors tensors(kSampleTensors, kSampleRows, kSampleRowBytes);
  int64_t cache_id = -1;
  const bool ok = Serve(args, dist, tensors, cache_id);
  UnregisterCache(dist, cache_id);
  tensors.Free();
  dist.Finalize();
  std::printf("[INFO] prompt_pull %s\n", ok ? "passed" : "FAILED");
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace example

int main(int argc, char** argv) {
  return example::Main(argc, argv);
}
