// The SystemC side of the model: DMA engines that take batches of copy descriptors, move their
// bytes over the Topology's resources as fluid flows, land them in destination memory, and report
// completion or failure; plus link faults scheduled as inputs. One SC_METHOD drives everything.
#pragma once

#include <systemc>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <memory_resource>
#include <queue>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/fabric_observer.h"
#include "model/fluid_network.h"
#include "model/topology.h"
#include "model/units.h"

namespace kvsim::model {

/// One copy: `length` bytes from `src_addr` to `dst_addr`. Addresses are absolute and name their
/// memory (Topology gives every memory a disjoint range).
struct CopyDescriptor {
  std::uint64_t src_addr = 0;
  std::uint64_t dst_addr = 0;
  std::uint64_t length = 0;
};

/// A DMA engine: engine `engine` of device `device`.
struct EngineRef {
  int device = 0;
  int engine = 0;
};

/// How a posted batch ended.
struct BatchOutcome {
  std::uint64_t id = 0;
  bool ok = false;
  SimTime posted = 0;
  SimTime finished = 0;            ///< completion, or fault time + detection time
  std::uint64_t bytes = 0;         ///< bytes the batch asked to move
  std::uint64_t landed_bytes = 0;  ///< bytes that reached destination memory
  std::size_t descriptors = 0;
  std::string error;  ///< empty when ok; names the link that failed
};

/// What happens to a link at a simulated time.
struct LinkEvent {
  enum class Kind { kDown, kUp, kDegrade } kind = Kind::kDown;
  double factor = 1.0;  ///< kDegrade: fraction of the healthy effective bandwidth, in (0, 1]
};

/// DMA engines plus the fluid network over the topology, as one SystemC module.
///
/// Timing of a batch of N descriptors on an engine (DESIGN.md, "The model"): it waits for the
/// engine's descriptor processor; the processor spends `batch_setup` once, then processes the
/// batch in chunks of `chunk_descriptors`, each descriptor costing its route's path cost
/// (Route::descriptor_cost: the tier's read or write cost, else `descriptor_cost`). A processed
/// chunk's bytes then flow over its route (max-min shared with every other active flow) while the
/// processor goes on with the next chunk, up to `queue_depth` chunks in flight per engine. A chunk
/// lands one route latency after its last byte left. On an idle path a batch of at most one chunk
/// thus takes exactly setup + N x descriptor_cost + bytes / bottleneck + latency. On a path
/// without overlap (PathSpec::overlap) a chunk is processed only after the engine's earlier
/// bytes have left, so every chunk adds its processing to its bytes.
///
/// Faults: when a link goes down, every chunk with bytes in flight over it stops, its batch's
/// queued chunks are dropped, and the batch fails `fault_detection_time` later. Exactly the chunks
/// that finished sending before the fault have landed (they are counted in landed_bytes); nothing
/// of the interrupted or later chunks has. A chunk that starts on a down link fails likewise.
class Fabric : public sc_core::sc_module {
 public:
  using Callback = std::function<void(const BatchOutcome&)>;
  SC_HAS_PROCESS(Fabric);

  /// Builds the topology. Requires SystemC's time resolution to be 1 ps (the default).
  Fabric(const sc_core::sc_module_name& name, const TopologySpec& spec);
  ~Fabric() override;

  Topology& topology() { return *topology_; }
  const Topology& topology() const { return *topology_; }
  const FluidNetwork& network() const { return net_; }

  /// Current simulated time in ps.
  SimTime now() const;

  /// Posts a batch to an engine. Validates everything first (engine exists, batch non-empty,
  /// every length > 0, every range inside one allocation, destination ranges pairwise disjoint)
  /// and throws ModelError without side effects otherwise. `on_done` runs in simulation context
  /// when the batch completes or fails. Returns the batch id.
  std::uint64_t post(EngineRef engine, std::vector<CopyDescriptor> descriptors, Callback on_done);

  /// Schedules a link event at absolute simulated time `at` (>= now).
  void schedule_link_event(const std::string& link, SimTime at, LinkEvent event);
  /// True if the link is up now.
  bool link_up(std::uint32_t link) const;
  /// From `from` to `until` (absolute, `from` >= now) the engines of `device` take no new chunk
  /// from their queues: what is posted meanwhile waits there, and drains once the window ends
  /// (a transfer queue that fills and stops draining [I]). Chunks already taken go on.
  void stall_engines(int device, SimTime from, SimTime until);

  /// Attaches an observer (nullptr detaches); the Fabric does not own it.
  void set_observer(FabricObserver* observer) { observer_ = observer; }

  /// Batches posted and not yet reported and released (0 when the fabric is quiet).
  std::size_t open_batches() const { return batches_.size(); }

  /// Counters for benchmarks and reports.
  struct Stats {
    std::uint64_t batches_posted = 0;
    std::uint64_t batches_failed = 0;
    std::uint64_t chunks = 0;
    std::uint64_t flows_completed = 0;
    std::uint64_t activations = 0;  ///< SC_METHOD runs
  };
  const Stats& stats() const { return stats_; }

 private:
  struct Batch;
  struct Chunk;
  struct Engine;
  struct Action;
  struct ActionLater {
    bool operator()(const Action& a, const Action& b) const;
  };

  void run();
  void schedule(SimTime at, Action action);
  void wake_at(SimTime at);
  void try_process(Engine& e);
  void start_data(Engine& e, Chunk* c);
  void on_flows_done(const std::vector<FluidNetwork::FlowId>& flows);
  void on_chunk_sent(Chunk* c);
  void land(Chunk* c);
  /// True if memory `m` holds content anywhere in the span of the chunk's source (or
  /// destination) ranges; false means copying there changes nothing.
  bool has_content(const Hbm& m, const Chunk& c, bool source) const;
  /// Counts a landed chunk; the last one completes its batch.
  void land_done(Batch* b);
  void fail_batch(Batch* b, const std::string& why);
  void finish_batch(Batch* b);
  void apply_link_event(std::uint32_t link, LinkEvent ev);
  /// True while a stall_engines window holds `device`'s engines.
  bool stalled(int device) const;
  void check_descriptors(const std::vector<CopyDescriptor>& descs) const;
  /// True if the descriptors are segments of block copies (each one length, destinations aligned
  /// alike) with distinct destinations and spans that do not overlap, hence disjoint; false if
  /// unsure.
  bool distinct_blocks(const std::vector<CopyDescriptor>& descs) const;
  const Route& route(MemoryId src, MemoryId dst, const Engine& e, int rail = 0);
  /// The NIC rail a chunk's bytes take on a device with several NICs (0 otherwise).
  int rail_of(const Engine& e, const Chunk& c) const;

  /// Bytes of one chunk between one pair of memories: one flow.
  struct FlowGroup {
    MemoryId src, dst;
    double bytes;
    const Route* route;  ///< in route_cache_, whose elements never move
  };
  /// Takes a chunk from the pool (fields reset, vectors' storage kept) or makes one.
  std::unique_ptr<Chunk> new_chunk();
  /// Releases a reported batch, its chunks back to the pool.
  void release(std::uint64_t batch);

  /// Takes a batch from the pool (reset) or makes one.
  std::unique_ptr<Batch> new_batch();

  // Nodes of the maps and queues below come from here: a warm fabric allocates nothing per
  // batch, chunk or flow (fabric_allocation_test). Declared first, so destroyed last.
  std::pmr::unsynchronized_pool_resource node_pool_;
  FluidNetwork net_;
  std::unique_ptr<Topology> topology_;
  std::vector<std::unique_ptr<Engine>> engines_;
  std::pmr::map<std::uint64_t, std::unique_ptr<Batch>> batches_;  // (Batch is complete in the .cpp)
  std::pmr::unordered_map<FluidNetwork::FlowId, Chunk*> flow_owner_;
  std::unordered_map<std::uint64_t, Route> route_cache_;  ///< key: source, destination, engine
  std::vector<double> link_state_;  ///< 0 = down, else fraction of healthy bandwidth
  struct Stall {
    int device;
    SimTime from, until;
  };
  std::vector<Stall> stalls_;  ///< stall_engines' windows
  std::priority_queue<Action, std::vector<Action>, ActionLater> agenda_;
  std::uint64_t next_batch_id_ = 1;
  std::uint64_t next_seq_ = 0;
  SimTime wake_time_ = FluidNetwork::kNever;
  bool in_run_ = false;
  FabricObserver* observer_ =
      nullptr;  ///< inside run(): its loop picks up new work, no notification needed
  sc_core::sc_event wake_;
  Stats stats_;
  // Scratch and pools, so that posting, sending and landing allocate nothing once warm.
  mutable std::vector<std::pair<std::uint64_t, std::size_t>> dst_order_;
  /// By descriptor of the batch being posted: its source and destination memories.
  mutable std::vector<std::pair<MemoryId, MemoryId>> desc_memories_;
  mutable std::vector<std::uint64_t> slot_bits_;  ///< distinct_blocks' bitmap
  mutable std::vector<std::pair<std::uint64_t, std::uint64_t>> segment_spans_;  ///< and spans
  std::vector<FlowGroup> groups_;
  std::vector<FluidNetwork::FlowId> done_flows_;
  std::vector<std::unique_ptr<Chunk>> chunk_pool_;
  std::vector<std::unique_ptr<Batch>> batch_pool_;
};

}  // namespace kvsim::model
