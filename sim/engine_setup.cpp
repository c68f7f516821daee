#include "sim/engine_setup.h"

namespace kvsim::sim {

std::map<std::string, std::string> engine_options(const impl::Platform& platform, int device,
                                                  bool listen) {
  std::map<std::string, std::string> options = {{impl::kOptionDeviceId, std::to_string(device)}};
  if (listen) {
    options[impl::kOptionListenIpInfo] =
        platform.device_ip(device) + ":" + std::to_string(kListenPort);
  }
  return options;
}

impl::LLMClusterInfo server_info(const impl::Platform& platform, std::uint64_t cluster_id,
                                 int device) {
  impl::LLMClusterInfo info;
  info.set_remote_cluster_id(cluster_id);
  info.append_remote_ip_info(platform.device_ip(device), kListenPort);
  return info;
}

}  // namespace kvsim::sim
