// Control-plane addresses (spec §5 llm.listenIpInfo). A process listens on a TCP address of its
// node's host (hixl src/llm_datadist/link_mgr/llm_link_manager.cc, LLMLinkManager::Initialize →
// MsgHandlerPlugin::StartDaemon binds it); link_clusters and unlink_clusters connect to such an
// address (link_msg_handler.cc). Device NIC addresses carry data, never this handshake.
#pragma once

#include <cstdint>
#include <memory>

#include "impl/data_dist_core.h"
#include "impl/types.h"

namespace kvsim::impl {

/// The node `ip` names for a process on `from_node`: a host's address names its node,
/// 127.0.0.1 the caller's own, a device NIC address its device's node (kvsim's lenience, see
/// check_bindable); -1 if nothing in the world has it.
int node_of_address(const Platform& platform, std::uint32_t ip, int from_node);

/// Checks, as bind() does, that `core` may listen on `address`: its node's host address,
/// 0.0.0.0 or 127.0.0.1. A NIC address of a device of its node is accepted with a
/// kListenOnDeviceAddress diagnostic (strict mode: the library's failed bind). Any other
/// address, or a port that another instance of the node listens on at that address or at
/// 0.0.0.0, throws LLMException(LLM_FAILED) naming `key`, as the library's init does when bind()
/// fails ("Failed to bind port").
void check_bindable(DataDistCore& core, const IpInfo& address, const char* key);

/// The instance whose listener a connection from `from` to `target` reaches, or nullptr.
std::shared_ptr<DataDistCore> find_listener(const DataDistCore& from, const IpInfo& target);

}  // namespace kvsim::impl
