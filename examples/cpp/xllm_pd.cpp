// xllm_pd: a prefill/decode pair that moves a paged KV cache the way xLLM's LlmDataDistTransfer
// does (jd-opensource/xllm xllm/core/framework/kv_cache_transfer/llm_data_dist_transfer.cpp).
// Both instances take their cluster id from ip and port and register each layer's K and V tensor
// as a cache of its own (num_tensors 1, shape {blocks, block_size, kv_heads, head_dim}, BF16), so
// ids run 1..2L alike on both sides. Only prefill listens (<ip>:26000); decode initializes with
// the device alone and links to it. Prefill then pushes layer after layer, each cache with
// PushKvBlocks(layer range (0,0), one tensor per layer) to the peer's cache of the same id, and
// reports "pushed" over TCP (<decode ip>:26004). Decode checks every byte of every layer, unlinks
// with force_flag as xLLM does, reports "done" (<prefill ip>:26005) and both finalize.
// Usage: xllm_pd prefill|decode device_id local_ip remote_ip
#include <arpa/inet.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "common.h"

namespace example {
namespace {

constexpr char kUsage[] = "xllm_pd prefill|decode device_id local_ip remote_ip";

constexpr uint32_t kLayers = 4;
constexpr uint32_t kCaches = 2 * kLayers;  // K and V per layer, registered K first
constexpr uint32_t kNumBlocks = 16;
constexpr uint32_t kBlockSize = 16;  // tokens per block
constexpr uint32_t kKvHeads = 2;
constexpr uint32_t kHeadDim = 8;
constexpr size_t kBlockBytes = size_t{kBlockSize} * kKvHeads * kHeadDim * 2;  // BF16

// The blocks one request occupies on each side.
const std::vector<uint64_t> kPrefillBlocks = {1, 2, 3, 8, 13};
const std::vector<uint64_t> kDecodeBlocks = {4, 5, 6, 0, 15};

constexpr uint16_t kPrefillListenPort = 26000;
constexpr uint16_t kDecodePort = 26001;  // in decode's cluster id and local IpInfo; not listened on
constexpr uint16_t kPushedPort = 26004;  // decode listens: prefill has pushed every layer
constexpr uint16_t kDonePort = 26005;    // prefill listens: decode has verified and unlinked
constexpr char kPushedMessage = 'P';
constexpr char kDoneMessage = 'D';
constexpr int kControlTimeoutSec = 60;
constexpr int32_t kLinkTimeoutMs = 60000;   // xLLM's link_cluster
constexpr int32_t kUnlinkTimeoutMs = 1000;  // xLLM's unlink_cluster

constexpr int kDecodeLinkDelaySec = 2;  // decode links once prefill is up
constexpr int kRequestDelaySec = 5;     // a request reaches prefill after decode has linked
constexpr int kLayerComputeMs = 2;      // prefill's forward pass of one layer

constexpr uint32_t kPrefillSeed = 0x70;  // 'p'
constexpr uint32_t kDecodeSeed = 0x64;   // 'd': stale content of decode's blocks

// xLLM's convert_ip_port_to_uint64: the IPv4 address in network order above the port.
bool ClusterIdOf(const std::string& ip, uint16_t port, uint64_t& cluster_id) {
  in_addr addr{};
  if (inet_pton(AF_INET, ip.c_str(), &addr) != 1) {
    std::printf("[ERROR] not an IPv4 address: %s\n", ip.c_str());
    return false;
  }
  cluster_id = (static_cast<uint64_t>(addr.s_addr) << 32) | port;
  return true;
}

// Allocates and fills the 2L tensors and registers each as its own cache; caches[2l] is layer
// l's K and caches[2l + 1] its V, each a Cache filled in as xLLM keeps it.
bool SetUpLayerCaches(LlmDataDist& dist, DeviceTensors& tensors, uint32_t seed,
                      std::vector<Cache>& caches) {
  EXAMPLE_CHECK(tensors.Allocate());
  EXAMPLE_CHECK(tensors.Fill(seed));
  const std::vector<int64_t> shape = {kNumBlocks, kBlockSize, kKvHeads, kHeadDim};
  for (uint32_t t = 0; t < kCaches; ++t) {
    const uint64_t addr = reinterpret_cast<uint64_t>(tensors.tensor(t));
    Cache cache{};
    cache.tensor_addrs = {static_cast<uintptr_t>(addr)};
    cache.cache_desc.num_tensors = 1;
    cache.cache_desc.data_type = llm_datadist::DT_BF16;
    cache.cache_desc.shape = shape;
    std::printf("[INFO] layer %u %s:\n", t / 2, t % 2 == 0 ? "K" : "V");
    EXAMPLE_CHECK(RegisterCache(dist, {addr}, cache.cache_desc.data_type, shape, cache.cache_id));
    if (cache.cache_id != static_cast<int64_t>(t) + 1) {
      std::printf("[ERROR] registration %u got cache_id %lld; the peer addresses it as %u\n", t,
                  static_cast<long long>(cache.cache_id), t + 1);
      return false;
    }
    caches.push_back(cache);
  }
  return true;
}

// push_layer_registered_caches: per layer, wait for its compute, then push each of its caches to
// the peer cache with the same id. A failed push is reported and the loop carries on.
bool PushLayers(LlmDataDist& dist, const std::vector<Cache>& caches, uint64_t decode_cluster) {
  bool ok = true;
  for (uint32_t layer = 0; layer < kLayers; ++layer) {
    std::this_thread::sleep_for(std::chrono::milliseconds(kLayerComputeMs));
    for (uint32_t t = 2 * layer; t < 2 * layer + 2; ++t) {
      const Cache& cache = caches[t];
      CacheIndex dst{};
      dst.cluster_id = decode_cluster;
      dst.cache_id = cache.cache_id;
      KvCacheExtParam ext{};
      ext.src_layer_range = {0, 0};
      ext.dst_layer_range = {0, 0};
      ext.tensor_num_per_layer = 1;
      std::printf("[INFO] layer %u %s: blocks to decode cache %lld\n", layer,
                  t % 2 == 0 ? "K" : "V", static_cast<long long>(cache.cache_id));
      ok = LlmOk(dist.PushKvBlocks(cache, dst, kPrefillBlocks, kDecodeBlocks, ext),
                 "PushKvBlocks") &&
           ok;
    }
  }
  return ok;
}

bool RunPrefill(const Args& args, LlmDataDist& dist, DeviceTensors& tensors) {
  std::vector<Cache> caches;
  EXAMPLE_CHECK(SetUpLayerCaches(dist, tensors, kPrefillSeed, caches));
  ControlListener done;
  EXAMPLE_CHECK(done.Open(args.local_ip, kDonePort));
  uint64_t decode_cluster = 0;
  EXAMPLE_CHECK(ClusterIdOf(args.remote_ip, kDecodePort, decode_cluster));

  std::this_thread::sleep_for(std::chrono::seconds(kRequestDelaySec));
  bool ok = PushLayers(dist, caches, decode_cluster);
  ok = SendMessage(args.remote_ip, kPushedPort, kPushedMessage) && ok;
  ok = done.WaitFor(kDoneMessage, kControlTimeoutSec) && ok;
  const ExpectedContent own(kPrefillSeed, kCaches, kNumBlocks);
  ok = VerifyTensors(tensors, own, "prefill KV cache after the pushes") && ok;
  return ok;
}

bool RunDecode(const Args& args, LlmDataDist& dist, DeviceTensors& tensors) {
  std::vector<Cache> caches;
  EXAMPLE_CHECK(SetUpLayerCaches(dist, tensors, kDecodeSeed, caches));
  ControlListener pushed;
  EXAMPLE_CHECK(pushed.Open(args.local_ip, kPushedPort));
  uint64_t prefill_cluster = 0;
  EXAMPLE_CHECK(ClusterIdOf(args.remote_ip, kPrefillListenPort, prefill_cluster));
  const ClusterInfo prefill =
      MakePeer(prefill_cluster, args.local_ip, kDecodePort, args.remote_ip, kPrefillListenPort);

  std::this_thread::sleep_for(std::chrono::seconds(kDecodeLinkDelaySec));
  EXAMPLE_CHECK(LinkPeer(dist, prefill, kLinkTimeoutMs));
  bool ok = pushed.WaitFor(kPushedMessage, kControlTimeoutSec);
  if (ok) {
    ExpectedContent expected(kDecodeSeed, kCaches, kNumBlocks);
    for (uint32_t t = 0; t < kCaches; ++t) {
      for (size_t i = 0; i < kPrefillBlocks.size(); ++i) {
        expected.Transfer(t, static_cast<uint32_t>(kDecodeBlocks[i]), kPrefillSeed, t,
                          static_cast<uint32_t>(kPrefillBlocks[i]));
      }
    }
    ok = VerifyTensors(tensors, expected, "decode KV cache");
  }
  ok = UnlinkPeer(dist, prefill, kUnlinkTimeoutMs, /*force=*/true) && ok;
  ok = SendMessage(args.remote_ip, kDonePort, kDoneMessage) && ok;
  return ok;
}

int Main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // keep the log in order when stdout is a pipe
  const bool prefill = argc > 1 && std::strcmp(argv[1], "prefill") == 0;
  const bool decode = argc > 1 && std::strcmp(argv[1], "decode") == 0;
  if (!prefill && !decode) {
    std::printf("[ERROR] first argument must be prefill or decode; usage: %s\n", kUsage);
    return 1;
  }
  Args args;
  if (!ParseArgs(argc - 1, argv + 1, /*takes_remote=*/true, /*takes_backend=*/false, kUsage,
                 args)) {
    return 1;
  }
  uint64_t cluster_id = 0;
  if (!ClusterIdOf(args.local_ip, prefill ? kPrefillListenPort : kDecodePort, cluster_id)) {
    return 1;
  }
  std::printf("[INFO] %s instance, cluster_id = 0x%016llX\n", argv[1],
              static_cast<unsigned long long>(cluster_id));
  LlmDataDist dist(cluster_id, prefill ? LlmRole::kPrompt : LlmRole::kDecoder);
  const Options options = InitOptions(args, prefill ? kPrefillListenPort : 0);
  if (!LlmOk(dist.Initialize(options), "Initialize")) return 1;

  DeviceTensors tensors(kCaches, kNumBlocks, kBlockBytes);
  const bool ok = prefill ? RunPrefill(args, dist, tensors) : RunDecode(args, dist, tensors);
  // As xLLM: no UnregisterKvCache; Finalize drops the registrations.
  dist.Finalize();
  std::printf("[INFO] xllm_pd %s %s\n", argv[1], ok ? "passed" : "FAILED");
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace example

int main(int argc, char** argv) {
  return example::Main(argc, argv);
}
