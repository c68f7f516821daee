#include "model/topology.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>

#include "model/errors.h"

namespace kvsim::model {
namespace {

// Memories get disjoint absolute address ranges so that an address names its memory.
constexpr std::uint64_t kMemoryStride = std::uint64_t{1} << 40;
constexpr std::uint64_t kHostBase = std::uint64_t{1} << 55;  // above any device range

std::uint32_t parse_ipv4(const std::string& text, const std::string& what) {
  unsigned a = 0, b = 0, c = 0, d = 0;
  char tail = 0;
  if (std::sscanf(text.c_str(), "%u.%u.%u.%u%c", &a, &b, &c, &d, &tail) != 4 || a > 255 ||
      b > 255 || c > 255 || d > 255) {
    throw ModelError(ErrorKind::kInvalidArgument,
                     what + " '" + text + "' is not a dotted IPv4 address");
  }
  return (a << 24) | (b << 16) | (c << 8) | d;
}

std::string format_ipv4(std::uint32_t ip) {
  return std::to_string(ip >> 24) + "." + std::to_string((ip >> 16) & 255) + "." +
         std::to_string((ip >> 8) & 255) + "." + std::to_string(ip & 255);
}

// The addresses of `count` endpoints: the plan's if given, else base + i + 1.
std::vector<std::string> addresses(const std::vector<std::string>& plan, const std::string& base,
                                   int count) {
  if (!plan.empty()) return plan;
  std::vector<std::string> out;
  const std::uint32_t first = parse_ipv4(base, "base");
  for (int i = 0; i < count; ++i)
    out.push_back(format_ipv4(first + static_cast<std::uint32_t>(i) + 1));
  return out;
}

void check_link(const LinkSpec& l, const char* what) {
  if (!(l.bandwidth > 0)) {
    throw ModelError(ErrorKind::kInvalidArgument, std::string(what) + ".bandwidth must be > 0");
  }
  if (!(l.efficiency > 0 && l.efficiency <= 1)) {
    throw ModelError(
        ErrorKind::kInvalidArgument,
        std::string(what) + ".efficiency must be in (0, 1], got " + std::to_string(l.efficiency));
  }
}

void check_path(const PathSpec& p, const std::string& what) {
  for (const auto& [e, key] :
       {std::pair{p.efficiency, "efficiency"}, std::pair{p.read_efficiency, "read_efficiency"}}) {
    if (e && !(*e > 0 && *e <= 1)) {
      throw ModelError(ErrorKind::kInvalidArgument,
                       what + "." + key + " must be in (0, 1], got " + std::to_string(*e));
    }
  }
}

}  // namespace

double ComputeSpec::tflops(const std::string& dtype) const {
  if (dtype == "bf16") return tflops_bf16;
  if (dtype == "fp16") return tflops_fp16;
  if (dtype == "fp8") return tflops_fp8;
  if (dtype == "int8") return tflops_int8;
  return 0;
}

const char* to_string(PathTier tier) {
  switch (tier) {
    case PathTier::kLocal:
      return "local";
    case PathTier::kHost:
      return "host";
    case PathTier::kScaleUp:
      return "scale_up";
    case PathTier::kScaleUpRemote:
      return "scale_up.remote";
    case PathTier::kScaleOut:
      return "scale_out";
  }
  return "?";
}

const char* to_string(LinkType type) {
  switch (type) {
    case LinkType::kHccs:
      return "hccs";
    case LinkType::kUb:
      return "ub";
    case LinkType::kNvlink:
      return "nvlink";
    case LinkType::kRoce:
      return "roce";
    case LinkType::kInfiniband:
      return "ib";
    case LinkType::kEfa:
      return "efa";
    case LinkType::kPcie:
      return "pcie";
  }
  return "?";
}

LinkType link_type_from_string(const std::string& text) {
  for (LinkType t : {LinkType::kHccs, LinkType::kUb, LinkType::kNvlink, LinkType::kRoce,
                     LinkType::kInfiniband, LinkType::kEfa, LinkType::kPcie}) {
    if (text == to_string(t)) return t;
  }
  throw ModelError(ErrorKind::kFormat,
                   "link type '" + text + "' is not one of hccs, ub, nvlink, roce, ib, efa, pcie");
}

void TopologySpec::validate() const {
  auto require = [](bool ok, const std::string& msg) {
    if (!ok) throw ModelError(ErrorKind::kInvalidArgument, msg);
  };
  require(nodes >= 1, "nodes must be >= 1, got " + std::to_string(nodes));
  require(devices_per_node >= 1 && devices_per_node <= 64,
          "devices_per_node must be in [1, 64], got " + std::to_string(devices_per_node));
  require(scale_up_nodes >= 1, "scale_up_nodes must be >= 1");
  require(hbm_capacity > 0 && hbm_capacity <= kMemoryStride, "hbm.capacity must be in (0, 1 TiB]");
  require(hbm_bandwidth > 0, "hbm.bandwidth must be > 0");
  require(host_capacity > 0 && host_capacity <= kMemoryStride,
          "host.capacity must be in (0, 1 TiB]");
  require(host_bandwidth > 0, "host.bandwidth must be > 0");
  require(dma.engines >= 1 && dma.engines <= 64, "dma.engines must be in [1, 64]");
  require(dma.chunk_descriptors >= 1, "dma.chunk_descriptors must be >= 1");
  require(dma.queue_depth >= 1, "dma.queue_depth must be >= 1");
  require(dma.bandwidth > 0, "dma.bandwidth must be > 0");
  check_link(scale_up, "scale_up");
  check_link(scale_out, "scale_out");
  check_link(host_link, "host_link");
  check_path(scale_up.path, "scale_up");
  check_path(scale_out.path, "scale_out");
  check_path(host_link.path, "host_link");
  check_path(scale_up_remote, "scale_up.remote");
  require(!(scale_up.shape == FabricShape::kMesh && scale_up_nodes > 1),
          "scale_up.shape mesh joins the devices of one node only: scale_up_nodes must be 1");
  require(static_cast<std::uint64_t>(nodes) * devices_per_node < (kHostBase / kMemoryStride) - 1,
          "nodes x devices_per_node must be < 32767 (address map)");
  parse_ipv4(ip_base, "ip_base");
  parse_ipv4(host_ip_base, "host_ip_base");
  const int devices = nodes * devices_per_node;
  const int nics = fabric.nics_per_node;
  require(nics >= 0 && (nics == 0 || (nics <= devices_per_node && devices_per_node % nics == 0) ||
                        (nics % devices_per_node == 0 && nics / devices_per_node <= 16)),
          "fabric.nics_per_node must divide devices_per_node (" + std::to_string(devices_per_node) +
              ": devices share a NIC) or be 1 to 16 times it (each device has its own NICs), got " +
              std::to_string(nics));
  require(fabric.nodes_per_leaf >= 0, "fabric.nodes_per_leaf must be >= 0 (0: one switch)");
  require(fabric.spines >= 1 && fabric.spines <= 64,
          "fabric.spines must be in [1, 64], got " + std::to_string(fabric.spines));
  require(fabric.oversubscription >= 1 && std::isfinite(fabric.oversubscription),
          "fabric.oversubscription must be finite and >= 1");
  require(device_ips.empty() || static_cast<int>(device_ips.size()) == devices,
          "device_ips lists " + std::to_string(device_ips.size()) + " addresses for " +
              std::to_string(devices) + " devices");
  require(host_ips.empty() || static_cast<int>(host_ips.size()) == nodes,
          "host_ips lists " + std::to_string(host_ips.size()) + " addresses for " +
              std::to_string(nodes) + " nodes");
  std::set<std::uint32_t> seen;
  for (const auto& [list, what] : {std::pair{addresses(device_ips, ip_base, devices), "device"},
                                   std::pair{addresses(host_ips, host_ip_base, nodes), "host"}}) {
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::uint32_t ip = parse_ipv4(list[i], std::string(what) + " address");
      require(seen.insert(ip).second, std::string(what) + " address " + list[i] + " (" + what +
                                          " " + std::to_string(i) + ") is used twice");
    }
  }
}

Topology::Topology(const TopologySpec& spec, FluidNetwork& net) : spec_(spec), net_(net) {
  spec_.validate();
  const int devices = device_count();
  device_ips_ = addresses(spec_.device_ips, spec_.ip_base, devices);
  host_ips_ = addresses(spec_.host_ips, spec_.host_ip_base, spec_.nodes);
  for (int d = 0; d < devices; ++d) {
    const std::string name = device_name(d) + ".hbm";
    memories_.push_back(std::make_unique<Hbm>(name,
                                              (static_cast<std::uint64_t>(d) + 1) * kMemoryStride,
                                              spec_.hbm_capacity, spec_.hbm_bandwidth));
    memory_info_.push_back({d, node_of(d), net_.add_resource(name, spec_.hbm_bandwidth)});
  }
  for (int n = 0; n < spec_.nodes; ++n) {
    const std::string name = "n" + std::to_string(n) + ".host";
    memories_.push_back(
        std::make_unique<Hbm>(name, kHostBase + static_cast<std::uint64_t>(n) * kMemoryStride,
                              spec_.host_capacity, spec_.host_bandwidth));
    memory_info_.push_back({-1, n, net_.add_resource(name, spec_.host_bandwidth)});
  }
  for (int d = 0; d < devices; ++d) {
    for (int e = 0; e < spec_.dma.engines; ++e) {
      engines_.push_back(
          net_.add_resource(device_name(d) + ".dma" + std::to_string(e), spec_.dma.bandwidth));
    }
  }
  const int dpn = spec_.devices_per_node;
  if (spec_.scale_up.shape == FabricShape::kMesh) {
    for (int n = 0; n < spec_.nodes; ++n) {
      for (int i = 0; i < dpn; ++i) {
        for (int j = i + 1; j < dpn; ++j) {
          const std::string name = std::string(to_string(spec_.scale_up.type)) + " " +
                                   device_name(n * dpn + i) + "-" + device_name(n * dpn + j);
          mesh_links_.push_back(add_link(name, spec_.scale_up.type, spec_.scale_up));
        }
      }
    }
  } else {
    for (int d = 0; d < devices; ++d) {
      scale_up_ports_.push_back(
          add_link(std::string(to_string(spec_.scale_up.type)) + " " + device_name(d),
                   spec_.scale_up.type, spec_.scale_up));
    }
  }
  const ScaleOutFabric& f = spec_.fabric;
  const int nics = f.nics_per_node > 0 ? f.nics_per_node : dpn;
  for (int n = 0; n < spec_.nodes; ++n) {
    for (int i = 0; i < nics; ++i) {
      // One NIC per device keeps the device's name ("roce n1d3"); shared ones are "roce n1nic0";
      // several per device are its rails ("roce n1d3.0", "roce n1d3.1").
      const int per_device = nics / dpn;
      const std::string where = nics == dpn  ? device_name(n * dpn + i)
                                : nics < dpn ? "n" + std::to_string(n) + "nic" + std::to_string(i)
                                             : device_name(n * dpn + i / per_device) + "." +
                                                   std::to_string(i % per_device);
      nics_.push_back(add_link(std::string(to_string(spec_.scale_out.type)) + " " + where,
                               spec_.scale_out.type, spec_.scale_out));
    }
  }
  if (f.nodes_per_leaf > 0) {
    const int leaves = (spec_.nodes + f.nodes_per_leaf - 1) / f.nodes_per_leaf;
    LinkSpec uplink = spec_.scale_out;
    uplink.latency = f.uplink_latency;
    uplink.bandwidth =
        spec_.scale_out.bandwidth * f.nodes_per_leaf * nics / f.oversubscription / f.spines;
    for (int l = 0; l < leaves; ++l) {
      for (int sp = 0; sp < f.spines; ++sp) {
        uplinks_.push_back(add_link("leaf" + std::to_string(l) + "-spine" + std::to_string(sp),
                                    spec_.scale_out.type, uplink));
      }
    }
  }
  for (int d = 0; d < devices; ++d) {
    pcie_.push_back(add_link(std::string(to_string(spec_.host_link.type)) + " " + device_name(d),
                             spec_.host_link.type, spec_.host_link));
  }
}

std::uint32_t Topology::add_link(std::string name, LinkType type, const LinkSpec& spec) {
  Link l{name, type, spec.latency, spec.effective(), 0, 0};
  l.forward = net_.add_resource(name + " >", spec.effective());
  l.backward = net_.add_resource(name + " <", spec.effective());
  links_.push_back(std::move(l));
  return static_cast<std::uint32_t>(links_.size() - 1);
}

std::string Topology::device_name(int device) const {
  return "n" + std::to_string(node_of(device)) + "d" +
         std::to_string(device % spec_.devices_per_node);
}

std::string Topology::device_ip(int device) const {
  return device_ips_.at(static_cast<std::size_t>(device));
}

int Topology::device_by_ip(const std::string& ip) const {
  const auto it = std::find(device_ips_.begin(), device_ips_.end(), ip);
  return it == device_ips_.end() ? -1 : static_cast<int>(it - device_ips_.begin());
}

std::string Topology::host_ip(int node) const {
  return host_ips_.at(static_cast<std::size_t>(node));
}

int Topology::node_by_host_ip(const std::string& ip) const {
  const auto it = std::find(host_ips_.begin(), host_ips_.end(), ip);
  return it == host_ips_.end() ? -1 : static_cast<int>(it - host_ips_.begin());
}

MemoryId Topology::device_memory(int device) const {
  if (device < 0 || device >= device_count()) {
    throw ModelError(ErrorKind::kOutOfRange, "device " + std::to_string(device) +
                                                 " does not exist (" +
                                                 std::to_string(device_count()) + " devices)");
  }
  return MemoryId{static_cast<std::uint32_t>(device)};
}

MemoryId Topology::host_memory(int node) const {
  if (node < 0 || node >= spec_.nodes) {
    throw ModelError(ErrorKind::kOutOfRange, "node " + std::to_string(node) + " does not exist (" +
                                                 std::to_string(spec_.nodes) + " nodes)");
  }
  return MemoryId{static_cast<std::uint32_t>(device_count() + node)};
}

const Hbm* Topology::memory_at(std::uint64_t addr, MemoryId* id) const {
  // The address map makes this O(1): device d at (d+1) x 1 TiB, node n's host at 2^55 + n TiB.
  std::size_t index = 0;
  if (addr >= kHostBase) {
    index = static_cast<std::size_t>(device_count()) +
            static_cast<std::size_t>((addr - kHostBase) / kMemoryStride);
  } else {
    index = static_cast<std::size_t>(addr / kMemoryStride);
    if (index == 0) return nullptr;
    --index;
    if (index >= static_cast<std::size_t>(device_count())) return nullptr;
  }
  if (index >= memories_.size()) return nullptr;
  const Hbm& m = *memories_[index];
  if (addr - m.base() >= m.capacity()) return nullptr;
  if (id) id->index = static_cast<std::uint32_t>(index);
  return &m;
}

FluidNetwork::ResourceId Topology::engine_resource(int device, int engine) const {
  if (device < 0 || device >= device_count() || engine < 0 || engine >= spec_.dma.engines) {
    throw ModelError(ErrorKind::kOutOfRange,
                     "DMA engine " + std::to_string(engine) + " of device " +
                         std::to_string(device) + " does not exist (" +
                         std::to_string(spec_.dma.engines) + " engines per device)");
  }
  return engines_[static_cast<std::size_t>(device * spec_.dma.engines + engine)];
}

std::uint32_t Topology::link_index(const std::string& name) const {
  for (std::size_t i = 0; i < links_.size(); ++i) {
    if (links_[i].name == name) return static_cast<std::uint32_t>(i);
  }
  throw ModelError(ErrorKind::kOutOfRange, "no link named '" + name + "' (links are named like '" +
                                               links_.front().name + "', '" + links_.back().name +
                                               "')");
}

void Topology::append_link(Route& r, std::uint32_t link, bool forward) const {
  const Link& l = links_[link];
  r.uses.push_back({forward ? l.forward : l.backward, 1.0});
  r.links.push_back(link);
  r.latency += l.latency;
}

PathTier Topology::route_devices(Route& r, int a, int b, int rail) const {
  if (a == b) return PathTier::kLocal;
  const int dpn = spec_.devices_per_node;
  const bool same_domain = node_of(a) / spec_.scale_up_nodes == node_of(b) / spec_.scale_up_nodes;
  if (same_domain && !spec_.scale_up_over_scale_out) {
    const PathTier tier = node_of(a) == node_of(b) ? PathTier::kScaleUp : PathTier::kScaleUpRemote;
    if (spec_.scale_up.shape == FabricShape::kMesh) {
      const int i = std::min(a, b) % dpn, j = std::max(a, b) % dpn;
      const int pairs_per_node = dpn * (dpn - 1) / 2;
      const int index = node_of(a) * pairs_per_node + i * (2 * dpn - i - 1) / 2 + (j - i - 1);
      append_link(r, mesh_links_[static_cast<std::size_t>(index)], a < b);
    } else {
      const std::uint32_t pa = scale_up_ports_[static_cast<std::size_t>(a)];
      const std::uint32_t pb = scale_up_ports_[static_cast<std::size_t>(b)];
      append_link(r, pa, true);
      r.uses.push_back({links_[pb].backward, 1.0});
      r.links.push_back(pb);  // the switch adds no latency of its own: counted once per path
    }
    return tier;
  }
  const std::uint32_t na = nics_[static_cast<std::size_t>(nic_of(a, rail))];
  const std::uint32_t nb = nics_[static_cast<std::size_t>(nic_of(b, rail))];
  append_link(r, na, true);
  const int la = leaf_of(node_of(a)), lb = leaf_of(node_of(b));
  if (la != lb) {
    // Up to a spine and down: ECMP, a fixed hash of the NIC pair (as switches hash flows'
    // headers: pseudo-random, but the same pair always takes the same spine).
    std::uint64_t h = (static_cast<std::uint64_t>(nic_of(a, rail)) << 32) ^
                      static_cast<std::uint64_t>(nic_of(b, rail));
    h ^= h >> 33;  // the splitmix64 finaliser
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    const int spine = static_cast<int>(h % static_cast<std::uint64_t>(spec_.fabric.spines));
    append_link(r, uplinks_[static_cast<std::size_t>(la * spec_.fabric.spines + spine)], true);
    const std::uint32_t down = uplinks_[static_cast<std::size_t>(lb * spec_.fabric.spines + spine)];
    r.uses.push_back({links_[down].backward, 1.0});  // uplink_latency is per crossing: once
    r.links.push_back(down);
  }
  r.uses.push_back({links_[nb].backward, 1.0});
  r.links.push_back(nb);
  return PathTier::kScaleOut;
}

std::vector<std::uint32_t> Topology::node_nics(int node) const {
  if (node < 0 || node >= spec_.nodes) {
    throw ModelError(ErrorKind::kOutOfRange, "node " + std::to_string(node) + " out of range [0, " +
                                                 std::to_string(spec_.nodes) + ")");
  }
  const std::size_t per_node = nics_.size() / static_cast<std::size_t>(spec_.nodes);
  const auto first =
      nics_.begin() + static_cast<std::ptrdiff_t>(per_node * static_cast<std::size_t>(node));
  return {first, first + static_cast<std::ptrdiff_t>(per_node)};
}

std::vector<std::uint32_t> Topology::node_scale_up_ports(int node) const {
  (void)node_nics(node);  // checks the range
  if (scale_up_ports_.empty()) return {};
  const auto dpn = static_cast<std::ptrdiff_t>(spec_.devices_per_node);
  const auto first = scale_up_ports_.begin() + dpn * node;
  return {first, first + dpn};
}

int Topology::nic_of(int device, int rail) const {
  const int dpn = spec_.devices_per_node;
  const int nics = spec_.fabric.nics_per_node > 0 ? spec_.fabric.nics_per_node : dpn;
  if (nics <= dpn) return node_of(device) * nics + (device % dpn) * nics / dpn;
  // Several NICs per device: the same rail at both ends (rail-optimised wiring).
  const int per_device = nics / dpn;
  return node_of(device) * nics + (device % dpn) * per_device + rail % per_device;
}

int Topology::leaf_of(int node) const {
  return spec_.fabric.nodes_per_leaf > 0 ? node / spec_.fabric.nodes_per_leaf : 0;
}

Route Topology::route(MemoryId src, MemoryId dst, int engine_device, int engine, int rail) const {
  const MemoryInfo& s = memory_info_.at(src.index);
  const MemoryInfo& d = memory_info_.at(dst.index);
  Route r;
  r.descriptor_cost = spec_.dma.descriptor_cost;
  if (src == dst) {
    r.uses.push_back({s.port, 2.0});  // a local copy reads and writes the same memory
  } else {
    r.uses.push_back({s.port, 1.0});
    r.uses.push_back({d.port, 1.0});
  }
  r.uses.push_back({engine_resource(engine_device, engine), 1.0});
  if (src == dst) return r;
  // Host memory reaches the fabric through a device's PCIe link: the other end's device if it is
  // on the same node, else the engine's device if it is there, else the node's first device.
  auto proxy = [&](const MemoryInfo& host, const MemoryInfo& other) {
    if (other.device >= 0 && other.node == host.node) return other.device;
    if (node_of(engine_device) == host.node) return engine_device;
    return host.node * spec_.devices_per_node;
  };
  const int a = s.device >= 0 ? s.device : proxy(s, d);
  const int b = d.device >= 0 ? d.device : proxy(d, s);
  if (s.device < 0) append_link(r, pcie_[static_cast<std::size_t>(a)], true);
  r.tier = route_devices(r, a, b, rail < 0 ? engine : rail);
  if (d.device < 0) append_link(r, pcie_[static_cast<std::size_t>(b)], false);
  if (r.tier == PathTier::kLocal && (s.device < 0 || d.device < 0)) r.tier = PathTier::kHost;
  // A read (a pull): the engine is on the destination's side, not the source's.
  const bool engine_at_dst =
      d.device == engine_device || (d.device < 0 && d.node == node_of(engine_device));
  apply_path(r, s.device != engine_device && engine_at_dst);
  return r;
}

void Topology::apply_path(Route& r, bool read) const {
  r.read = read;
  const LinkSpec* link = nullptr;  // the tier's links, whose efficiency the path may replace
  const PathSpec* path = nullptr;
  switch (r.tier) {
    case PathTier::kLocal:
      break;
    case PathTier::kHost:
      link = &spec_.host_link;
      path = &spec_.host_link.path;
      break;
    case PathTier::kScaleUp:
      link = &spec_.scale_up;
      path = &spec_.scale_up.path;
      break;
    case PathTier::kScaleUpRemote:
      link = &spec_.scale_up;
      path = &spec_.scale_up_remote;
      break;
    case PathTier::kScaleOut:
      link = &spec_.scale_out;
      path = &spec_.scale_out.path;
      break;
  }
  if (path == nullptr) return;
  const std::optional<SimTime> write_cost = path->descriptor_cost;
  const std::optional<SimTime> cost =
      read && path->read_descriptor_cost ? path->read_descriptor_cost : write_cost;
  if (cost) r.descriptor_cost = *cost;
  r.overlap = path->overlap;
  const double write_eff = path->efficiency.value_or(link->efficiency);
  const double eff = read ? path->read_efficiency.value_or(write_eff) : write_eff;
  if (eff == link->efficiency) return;
  // A link's capacity is its nominal bandwidth x the link's efficiency; a flow that reaches a
  // different share weighs link efficiency / path efficiency on it.
  const bool host_tier = r.tier == PathTier::kHost;
  for (const std::uint32_t l : r.links) {
    if ((links_[l].type == LinkType::kPcie) != host_tier) continue;
    for (FluidNetwork::Use& u : r.uses) {
      if (u.resource == links_[l].forward || u.resource == links_[l].backward) {
        u.weight = link->efficiency / eff;
      }
    }
  }
}

}  // namespace kvsim::model
