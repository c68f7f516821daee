// The libraries a C++ program links (libllm_datadist, libascendcl) through the public headers
// only, in the one-process world a program gets without the launcher (preset atlas-a2: devices
// 0-7 on node 0 at 172.16.0.1, 8-15 on node 1 at 172.16.0.2).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "acl/acl.h"
#include "llm_datadist/llm_datadist.h"

namespace {

using namespace llm_datadist;

constexpr std::size_t kRowBytes = 128;
constexpr std::size_t kRows = 8;

// `n` tensors of kRows x kRowBytes on `device`, byte i of tensor t = seed + 3t + i.
std::vector<uint64_t> device_tensors(int32_t device, int n, int seed) {
  EXPECT_EQ(aclrtSetDevice(device), ACL_SUCCESS);
  std::vector<uint64_t> addrs;
  for (int t = 0; t < n; ++t) {
    void* p = nullptr;
    EXPECT_EQ(aclrtMalloc(&p, kRows * kRowBytes, ACL_MEM_MALLOC_HUGE_ONLY), ACL_SUCCESS);
    std::vector<unsigned char> host(kRows * kRowBytes);
    for (std::size_t i = 0; i < host.size(); ++i) {
      host[i] = static_cast<unsigned char>(seed + 3 * t + static_cast<int>(i));
    }
    EXPECT_EQ(aclrtMemcpy(p, host.size(), host.data(), host.size(), ACL_MEMCPY_HOST_TO_DEVICE),
              ACL_SUCCESS);
    addrs.push_back(reinterpret_cast<uint64_t>(p));
  }
  return addrs;
}

std::vector<unsigned char> device_bytes(uint64_t addr, std::size_t n) {
  std::vector<unsigned char> out(n);
  EXPECT_EQ(aclrtMemcpy(out.data(), n, reinterpret_cast<void*>(addr), n, ACL_MEMCPY_DEVICE_TO_HOST),
            ACL_SUCCESS);
  return out;
}

CacheDesc desc(uint32_t num_tensors) {
  CacheDesc d{};
  d.num_tensors = num_tensors;
  d.data_type = ge::DT_INT8;
  d.shape = {static_cast<int64_t>(kRows), static_cast<int64_t>(kRowBytes)};
  return d;
}

TEST(AclRuntime, DeviceMemoryHoldsWhatMemcpyAndMemsetPutThere) {
  EXPECT_EQ(aclInit(nullptr), ACL_SUCCESS);
  EXPECT_EQ(aclInit(nullptr), ACL_ERROR_REPEAT_INITIALIZE);
  int32_t device = -1;
  uint32_t count = 0;
  EXPECT_EQ(aclrtGetDeviceCount(&count), ACL_SUCCESS);
  EXPECT_EQ(count, 16u);
  EXPECT_EQ(aclrtSetDevice(16), ACL_ERROR_RT_INVALID_DEVICEID);
  EXPECT_NE(aclGetRecentErrMsg(), nullptr);
  ASSERT_EQ(aclrtSetDevice(3), ACL_SUCCESS);
  EXPECT_EQ(aclrtGetDevice(&device), ACL_SUCCESS);
  EXPECT_EQ(device, 3);

  void* a = nullptr;
  void* b = nullptr;
  ASSERT_EQ(aclrtMalloc(&a, 4096, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
  ASSERT_EQ(aclrtMalloc(&b, 4096, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % (2u << 20), 0u);
  EXPECT_EQ(aclrtMalloc(&a, 0, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
  std::string text = "kvsim keeps device bytes exactly";
  ASSERT_EQ(aclrtMemcpy(a, 4096, text.data(), text.size(), ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS);
  ASSERT_EQ(aclrtMemcpy(b, 4096, a, text.size(), ACL_MEMCPY_DEVICE_TO_DEVICE), ACL_SUCCESS);
  ASSERT_EQ(aclrtMemset(b, 4096, 'K', 5), ACL_SUCCESS);
  std::string back(text.size(), '\0');
  ASSERT_EQ(aclrtMemcpy(back.data(), back.size(), b, back.size(), ACL_MEMCPY_DEVICE_TO_HOST),
            ACL_SUCCESS);
  EXPECT_EQ(back, "KKKKK keeps device bytes exactly");
  EXPECT_EQ(aclrtMemcpy(back.data(), 2, b, back.size(), ACL_MEMCPY_DEVICE_TO_HOST),
            ACL_ERROR_INVALID_PARAM);  // count > destMax
  void* host = nullptr;
  ASSERT_EQ(aclrtMallocHost(&host, 64), ACL_SUCCESS);
  std::memset(host, 1, 64);  // host memory is the program's own
  EXPECT_EQ(aclrtFreeHost(host), ACL_SUCCESS);
  EXPECT_EQ(aclrtFree(a), ACL_SUCCESS);
  EXPECT_EQ(aclrtFree(a), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtFree(b), ACL_SUCCESS);
  EXPECT_EQ(aclFinalize(), ACL_SUCCESS);
}

TEST(LlmDataDist, PromptAndDecoderInOneProgramPullAndPushVerifiedBytes) {
  // Two instances in one process: allowed for C++ (a diagnostic, unlike Python's one per
  // process), so that unit tests of transfer code need no launcher.
  LlmDataDist prompt(0, LlmRole::kPrompt);
  LlmDataDist decoder(1, LlmRole::kDecoder);
  ASSERT_EQ(
      prompt.Initialize({{OPTION_DEVICE_ID, "0"}, {OPTION_LISTEN_IP_INFO, "172.16.0.1:26000"}}),
      LLM_SUCCESS);
  ASSERT_EQ(decoder.Initialize({{OPTION_DEVICE_ID, "8"}}), LLM_SUCCESS);

  const auto p = device_tensors(0, 4, 1);
  const auto d = device_tensors(8, 4, 100);
  int64_t pid = 0;
  int64_t did = 0;
  ASSERT_EQ(prompt.RegisterKvCache(desc(4), p, {}, pid), LLM_SUCCESS);
  ASSERT_EQ(decoder.RegisterKvCache(desc(4), d, {}, did), LLM_SUCCESS);
  EXPECT_EQ(pid, 1);
  EXPECT_EQ(did, 1);

  ClusterInfo to_prompt{};
  to_prompt.remote_cluster_id = 0;
  IpInfo local_ip{};
  local_ip.ip = "172.16.0.2";
  IpInfo remote_ip{};
  remote_ip.ip = "172.16.0.1";
  remote_ip.port = 26000;
  to_prompt.local_ip_infos.push_back(local_ip);
  to_prompt.remote_ip_infos.push_back(remote_ip);
  std::vector<Status> rets;
  ASSERT_EQ(decoder.LinkLlmClusters({to_prompt}, rets), LLM_SUCCESS);
  ASSERT_EQ(rets, std::vector<Status>{LLM_SUCCESS});

  CacheIndex remote{};
  remote.cluster_id = 0;
  remote.cache_id = pid;
  Cache local{};
  local.cache_id = did;
  ASSERT_EQ(decoder.PullKvBlocks(remote, local, {2, 3}, {5, 6}), LLM_SUCCESS);
  for (int t = 0; t < 4; ++t) {
    EXPECT_EQ(device_bytes(d[t] + 5 * kRowBytes, 2 * kRowBytes),
              device_bytes(p[t] + 2 * kRowBytes, 2 * kRowBytes))
        << t;
  }
  Cache src{};
  src.cache_id = did;
  src.cache_desc = desc(4);
  KvCacheExtParam layer0{};
  layer0.src_layer_range = {0, 0};
  layer0.dst_layer_range = {0, 0};
  remote.batch_index = 7;
  ASSERT_EQ(decoder.PushKvCache(src, remote, 1, -1, layer0), LLM_SUCCESS);
  EXPECT_EQ(device_bytes(p[0] + 7 * kRowBytes, kRowBytes),
            device_bytes(d[0] + kRowBytes, kRowBytes));
  EXPECT_NE(device_bytes(p[2] + 7 * kRowBytes, kRowBytes),
            device_bytes(d[2] + kRowBytes, kRowBytes));

  // A refused call says why in aclGetRecentErrMsg, in the library's words where it has them.
  CacheIndex blocks_at{};
  blocks_at.cache_id = pid;
  EXPECT_EQ(decoder.PullKvBlocks(blocks_at, local, {2}, {5, 6}), LLM_PARAM_INVALID);
  ASSERT_NE(aclGetRecentErrMsg(), nullptr);
  EXPECT_STREQ(aclGetRecentErrMsg(), "number of src_blocks (1) mismatches that of dst_blocks (2)");
  // What the C++ API has no feature for, whatever the arguments.
  Cache any{};
  EXPECT_EQ(decoder.AllocateCache(desc(1), any), LLM_FEATURE_NOT_ENABLED);
  EXPECT_STREQ(aclGetRecentErrMsg(), "The feature is not supported.");
  EXPECT_EQ(decoder.DeallocateCache(1), LLM_FEATURE_NOT_ENABLED);
  EXPECT_EQ(decoder.CopyKvCache(src, src), LLM_FEATURE_NOT_ENABLED);
  EXPECT_EQ(decoder.CopyKvBlocks(src, src, {0}, {{1}}), LLM_FEATURE_NOT_ENABLED);
  // A switch with links is refused; after the unlink it is not.
  EXPECT_EQ(decoder.SetRole(LlmRole::kPrompt), LLM_EXIST_LINK);
  ASSERT_EQ(decoder.UnlinkLlmClusters({to_prompt}, rets), LLM_SUCCESS);
  EXPECT_EQ(decoder.SetRole(LlmRole::kPrompt), LLM_SUCCESS);
  decoder.Finalize();
  prompt.Finalize();
}

TEST(LlmDataDist, RolesCheckNothingAndSetRoleListensWhereItIsTold) {
  // A decoder that listens and a prompt that links to it and pulls from it: the C++ API checks
  // no roles on links, pulls or pushes (llm_datadist_impl.cc), unlike Python's v1.
  LlmDataDist decoder(11, LlmRole::kDecoder);
  LlmDataDist prompt(10, LlmRole::kPrompt);
  ASSERT_EQ(
      decoder.Initialize({{OPTION_DEVICE_ID, "9"}, {OPTION_LISTEN_IP_INFO, "172.16.0.2:26001"}}),
      LLM_SUCCESS);
  ASSERT_EQ(prompt.Initialize({{OPTION_DEVICE_ID, "1"}}), LLM_SUCCESS);
  const auto d = device_tensors(9, 2, 7);
  const auto p = device_tensors(1, 2, 70);
  int64_t did = 0;
  int64_t pid = 0;
  ASSERT_EQ(decoder.RegisterKvCache(desc(2), d, {}, did), LLM_SUCCESS);
  ASSERT_EQ(prompt.RegisterKvCache(desc(2), p, {}, pid), LLM_SUCCESS);
  ClusterInfo to_decoder{};
  to_decoder.remote_cluster_id = 11;
  IpInfo local{};
  local.ip = "172.16.0.1";
  IpInfo remote{};
  remote.ip = "172.16.0.2";
  remote.port = 26001;
  to_decoder.local_ip_infos.push_back(local);
  to_decoder.remote_ip_infos.push_back(remote);
  std::vector<Status> rets;
  ASSERT_EQ(prompt.LinkLlmClusters({to_decoder}, rets), LLM_SUCCESS);
  CacheIndex at_decoder{};
  at_decoder.cluster_id = 11;
  at_decoder.cache_id = did;
  Cache mine{};
  mine.cache_id = pid;
  ASSERT_EQ(prompt.PullKvBlocks(at_decoder, mine, {4}, {0}), LLM_SUCCESS);
  EXPECT_EQ(device_bytes(p[1], kRowBytes), device_bytes(d[1] + 4 * kRowBytes, kRowBytes));
  ASSERT_EQ(prompt.UnlinkLlmClusters({to_decoder}, rets), LLM_SUCCESS);
  // With OPTION_LISTEN_IP_INFO the instance serves there after the switch (SetRole).
  ASSERT_EQ(prompt.SetRole(LlmRole::kDecoder, {{OPTION_LISTEN_IP_INFO, "172.16.0.1:26002"}}),
            LLM_SUCCESS);
  ClusterInfo to_prompt{};
  to_prompt.remote_cluster_id = 10;
  IpInfo back{};
  back.ip = "172.16.0.1";
  back.port = 26002;
  to_prompt.remote_ip_infos.push_back(back);
  EXPECT_EQ(decoder.LinkLlmClusters({to_prompt}, rets), LLM_SUCCESS);  // it listens: no local ip
  EXPECT_EQ(decoder.UnlinkLlmClusters({to_prompt}, rets), LLM_SUCCESS);
  prompt.Finalize();
  decoder.Finalize();
}

TEST(NoWorld, EveryCallFailsWithTheLibrarysCodeAndSaysWhy) {
  const char* preset = std::getenv("KVSIM_PRESET");
  if (preset == nullptr || std::string(preset) != "no-such-preset") {
    GTEST_SKIP() << "run by the test cpp_library_without_a_world";
  }
  void* p = nullptr;
  EXPECT_EQ(aclrtMalloc(&p, 64, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_RT_INTERNAL_ERROR);
  ASSERT_NE(aclGetRecentErrMsg(), nullptr);
  LlmDataDist dist(0, LlmRole::kPrompt);
  EXPECT_EQ(dist.Initialize({{OPTION_DEVICE_ID, "0"}}), LLM_FAILED);
}

}  // namespace
