#include "impl/listen_address.h"

#include "impl/directory.h"

namespace kvsim::impl {

namespace {

constexpr std::uint32_t kAnyAddress = 0;         // 0.0.0.0
constexpr std::uint32_t kLoopback = 0x0100007F;  // 127.0.0.1 (ip_to_int order)

// Two bound addresses on one node that bind() would refuse together (same port, and the same
// address or either one the wildcard).
bool overlap(const IpInfo& a, const IpInfo& b) {
  return a.port == b.port && (a.ip == b.ip || a.ip == kAnyAddress || b.ip == kAnyAddress);
}

}  // namespace

int node_of_address(const Platform& platform, std::uint32_t ip, int from_node) {
  if (ip == kLoopback) return from_node;
  const std::string text = int_to_ip(ip);
  const int node = platform.node_by_host_ip(text);
  if (node >= 0) return node;
  const int device = platform.device_by_ip(text);
  return device >= 0 ? platform.node_of(device) : -1;
}

void check_bindable(DataDistCore& core, const IpInfo& address, const char* key) {
  const Platform& platform = core.platform();
  const int node = core.node();
  const std::string where = int_to_ip(address.ip) + ":" + std::to_string(address.port);
  const std::string host = platform.host_ip(node);
  if (address.ip != kAnyAddress && address.ip != kLoopback && int_to_ip(address.ip) != host) {
    const int device = platform.device_by_ip(int_to_ip(address.ip));
    if (device < 0 || platform.node_of(device) != node) {
      throw LLMException(LLMStatusCode::LLM_FAILED, key,
                         "Failed to bind port: " + where + " is not an address of node " +
                             std::to_string(node) + "'s host (" + host + ")");
    }
    core.flag(DiagnosticKind::kListenOnDeviceAddress,
              where + " is the NIC address of device " + std::to_string(device) +
                  "; the library listens on a host address (" + host +
                  "), and bind() fails on hardware for an NPU's NIC address",
              key);
  }
  for (const auto& [id, other] : core.directory().members()) {
    if (other.get() == &core || other->node() != node) continue;
    const std::optional<IpInfo>& theirs = other->options().listen_ip_info;
    if (theirs && overlap(*theirs, address)) {
      throw LLMException(LLMStatusCode::LLM_FAILED, key,
                         "Failed to bind port: " + where + " is in use on node " +
                             std::to_string(node) + " (cluster " + std::to_string(id) + ")");
    }
  }
}

std::shared_ptr<DataDistCore> find_listener(const DataDistCore& from, const IpInfo& target) {
  const int node = node_of_address(from.platform(), target.ip, from.node());
  if (node < 0) return nullptr;
  for (const auto& [id, core] : from.directory().members()) {
    const std::optional<IpInfo>& bound = core->options().listen_ip_info;
    if (!bound || core->node() != node || bound->port != target.port) continue;
    if (bound->ip == target.ip || bound->ip == kAnyAddress) return core;
  }
  return nullptr;
}

}  // namespace kvsim::impl
