#include "sim/engine_setup.h"

#include <stdexcept>

namespace kvsim::sim {

std::map<std::string, std::string> engine_options(const impl::Platform& platform, int device,
                                                  bool listen) {
  std::map<std::string, std::string> options = {{impl::kOptionDeviceId, std::to_string(device)},
                                                {impl::kOptionEnableCacheManager, "1"}};
  if (listen) {
    options[impl::kOptionListenIpInfo] =
        platform.host_ip(platform.node_of(device)) + ":" + std::to_string(listen_port(device));
  }
  return options;
}

impl::LLMClusterInfo server_info(const impl::Platform& platform, std::uint64_t cluster_id,
                                 int device, int client_device) {
  impl::LLMClusterInfo info;
  info.set_remote_cluster_id(cluster_id);
  info.append_local_ip_info(platform.host_ip(platform.node_of(client_device)), 0);
  info.append_remote_ip_info(platform.host_ip(platform.node_of(device)), listen_port(device));
  return info;
}

impl::DataType data_type_of(const std::string& dtype) {
  if (dtype == "bf16") return impl::DataType::DT_BF16;
  if (dtype == "fp16") return impl::DataType::DT_FLOAT16;
  if (dtype == "fp32") return impl::DataType::DT_FLOAT;
  return impl::DataType::DT_INT8;
}

impl::CacheView allocate_and_register(impl::Platform& platform, impl::LLMDataDist& dist, int device,
                                      const impl::CacheDesc& desc, bool paged,
                                      const std::optional<impl::BlocksCacheKey>& key) {
  std::vector<std::uint64_t> addrs;
  // A failure gives back what it took, so that a caller may try again (a full HBM clears).
  const auto give_back = [&] {
    for (const std::uint64_t a : addrs) (void)platform.free(a);
  };
  for (std::uint32_t t = 0; t < desc.num_tensors(); ++t) {
    const auto a = platform.allocate(device, desc.placement(), desc.size(), kCacheAlign);
    if (!a) {
      give_back();
      throw std::runtime_error("device " + std::to_string(device) + ": KV cache does not fit in " +
                               (desc.placement() == impl::Placement::HOST ? "host memory" : "HBM"));
    }
    addrs.push_back(*a);
  }
  try {
    return paged ? dist.cache_manager().register_blocks_cache(desc, addrs, key)
                 : dist.cache_manager().register_cache(desc, addrs);
  } catch (...) {
    give_back();
    throw;
  }
}

}  // namespace kvsim::sim
