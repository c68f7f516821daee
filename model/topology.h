// The hardware a simulation runs on: nodes, devices with their memories and DMA engines, links,
// and routes between memories. Built from a TopologySpec (a preset file plus overrides).
// Pure C++: the Fabric (SystemC) drives its resources through a FluidNetwork.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/fluid_network.h"
#include "model/hbm.h"
#include "model/units.h"

namespace kvsim::model {

/// Physical kind of a link; decides nothing by itself, but names tracks and routes in reports.
enum class LinkType { kHccs, kUb, kNvlink, kRoce, kInfiniband, kEfa, kPcie };
const char* to_string(LinkType type);
/// Parses "hccs", "ub", "nvlink", "roce", "ib", "efa", "pcie" (throws kFormat).
LinkType link_type_from_string(const std::string& text);

/// How the devices of one scale-up domain are wired.
enum class FabricShape {
  kMesh,    ///< a dedicated link per device pair (Atlas 800 A2 HCCS full mesh)
  kSwitch,  ///< one port per device into a non-blocking switch (A3/CloudMatrix UB, NVSwitch, RoCE)
};

/// How one class of route processes descriptors and moves bytes, where that differs from the DMA
/// engine's defaults and its links' efficiency (unset: inherit). Transfers differ by path and
/// direction on the same wires: HIXL's A2 comm-domain rows cost ~23 us per descriptor over RoCE
/// and ~12 us over HCCS, A3 reads and writes across a SuperPoD differ by a third
/// (hicann/hixl benchmarks/performance.md).
struct PathSpec {
  std::optional<SimTime> descriptor_cost;       ///< per descriptor, writes (engine at the source)
  std::optional<SimTime> read_descriptor_cost;  ///< per descriptor, reads (engine at the dest.)
  std::optional<double> efficiency;             ///< achievable / nominal bandwidth, writes
  std::optional<double> read_efficiency;        ///< achievable / nominal bandwidth, reads
  /// False: a chunk's bytes leave before the engine processes the next chunk, so the per-
  /// descriptor cost adds to the byte time instead of hiding behind it (HIXL's A3 two-node rows).
  bool overlap = true;
};

/// One class of link: nominal per-direction bandwidth, one-way latency, achievable fraction.
struct LinkSpec {
  LinkType type = LinkType::kRoce;
  FabricShape shape = FabricShape::kSwitch;
  Bandwidth bandwidth = 0;  ///< per direction, per port (switch) or per device pair (mesh)
  SimTime latency = 0;      ///< one way, added once per path segment
  double efficiency = 1.0;  ///< achievable / nominal, in (0, 1]
  PathSpec path;            ///< descriptor processing on routes whose outermost tier this is
  Bandwidth effective() const { return bandwidth * efficiency; }
};

/// The outermost kind of hop of a route, which decides its PathSpec.
enum class PathTier {
  kLocal,          ///< within one memory
  kHost,           ///< host memory and a device of its node (PCIe)
  kScaleUp,        ///< between devices of one node over the scale-up links
  kScaleUpRemote,  ///< between nodes of one scale-up domain (A3 SuperPoD, CloudMatrix UB plane)
  kScaleOut,       ///< between scale-up domains over NICs
};
const char* to_string(PathTier tier);

/// A DMA engine's cost model (DESIGN.md "per-descriptor cost is real").
struct DmaSpec {
  int engines = 1;  ///< independent engines (queues) per device
  SimTime descriptor_cost =
      0;                    ///< serial processing time per descriptor, unless a path sets its own
  SimTime batch_setup = 0;  ///< once per posted batch (doorbell, stream setup)
  int chunk_descriptors = 32;  ///< descriptors fetched and processed as one unit
  int queue_depth = 4;         ///< chunks whose data may be in flight at once per engine
  Bandwidth bandwidth = 0;     ///< data throughput of one engine
};

/// A device's compute, which prices prefill when a scenario gives no `prefill:` of its own
/// (preset section `compute:`; 0: not given).
struct ComputeSpec {
  double tflops_bf16 = 0;  ///< dense peak, TFLOPS
  double tflops_fp16 = 0;
  double tflops_fp8 = 0;
  double tflops_int8 = 0;
  double gemm_efficiency = 0;  ///< achieved / peak of a GEMM's FLOPs (roofline with its weights)
  double attention_efficiency = 0;  ///< achieved / peak of causal prefill attention, (0, 1]
  double hbm_efficiency = 0;      ///< achieved / peak HBM bandwidth of weight and activation reads
  double elementwise_passes = 0;  ///< HBM passes over a layer's activations (norms, RoPE, adds)
  SimTime layer_overhead = 0;     ///< fixed cost of one layer's kernels (launches, small ops)
  double allreduce_efficiency = 0;  ///< TP all-reduce bus bandwidth / scale-up link bandwidth
  /// The dense peak for a scenario dtype ("bf16", "fp16", "fp8", "int8"); 0 if not given.
  double tflops(const std::string& dtype) const;
};

/// A preset value that was fitted or inferred ([I]), with the range it could plausibly take
/// (what `kvsim sensitivity` varies) and where value and range come from.
struct UncertainParameter {
  std::string key;    ///< dotted preset key, "dma.descriptor_cost"
  std::string value;  ///< the preset file's own value, as written (before overrides)
  std::string low;    ///< as written, in the key's unit
  std::string high;
  std::string source;     ///< the evidence for the value and the range
  std::string fitted_to;  ///< calibration rows the value was fitted to ("" if only inferred)
  bool integer = false;   ///< the key takes whole numbers only (engines, spines, ...)
};

/// The scale-out network between nodes: NICs shared by a node's devices, and leaf and spine
/// switches. The defaults (one NIC per device, one non-blocking switch) are the flat fabric.
struct ScaleOutFabric {
  int nics_per_node = 0;        ///< 0: one per device; else devices_per_node must be a multiple
  int nodes_per_leaf = 0;       ///< 0: every node on one non-blocking switch
  int spines = 1;               ///< spine switches; a leaf has one uplink to each
  double oversubscription = 1;  ///< a leaf's NIC bandwidth over its uplinks' bandwidth (>= 1)
  SimTime uplink_latency = 0;   ///< one way, per leaf-spine-leaf crossing
};

/// Everything that describes a machine, as read from a preset and overrides.
struct TopologySpec {
  std::string name;
  std::string description;
  int nodes = 1;
  int devices_per_node = 8;
  int scale_up_nodes = 1;  ///< nodes sharing one scale-up fabric (CloudMatrix384: 48)
  std::string device_kind = "npu";
  std::uint64_t hbm_capacity = 0;
  Bandwidth hbm_bandwidth = 0;
  std::uint64_t host_capacity = 0;
  Bandwidth host_bandwidth = 0;
  DmaSpec dma;
  LinkSpec scale_up;      ///< inside a scale-up domain (HCCS, UB, NVLink)
  LinkSpec scale_out;     ///< between domains, per NIC (RoCE, InfiniBand)
  ScaleOutFabric fabric;  ///< NIC sharing and leaf-spine switches
  LinkSpec host_link;     ///< host memory to device (PCIe)
  ComputeSpec compute;    ///< optional: peak TFLOPS and prefill efficiency
  /// Routes between nodes of one scale-up domain (scale_up.remote): the scale-up links, at this
  /// path's costs and efficiency.
  PathSpec scale_up_remote;
  /// The transfer path's software the PathSpecs above describe (preset key `path`, "" if the
  /// preset names none); another of `paths` replaces the tiers it lists (hixl's direct hixl_cs
  /// client against the default ADXL -> HCCL comm-domain path).
  std::string path;
  std::vector<std::string> other_paths;  ///< the names under `paths:`
  bool scale_up_over_scale_out =
      false;  ///< route intra-domain traffic over NICs (HCCL_INTRA_ROCE_ENABLE)
  SimTime fault_detection_time = kMs;  ///< a batch on a downed link fails this long after the fault
  std::string ip_base = "10.0.0.0";    ///< device d gets ip_base + d + 1
  std::string host_ip_base = "172.16.0.0";  ///< node n's host gets host_ip_base + n + 1
  /// An address plan, when given: each device's address (world order) and each node's host
  /// address, replacing the bases (a launch taking its users' addresses).
  std::vector<std::string> device_ips{};
  std::vector<std::string> host_ips{};
  /// The preset's `uncertain:` section, in file order.
  std::vector<UncertainParameter> uncertain{};

  /// Throws ModelError(kInvalidArgument) naming the first bad field.
  void validate() const;
};

/// A memory endpoint: a device's HBM or a node's host DRAM.
struct MemoryId {
  std::uint32_t index = 0;  ///< into Topology::memories()
  bool operator==(const MemoryId& o) const { return index == o.index; }
  bool operator!=(const MemoryId& o) const { return index != o.index; }
};

/// One link of the built topology with its per-direction fluid resources.
struct Link {
  std::string name;  ///< "hccs n0d1-n0d2", "roce n1d0", "pcie n0d3"
  LinkType type;
  SimTime latency;
  Bandwidth nominal_effective;  ///< bandwidth x efficiency when healthy
  FluidNetwork::ResourceId forward;
  FluidNetwork::ResourceId backward;
};

/// The resources one copy crosses, and its one-way latency.
struct Route {
  std::vector<FluidNetwork::Use> uses;
  std::vector<std::uint32_t> links;  ///< indices into Topology::links()
  SimTime latency = 0;
  PathTier tier = PathTier::kLocal;
  bool read = false;            ///< the engine is on the destination's side (a pull)
  SimTime descriptor_cost = 0;  ///< per descriptor on this route, in this direction
  bool overlap = true;          ///< PathSpec::overlap of the route's tier
};

/// The built machine: memories, engines and links as FluidNetwork resources, and routes.
class Topology {
 public:
  /// Builds every memory, engine and link of `spec` into `net`. Throws on an invalid spec.
  Topology(const TopologySpec& spec, FluidNetwork& net);

  const TopologySpec& spec() const { return spec_; }
  int device_count() const { return spec_.nodes * spec_.devices_per_node; }
  int node_of(int device) const { return device / spec_.devices_per_node; }
  /// "n1d3": node 1, local device 3.
  std::string device_name(int device) const;
  /// Dotted IPv4 address of a device's NIC ("10.0.0.4").
  std::string device_ip(int device) const;
  /// Device with that IP, or -1.
  int device_by_ip(const std::string& ip) const;
  /// Dotted IPv4 address of a node's host (its control-plane address).
  std::string host_ip(int node) const;
  /// Node whose host has that IP, or -1.
  int node_by_host_ip(const std::string& ip) const;

  MemoryId device_memory(int device) const;
  MemoryId host_memory(int node) const;
  Hbm& memory(MemoryId m) { return *memories_.at(m.index); }
  const Hbm& memory(MemoryId m) const { return *memories_.at(m.index); }
  std::size_t memory_count() const { return memories_.size(); }
  /// The memory whose address range holds `addr`, if any (addresses are globally unique).
  const Hbm* memory_at(std::uint64_t addr, MemoryId* id = nullptr) const;

  FluidNetwork::ResourceId engine_resource(int device, int engine) const;
  const std::vector<Link>& links() const { return links_; }
  /// Index of the link with this name; throws kOutOfRange listing the naming scheme.
  std::uint32_t link_index(const std::string& name) const;

  /// Index in nics_ of the NIC a device sends through on `rail` (taken mod its NICs).
  int nic_of(int device, int rail) const;
  /// Indices into links() of a node's scale-out NICs, in order.
  std::vector<std::uint32_t> node_nics(int node) const;
  /// Indices into links() of the scale-up switch ports of a node's devices, in device order
  /// (empty on a mesh: its links join device pairs, not a device to the plane).
  std::vector<std::uint32_t> node_scale_up_ports(int node) const;
  /// Leaf switch of a node (0 on a flat fabric).
  int leaf_of(int node) const;

  /// Path of a copy from `src` to `dst` carried out by `engine` of device `engine_device`.
  /// `rail`: which of a device's NICs the bytes take when it has several (default: the
  /// engine's, engine mod NICs per device).
  Route route(MemoryId src, MemoryId dst, int engine_device, int engine, int rail = -1) const;

 private:
  struct MemoryInfo {
    int device;  ///< -1 for host memory
    int node;
    FluidNetwork::ResourceId port;
  };
  std::uint32_t add_link(std::string name, LinkType type, const LinkSpec& spec);
  void append_link(Route& r, std::uint32_t link, bool forward) const;
  /// Appends the links from device a to device b and says which tier they are.
  PathTier route_devices(Route& r, int a, int b, int rail) const;
  /// Sets the route's direction, descriptor cost, overlap and per-link weights from its tier's
  /// PathSpec.
  void apply_path(Route& r, bool read) const;

  TopologySpec spec_;
  FluidNetwork& net_;
  std::vector<std::unique_ptr<Hbm>> memories_;
  std::vector<MemoryInfo> memory_info_;
  std::vector<FluidNetwork::ResourceId> engines_;  ///< device * engines + engine
  std::vector<Link> links_;
  std::vector<std::uint32_t> mesh_links_;      ///< per node: local pair (i<j) -> link
  std::vector<std::uint32_t> scale_up_ports_;  ///< per device (switch shape)
  std::vector<std::uint32_t> nics_;            ///< per NIC (node-major)
  std::vector<std::uint32_t> uplinks_;         ///< per leaf and spine (leaf-major)
  std::vector<std::uint32_t> pcie_;            ///< per device
  std::vector<std::string> device_ips_;        ///< per device
  std::vector<std::string> host_ips_;          ///< per node
};

}  // namespace kvsim::model
