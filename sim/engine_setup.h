// How kvsim's programs and tests start llm_datadist engines in a world: init options for a
// device (optionally listening) and the LLMClusterInfo that reaches such a server. One place for
// the listen-port convention.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "impl/platform.h"
#include "impl/types.h"

namespace kvsim::sim {

/// The port every simulated server listens on (each device has its own IP, spec 8 samples).
inline constexpr int kListenPort = 26000;

/// init() options binding `device`; with `listen`, the engine listens on the device's IP.
std::map<std::string, std::string> engine_options(const impl::Platform& platform, int device,
                                                  bool listen);
/// LLMClusterInfo to link to the server `cluster_id` listening on `device`.
impl::LLMClusterInfo server_info(const impl::Platform& platform, std::uint64_t cluster_id,
                                 int device);

}  // namespace kvsim::sim
