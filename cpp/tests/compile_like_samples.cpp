// Compile-only check: this translation unit uses kvsim's headers the way the official
// llm_datadist C++ samples (hicann/hixl examples/cpp) and xLLM's LlmDataDistTransfer use the real
// ones: the same include lines, standard headers left to come in through them, aggregate
// initialisation, default arguments, AscendString option maps and an ACL check macro. Nothing
// here is called or linked; `g++ -std=c++17 -Wall -Wextra -Wpedantic -Werror -fsyntax-only`
// must accept it.

// The samples include only these standard headers; std::string, std::map, std::vector,
// std::pair and std::make_shared must come in through the API headers, as they do for real.
#include <arpa/inet.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <numeric>
#include <thread>

#include "acl/acl.h"
#include "llm_datadist/llm_datadist.h"

// xLLM's spelling of the same header, and a header it includes directly.
#include <llm_datadist/llm_datadist.h>

#include "graph/types.h"

// ---------------------------------------------------------------------------------------------
// In the style of the samples: `using namespace llm_datadist;` at file scope, memory from
// aclrtMalloc, bytes checked with aclrtMemcpy, status printed with %u.

using namespace llm_datadist;

#define KVSIM_TRY_ACL(expr)                                                           \
  do {                                                                                \
    aclError acl_status = expr;                                                       \
    if (acl_status != ACL_ERROR_NONE) {                                               \
      std::cerr << __FILE__ << ":" << __LINE__ << " aclError:" << acl_status << '\n'; \
    }                                                                                 \
  } while (0)

constexpr uint16_t kServerPort = 26000;
constexpr uint16_t kClientPort = 26001;
constexpr uint16_t kServerCluster = 0;
constexpr uint16_t kClientCluster = 1;
constexpr uint32_t kTensorCount = 4U;
constexpr size_t kTensorBytes = 8 * 16 * sizeof(int32_t);
const std::vector<int64_t> kShape = {8, 16};

const char* RecentError() {
  const char* message = aclGetRecentErrMsg();
  return message == nullptr ? "(none)" : message;
}

int StartEndpoint(LlmDataDist& dist, const std::string& device, const std::string& host,
                  const std::string& backend, const std::string& comm_res) {
  std::map<AscendString, AscendString> options;
  options[OPTION_DEVICE_ID] = device.c_str();
  options[OPTION_LISTEN_IP_INFO] = (host + ":" + std::to_string(kServerPort)).c_str();
  if (!backend.empty()) options[OPTION_TRANSFER_BACKEND] = "hixl";
  if (!comm_res.empty()) options[OPTION_LOCAL_COMM_RES] = comm_res.c_str();
  options[OPTION_SYNC_CACHE_WAIT_TIME] = "3000";
  const auto status = dist.Initialize(options);
  if (status != LLM_SUCCESS) {
    printf("Initialize: %u (%s)\n", status, RecentError());
    return -1;
  }
  return LLM_SUCCESS;
}

int RegisterBuffers(LlmDataDist& dist, bool fill, std::vector<void*>& buffers, int64_t& cache_id) {
  CacheDesc desc{};
  desc.num_tensors = kTensorCount;
  desc.data_type = DT_INT32;
  desc.shape = kShape;
  std::vector<uint64_t> addrs;
  for (uint32_t t = 0U; t < kTensorCount; ++t) {
    int32_t* device_buffer = nullptr;
    KVSIM_TRY_ACL(aclrtMalloc((void**)&device_buffer, kTensorBytes, ACL_MEM_MALLOC_HUGE_ONLY));
    if (fill) {
      std::vector<int32_t> host(kTensorBytes / sizeof(int32_t));
      std::iota(host.begin(), host.end(), 0);
      KVSIM_TRY_ACL(aclrtMemcpy(device_buffer, kTensorBytes, &host[0], kTensorBytes,
                                ACL_MEMCPY_HOST_TO_DEVICE));
    }
    addrs.emplace_back(reinterpret_cast<uint64_t>(device_buffer));
    buffers.emplace_back(reinterpret_cast<void*>(device_buffer));
  }
  const auto status = dist.RegisterKvCache(desc, addrs, {}, cache_id);
  if (status != LLM_SUCCESS) {
    printf("RegisterKvCache: %u (%s)\n", status, RecentError());
    return -1;
  }
  for (size_t i = 0U; i < addrs.size(); ++i) {
    printf("tensor %zu at %p\n", i, reinterpret_cast<void*>(addrs[i]));
  }
  return 0;
}

std::vector<ClusterInfo> PeerList(const char* local_host, const char* remote_host,
                                  bool with_local) {
  ClusterInfo peer;
  peer.remote_cluster_id = kServerCluster;
  if (with_local) {
    IpInfo local;
    local.ip = local_host;
    local.port = kClientPort;
    peer.local_ip_infos.emplace_back(std::move(local));
  }
  IpInfo remote;
  remote.ip = remote_host;
  remote.port = kServerPort;
  peer.remote_ip_infos.emplace_back(std::move(remote));
  std::vector<ClusterInfo> peers;
  peers.emplace_back(std::move(peer));
  return peers;
}

int LinkAndUnlink(LlmDataDist& dist, const char* local_host, const char* remote_host) {
  std::vector<Status> rets;
  auto status = dist.LinkLlmClusters(PeerList(local_host, remote_host, true), rets, 5000);
  status = dist.LinkLlmClusters(PeerList(local_host, remote_host, true), rets);
  if (status != LLM_SUCCESS) printf("LinkLlmClusters: %u (%s)\n", status, RecentError());
  status = dist.UnlinkLlmClusters(PeerList(local_host, remote_host, false), rets, 5000);
  status = dist.UnlinkLlmClusters(PeerList(local_host, remote_host, false), rets);
  return status == LLM_SUCCESS ? 0 : -1;
}

int PullFromServer(LlmDataDist& dist, int64_t local_cache_id) {
  std::vector<uint64_t> remote_blocks{1, 2, 3};
  std::vector<uint64_t> local_blocks{1, 2, 3};
  CacheIndex source = {};
  source.cluster_id = kServerCluster;
  source.cache_id = 1;
  source.batch_index = 0;
  Cache target{};
  target.cache_id = local_cache_id;
  auto status = dist.PullKvBlocks(source, target, remote_blocks, local_blocks);
  if (status != LLM_SUCCESS) return -1;
  status = dist.PullKvCache(source, target, 0);
  return status == LLM_SUCCESS ? 0 : -1;
}

int PushToClient(LlmDataDist& dist, int64_t local_cache_id) {
  std::vector<uint64_t> blocks{5, 6, 7};
  Cache source{};
  source.cache_id = local_cache_id;
  auto status = LLM_SUCCESS;
  CacheIndex target = {};
  target.cluster_id = kClientCluster;
  target.cache_id = 1;
  for (uint32_t layer = 0U; layer < kTensorCount; ++layer) {
    KvCacheExtParam ext{};
    ext.src_layer_range = std::pair<int32_t, int32_t>(layer, layer);
    ext.dst_layer_range = std::pair<int32_t, int32_t>(layer, layer);
    ext.tensor_num_per_layer = 1;
    status = dist.PushKvBlocks(source, target, blocks, blocks, ext);
    if (status != LLM_SUCCESS) return -1;
  }
  CacheIndex whole = {};
  whole.cluster_id = kClientCluster;
  whole.cache_id = 1;
  whole.batch_index = 4;
  KvCacheExtParam first_layer{};
  first_layer.src_layer_range = std::pair<int32_t, int32_t>(0, 0);
  first_layer.dst_layer_range = std::pair<int32_t, int32_t>(0, 0);
  first_layer.tensor_num_per_layer = kTensorCount;
  status = dist.PushKvCache(source, whole, 4, -1, first_layer);
  return status == LLM_SUCCESS ? 0 : -1;
}

int SwitchRoles(LlmDataDist& dist, const char* host) {
  std::map<AscendString, AscendString> none;
  auto status = dist.SetRole(LlmRole::kDecoder, none);
  std::map<AscendString, AscendString> serve;
  serve[OPTION_LISTEN_IP_INFO] = (std::string(host) + ":" + std::to_string(kClientPort)).c_str();
  status = dist.SetRole(LlmRole::kPrompt, serve);
  status = dist.SetRole(LlmRole::kMix);
  return status == LLM_SUCCESS ? 0 : -1;
}

int CheckBlocks(const std::vector<void*>& buffers, const std::vector<uint32_t>& blocks) {
  constexpr size_t kBlockElements = 16;
  for (auto buffer : buffers) {
    std::vector<int32_t> host(kTensorBytes / sizeof(int32_t));
    KVSIM_TRY_ACL(
        aclrtMemcpy(&host[0], kTensorBytes, buffer, kTensorBytes, ACL_MEMCPY_DEVICE_TO_HOST));
    for (auto block : blocks) {
      for (size_t i = 0U; i < kBlockElements; ++i) {
        const auto expected = block * kBlockElements + i;
        if (static_cast<uint32_t>(host[expected]) != expected) return -1;
      }
    }
  }
  return 0;
}

void Teardown(LlmDataDist& dist, int64_t cache_id, const std::vector<void*> buffers) {
  if (cache_id > 0) {
    const auto status = dist.UnregisterKvCache(cache_id);
    if (status != 0) printf("UnregisterKvCache: %u (%s)\n", status, RecentError());
  }
  for (auto buffer : buffers) {
    aclrtFree(buffer);
  }
  dist.Finalize();
}

int RunLikeASample(const char* device, const char* local_host, const char* remote_host) {
  LlmDataDist dist(kClientCluster, LlmRole::kDecoder);
  if (StartEndpoint(dist, device, local_host, "", "") != 0) return -1;
  std::vector<void*> buffers;
  int64_t cache_id = -1;
  if (RegisterBuffers(dist, false, buffers, cache_id) != 0) {
    Teardown(dist, cache_id, buffers);
    return -1;
  }
  std::this_thread::sleep_for(std::chrono::seconds(5));
  const int result = LinkAndUnlink(dist, local_host, remote_host) + PullFromServer(dist, cache_id) +
                     PushToClient(dist, cache_id) + SwitchRoles(dist, local_host) +
                     CheckBlocks(buffers, {0, 1, 2, 3});
  usleep(100000U);
  Teardown(dist, cache_id, buffers);
  return result;
}

// The rest of the ACL subset, as a transfer program would set up a device by hand.
int DriveAclRuntime() {
  KVSIM_TRY_ACL(aclInit(nullptr));
  uint32_t devices = 0;
  KVSIM_TRY_ACL(aclrtGetDeviceCount(&devices));
  KVSIM_TRY_ACL(aclrtSetDevice(0));
  int32_t current = -1;
  KVSIM_TRY_ACL(aclrtGetDevice(&current));
  aclrtRunMode mode = ACL_DEVICE;
  KVSIM_TRY_ACL(aclrtGetRunMode(&mode));
  aclrtContext context = nullptr;
  KVSIM_TRY_ACL(aclrtCreateContext(&context, current));
  KVSIM_TRY_ACL(aclrtSetCurrentContext(context));
  KVSIM_TRY_ACL(aclrtGetCurrentContext(&context));
  aclrtStream stream = nullptr;
  KVSIM_TRY_ACL(aclrtCreateStream(&stream));
  aclrtEvent event = nullptr;
  KVSIM_TRY_ACL(aclrtCreateEvent(&event));
  void* device_buffer = nullptr;
  void* host_buffer = nullptr;
  KVSIM_TRY_ACL(aclrtMalloc(&device_buffer, 4096, ACL_MEM_MALLOC_HUGE_FIRST));
  KVSIM_TRY_ACL(aclrtMallocHost(&host_buffer, 4096));
  KVSIM_TRY_ACL(aclrtMemset(device_buffer, 4096, 0, 4096));
  KVSIM_TRY_ACL(
      aclrtMemcpyAsync(device_buffer, 4096, host_buffer, 4096, ACL_MEMCPY_HOST_TO_DEVICE, stream));
  KVSIM_TRY_ACL(aclrtRecordEvent(event, stream));
  KVSIM_TRY_ACL(aclrtSynchronizeEvent(event));
  KVSIM_TRY_ACL(aclrtSynchronizeStream(stream));
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  KVSIM_TRY_ACL(aclrtGetMemInfo(ACL_HBM_MEM, &free_bytes, &total_bytes));
  KVSIM_TRY_ACL(aclrtFreeHost(host_buffer));
  KVSIM_TRY_ACL(aclrtFree(device_buffer));
  KVSIM_TRY_ACL(aclrtDestroyEvent(event));
  KVSIM_TRY_ACL(aclrtDestroyStream(stream));
  KVSIM_TRY_ACL(aclrtDestroyContext(context));
  KVSIM_TRY_ACL(aclrtResetDevice(current));
  const aclError last = aclFinalize();
  if (last == ACL_ERROR_RT_MEMORY_ALLOCATION || last == ACL_ERROR_REPEAT_FINALIZE) return -1;
  return mode == ACL_HOST && devices > 0 ? 0 : -1;
}

// ---------------------------------------------------------------------------------------------
// In the style of xLLM's transfer: `using namespace llm_datadist;` inside its own namespace, one
// registration per layer and tensor, layer-wise PushKvBlocks from the decode-linked prefill side.

namespace engine {

using namespace llm_datadist;

enum class TensorKind { kKey, kValue, kConvState };

struct LayerCache {
  TensorKind kind;
  Cache cache;
};

const std::map<int, ge::DataType> kElementTypes = {
    {0, ge::DT_BOOL},  {1, ge::DT_UINT8}, {2, ge::DT_INT8}, {3, ge::DT_INT16},
    {4, ge::DT_INT32}, {5, ge::DT_INT64}, {6, ge::DT_BF16}, {7, ge::DT_FLOAT16},
    {8, ge::DT_FLOAT}, {9, ge::DT_DOUBLE}};

class KvTransfer {
 public:
  KvTransfer(const std::string& host, uint16_t port, bool prefill)
      : host_(host), port_(port), role_(prefill ? LlmRole::kPrompt : LlmRole::kDecoder) {
    in_addr address{};
    inet_pton(AF_INET, host.c_str(), &address);
    cluster_id_ = (static_cast<uint64_t>(ntohl(address.s_addr)) << 32) | port;
    dist_ = std::make_shared<LlmDataDist>(cluster_id_, role_);
  }

  bool Initialize(int32_t device_id) {
    std::map<AscendString, AscendString> options;
    options[OPTION_DEVICE_ID] = std::to_string(device_id).c_str();
    if (role_ == LlmRole::kPrompt) {
      const std::string listen = host_ + ":" + std::to_string(port_);
      options[OPTION_LISTEN_IP_INFO] = listen.c_str();
    }
    const auto ret = dist_->Initialize(options);
    if (ret != LLM_SUCCESS) std::cerr << "Initialize failed, ret = " << std::hex << ret << '\n';
    return ret == LLM_SUCCESS;
  }

  void Register(size_t layer, TensorKind kind, void* data, const std::vector<int64_t>& sizes,
                int element_type) {
    const auto address = reinterpret_cast<uintptr_t>(data);
    std::vector<uint64_t> addrs = {static_cast<uint64_t>(address)};
    LayerCache entry{kind, Cache{}};
    entry.cache.tensor_addrs = {address};
    CacheDesc& desc = entry.cache.cache_desc;
    desc.num_tensors = 1;
    desc.data_type = kElementTypes.at(element_type);
    desc.shape = sizes;
    const auto ret = dist_->RegisterKvCache(desc, addrs, {}, entry.cache.cache_id);
    if (ret != LLM_SUCCESS) return;
    if (layers_.size() <= layer) layers_.resize(layer + 1);
    layers_[layer].push_back(entry);
  }

  ClusterInfo Peer(uint64_t cluster_id, const std::string& remote_host, uint16_t remote_port) {
    ClusterInfo cluster_info;
    IpInfo local_ip_info;
    IpInfo remote_ip_info;
    local_ip_info.ip = host_.c_str();
    local_ip_info.port = port_;
    remote_ip_info.ip = remote_host.c_str();
    remote_ip_info.port = remote_port;
    cluster_info.remote_cluster_id = cluster_id;
    cluster_info.local_ip_infos.emplace_back(std::move(local_ip_info));
    cluster_info.remote_ip_infos.emplace_back(std::move(remote_ip_info));
    return cluster_info;
  }

  bool Link(uint64_t cluster_id, const std::string& remote_host, uint16_t remote_port) {
    std::vector<llm_datadist::Status> rets;
    std::vector<ClusterInfo> clusters;
    clusters.emplace_back(Peer(cluster_id, remote_host, remote_port));
    return dist_->LinkLlmClusters(clusters, rets, /*timeout_in_millis=*/60000) == LLM_SUCCESS;
  }

  bool Unlink(uint64_t cluster_id, const std::string& remote_host, uint16_t remote_port,
              bool force_flag = true) {
    std::vector<llm_datadist::Status> rets;
    std::vector<ClusterInfo> clusters;
    clusters.emplace_back(Peer(cluster_id, remote_host, remote_port));
    return dist_->UnlinkLlmClusters(clusters, rets, 1000, force_flag) == LLM_SUCCESS;
  }

  // CacheIndex{cluster, id} leaves batch_index and reserved to value-initialisation; -Wextra
  // warns about that with the real header too, and xLLM builds without -Wextra.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
  bool PushLayer(size_t layer, uint64_t dst_cluster_id, const std::vector<uint64_t>& src_blocks,
                 const std::vector<uint64_t>& dst_blocks) {
    bool ok = true;
    for (const LayerCache& entry : layers_.at(layer)) {
      CacheIndex cache_index{dst_cluster_id, entry.cache.cache_id};
      KvCacheExtParam ext_param{};
      ext_param.src_layer_range = {0, 0};
      ext_param.dst_layer_range = {0, 0};
      ext_param.tensor_num_per_layer = 1;
      const auto ret =
          dist_->PushKvBlocks(entry.cache, cache_index, src_blocks, dst_blocks, ext_param);
      ok = ok && ret == LLM_SUCCESS;
    }
    return ok;
  }

  bool Pull(uint64_t src_cluster_id, const std::vector<uint64_t>& src_blocks,
            const std::vector<uint64_t>& dst_blocks) {
    bool ok = true;
    for (const auto& layer : layers_) {
      for (const LayerCache& entry : layer) {
        CacheIndex cache_index{src_cluster_id, entry.cache.cache_id};
        KvCacheExtParam ext_param{};
        ext_param.src_layer_range = {0, 0};
        ext_param.dst_layer_range = {0, 0};
        ext_param.tensor_num_per_layer = 1;
        ok = ok && dist_->PullKvBlocks(cache_index, entry.cache, src_blocks, dst_blocks,
                                       ext_param) == LLM_SUCCESS;
      }
    }
    return ok;
  }
#pragma GCC diagnostic pop

  void Finalize() {
    dist_->Finalize();
  }

 private:
  std::string host_;
  uint16_t port_;
  uint64_t cluster_id_ = 0;
  LlmRole role_ = LlmRole::kMix;
  std::shared_ptr<LlmDataDist> dist_;
  std::vector<std::vector<LayerCache>> layers_;
};

}  // namespace engine

int RunLikeAnEngine(void* key, void* value) {
  engine::KvTransfer prefill("10.0.0.1", 26000, true);
  if (!prefill.Initialize(0)) return -1;
  prefill.Register(0, engine::TensorKind::kKey, key, {16, 128, 8, 128}, 6);
  prefill.Register(0, engine::TensorKind::kValue, value, {16, 128, 8, 128}, 6);
  const uint64_t decode_cluster = (uint64_t{0x0A000002} << 32) | 26001;
  const bool ok = prefill.PushLayer(0, decode_cluster, {1, 2}, {3, 4}) &&
                  prefill.Pull(decode_cluster, {1}, {1}) &&
                  prefill.Unlink(decode_cluster, "10.0.0.2", 26001);
  prefill.Finalize();
  return ok ? 0 : -1;
}
