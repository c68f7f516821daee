// The cache and addresses the official-sample pairs agree on: one registration of 4 INT32
// tensors of shape {8, 16} on each side (row = batch = block of 64 bytes), the roles' cluster ids,
// listen and control ports, and the pattern seed of each side's own data.
#pragma once

#include <cstdint>
#include <cstdio>
#include <vector>

#include "common.h"

namespace example {

constexpr uint64_t kPromptClusterId = 0;
constexpr uint64_t kDecoderClusterId = 1;
constexpr uint16_t kPromptListenPort = 26000;
constexpr uint16_t kDecoderListenPort = 26001;
constexpr uint16_t kPullControlPort = 26002;  // prompt listens; decoder reports "unlinked"
constexpr uint16_t kPushControlPort = 26003;  // decoder listens; prompt reports "unlinked"
constexpr char kUnlinkedMessage = '1';
constexpr int kControlTimeoutSec = 60;
constexpr int32_t kSampleLinkTimeoutMs = 5000;

constexpr uint32_t kSampleTensors = 4;
constexpr uint32_t kSampleRows = 8;
constexpr uint32_t kSampleCols = 16;
constexpr size_t kSampleRowBytes = kSampleCols * sizeof(int32_t);

// Each side's cache is its first registration, so both sides address the peer's as id 1.
constexpr int64_t kSampleCacheId = 1;

constexpr uint32_t kPromptSeed = 0x50;   // 'P'
constexpr uint32_t kDecoderSeed = 0x44;  // 'D': what a decoder row holds until a transfer lands

inline std::vector<int64_t> SampleShape() {
  return {kSampleRows, kSampleCols};
}

// Allocates the 4 tensors, fills them with `seed`'s pattern and registers them as one cache.
inline bool SetUpSampleCache(LlmDataDist& dist, DeviceTensors& tensors, uint32_t seed,
                             int64_t& cache_id) {
  EXAMPLE_CHECK(tensors.Allocate());
  EXAMPLE_CHECK(tensors.Fill(seed));
  EXAMPLE_CHECK(
      RegisterCache(dist, tensors.addrs(), llm_datadist::DT_INT32, SampleShape(), cache_id));
  if (cache_id != kSampleCacheId) {
    std::printf("[ERROR] first registration got cache_id %lld; the peer addresses it as %lld\n",
                static_cast<long long>(cache_id), static_cast<long long>(kSampleCacheId));
    return false;
  }
  return true;
}

// The life of one program of a pull or push pair: parse the arguments, Initialize, run `body`
// on the sample tensors, then unregister, free and Finalize whatever happened, and say whether
// it passed.
template <typename Body>
int RunSample(int argc, char** argv, const char* name, const char* usage, bool takes_remote,
              uint64_t cluster_id, LlmRole role, uint16_t listen_port, Body body) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // keep the log in order when stdout is a pipe
  Args args;
  if (!ParseArgs(argc, argv, takes_remote, /*takes_backend=*/true, usage, args)) return 1;
  LlmDataDist dist(cluster_id, role);
  if (!LlmOk(dist.Initialize(InitOptions(args, listen_port)), "Initialize")) return 1;
  DeviceTensors tensors(kSampleTensors, kSampleRows, kSampleRowBytes);
  int64_t cache_id = -1;
  const bool ok = body(args, dist, tensors, cache_id);
  UnregisterCache(dist, cache_id);
  tensors.Free();
  dist.Finalize();
  std::printf("[INFO] %s %s\n", name, ok ? "passed" : "FAILED");
  return ok ? 0 : 1;
}

}  // namespace example
