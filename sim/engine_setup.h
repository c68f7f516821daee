// How kvsim's programs and tests start llm_datadist engines in a world: init options for a
// device (optionally listening) and the LLMClusterInfo that reaches such a server. One place for
// the listen-port convention.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include <optional>

#include "impl/cache_manager.h"
#include "impl/llm_datadist.h"
#include "impl/platform.h"
#include "impl/types.h"

namespace kvsim::sim {

/// The first port simulated servers listen on: a process on world device d listens on its node's
/// host address at kListenPort + d (spec §8 samples: host_ip:26000).
inline constexpr int kListenPort = 26000;

/// The port the engine of world device `device` listens on.
inline int listen_port(int device) {
  return kListenPort + device;
}

/// init() options binding `device` with the v2 CacheManager (llm.EnableCacheManager=1, §1);
/// with `listen`, the engine listens on its node's host address at listen_port(device).
std::map<std::string, std::string> engine_options(const impl::Platform& platform, int device,
                                                  bool listen);
/// LLMClusterInfo to link from an engine on `client_device` to the server `cluster_id`
/// listening for `device` (local_ip_info: the client's host, as v2 requires).
impl::LLMClusterInfo server_info(const impl::Platform& platform, std::uint64_t cluster_id,
                                 int device, int client_device);

/// Cluster ids of a study's engines: prompt rank r is kPromptClusterBase + r, decode rank r
/// kDecodeClusterBase + r (serving studies number instance after instance from these).
inline constexpr std::uint64_t kPromptClusterBase = 100;
inline constexpr std::uint64_t kDecodeClusterBase = 200;

/// HCCS needs 2 MiB-aligned device memory (spec 4), so caches are allocated at that alignment.
inline constexpr std::uint64_t kCacheAlign = 2ull << 20;

/// The llm_datadist data type of a scenario dtype name (int8 and fp8: one byte per element).
impl::DataType data_type_of(const std::string& dtype);

/// Allocates each tensor of `desc` on `device` and registers them with `dist`'s v2 CacheManager,
/// as paged blocks when `paged`. Throws std::runtime_error if the memory does not fit, having freed
/// what it allocated.
impl::CacheView allocate_and_register(impl::Platform& platform, impl::LLMDataDist& dist, int device,
                                      const impl::CacheDesc& desc, bool paged,
                                      const std::optional<impl::BlocksCacheKey>& key);

}  // namespace kvsim::sim
