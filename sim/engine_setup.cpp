#include "sim/engine_setup.h"

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

}  // namespace kvsim::sim
