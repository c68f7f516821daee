#include "model/fabric.h"

#include <algorithm>
#include <cstdio>

#include "model/errors.h"
#include "model/units.h"

namespace kvsim::model {

struct Fabric::Chunk {
  Batch* batch = nullptr;
  std::size_t first = 0;  ///< first descriptor index in the batch
  std::size_t count = 0;
  std::uint64_t bytes = 0;
  bool opens_batch = false;  ///< pays the batch setup time
  SimTime cost = 0;          ///< its descriptors' processing time (each at its route's cost)
  bool serial = false;       ///< a route of it does not overlap processing with data
  bool uniform = false;      ///< every descriptor has the memories src_mem -> dst_mem
  MemoryId src_mem{}, dst_mem{};
  std::uint64_t src_frees = 0, dst_frees = 0;  ///< Hbm::frees() when the batch was checked
  int pending_flows = 0;
  bool sending = false;
  SimTime processing_start = 0;
  SimTime data_start = 0;
  SimTime latency = 0;
  std::vector<std::uint32_t> links;
  std::vector<FluidNetwork::FlowId> flows;
};

struct Fabric::Batch {
  std::uint64_t id = 0;
  Engine* engine = nullptr;
  std::vector<CopyDescriptor> descs;
  std::vector<std::unique_ptr<Chunk>> chunks;
  Callback on_done;
  BatchOutcome outcome;
  std::size_t chunks_landed = 0;
  bool failed = false;
  bool reported = false;
  int refs = 0;  ///< agenda actions that still point at this batch
};

struct Fabric::Engine {
  explicit Engine(std::pmr::memory_resource* pool) : queue(pool) {}
  EngineRef ref;
  std::pmr::deque<Chunk*> queue;  ///< chunks waiting for the descriptor processor
  Chunk* processing = nullptr;
  Chunk* blocked = nullptr;  ///< processed, waiting for a free in-flight slot
  int in_flight = 0;
};

struct Fabric::Action {
  enum class Kind { kDescriptorsDone, kArrive, kReport, kLinkEvent, kStallEnd };
  explicit Action(Kind k) : kind(k) {}
  Kind kind;
  SimTime at = 0;
  std::uint64_t seq = 0;
  Engine* engine = nullptr;
  Chunk* chunk = nullptr;
  Batch* batch = nullptr;
  std::uint32_t link = 0;
  LinkEvent event;
  int device = 0;  ///< kStallEnd
};

bool Fabric::ActionLater::operator()(const Action& a, const Action& b) const {
  return a.at != b.at ? a.at > b.at : a.seq > b.seq;
}

Fabric::Fabric(const sc_core::sc_module_name& name, const TopologySpec& spec)
    : sc_core::sc_module(name), batches_(&node_pool_), flow_owner_(&node_pool_) {
  if (sc_core::sc_get_time_resolution() != sc_core::sc_time(1, sc_core::SC_PS)) {
    throw ModelError(ErrorKind::kInvalidArgument,
                     "Fabric needs SystemC's time resolution to be 1 ps");
  }
  topology_ = std::make_unique<Topology>(spec, net_);
  for (int d = 0; d < topology_->device_count(); ++d) {
    for (int e = 0; e < spec.dma.engines; ++e) {
      engines_.push_back(std::make_unique<Engine>(&node_pool_));
      engines_.back()->ref = EngineRef{d, e};
    }
  }
  link_state_.assign(topology_->links().size(), 1.0);
  SC_METHOD(run);
  sensitive << wake_;
  dont_initialize();
}

Fabric::~Fabric() = default;

SimTime Fabric::now() const {
  return sc_core::sc_time_stamp().value();
}

void Fabric::check_descriptors(const std::vector<CopyDescriptor>& descs) const {
  if (descs.empty()) {
    throw ModelError(ErrorKind::kInvalidArgument, "post: a batch needs at least one descriptor");
  }
  std::vector<std::pair<std::uint64_t, std::size_t>>& dst_order = dst_order_;
  dst_order.clear();
  desc_memories_.clear();
  // The allocations that held the last source and destination: a batch's descriptors mostly
  // fall in a few tensors, so most are checked by two range tests (nothing is freed meanwhile).
  struct Window {
    std::uint64_t start = 0, size = 0;
    MemoryId id{};
    bool holds(std::uint64_t addr, std::uint64_t len) const {
      return addr - start < size && len <= size - (addr - start);
    }
  } windows[2];
  for (std::size_t i = 0; i < descs.size(); ++i) {
    const CopyDescriptor& d = descs[i];
    if (d.length == 0) {
      throw ModelError(ErrorKind::kInvalidArgument,
                       "post: descriptor " + std::to_string(i) + " has length 0");
    }
    if (windows[0].holds(d.src_addr, d.length) && windows[1].holds(d.dst_addr, d.length)) {
      desc_memories_.emplace_back(windows[0].id, windows[1].id);
      continue;
    }
    MemoryId ids[2];
    for (const auto& [addr, role, id, window] :
         {std::tuple{d.src_addr, "source", &ids[0], &windows[0]},
          std::tuple{d.dst_addr, "destination", &ids[1], &windows[1]}}) {
      const Hbm* m = topology_->memory_at(addr, id);
      // Allocated memory is inside its memory: the common case needs no message.
      if (m != nullptr && m->allocation_holding(addr, d.length, &window->start, &window->size)) {
        window->id = *id;
        continue;
      }
      const std::string which = "descriptor " + std::to_string(i);
      if (m == nullptr) {
        throw ModelError(ErrorKind::kOutOfRange, "post: " + which + " " + role + " address " +
                                                     format_address(addr) + " is in no memory");
      }
      m->check_access(addr, d.length, (std::string("post: ") + which + " " + role).c_str());
    }
    desc_memories_.emplace_back(ids[0], ids[1]);
  }
  if (distinct_blocks(descs)) return;
  for (std::size_t i = 0; i < descs.size(); ++i) dst_order.emplace_back(descs[i].dst_addr, i);
  std::sort(dst_order.begin(), dst_order.end());
  for (std::size_t k = 1; k < dst_order.size(); ++k) {
    const CopyDescriptor& prev = descs[dst_order[k - 1].second];
    if (prev.dst_addr + prev.length > dst_order[k].first) {
      throw ModelError(ErrorKind::kOverlap, "post: destination ranges of descriptors " +
                                                std::to_string(dst_order[k - 1].second) + " and " +
                                                std::to_string(dst_order[k].second) + " overlap");
    }
  }
}

bool Fabric::distinct_blocks(const std::vector<CopyDescriptor>& descs) const {
  // Block copies: a segment of consecutive descriptors with one length L and destinations that
  // agree modulo L overlaps itself exactly when two start at the same address, which a bitmap
  // over its L-slots finds in O(n + span / L / 64). Segments (a layer's K and V tensors, whose
  // blocks may differ in size) must then not overlap each other: their spans are compared.
  constexpr std::size_t kMaxSegments = 64;
  segment_spans_.clear();
  for (std::size_t first = 0; first < descs.size();) {
    const std::uint64_t len = descs[first].length;
    const std::uint64_t phase = descs[first].dst_addr % len;
    std::uint64_t lo = descs[first].dst_addr, hi = lo;
    std::size_t last = first;
    for (; last < descs.size() && descs[last].length == len && descs[last].dst_addr % len == phase;
         ++last) {
      lo = std::min(lo, descs[last].dst_addr);
      hi = std::max(hi, descs[last].dst_addr);
    }
    const std::uint64_t slots = (hi - lo) / len + 1;
    if (segment_spans_.size() == kMaxSegments || slots / 64 > 4 * (last - first) + 1024) {
      return false;  // many segments, or a sparse one: sorting is cheaper
    }
    slot_bits_.assign(static_cast<std::size_t>(slots / 64 + 1), 0);
    for (std::size_t i = first; i < last; ++i) {
      const std::uint64_t k = (descs[i].dst_addr - lo) / len;
      std::uint64_t& word = slot_bits_[static_cast<std::size_t>(k / 64)];
      const std::uint64_t bit = std::uint64_t{1} << (k % 64);
      if (word & bit) return false;  // a repeat: the sort names the pair
      word |= bit;
    }
    segment_spans_.emplace_back(lo, hi + len);  // inside an allocation: no overflow
    first = last;
  }
  std::sort(segment_spans_.begin(), segment_spans_.end());
  for (std::size_t i = 1; i < segment_spans_.size(); ++i) {
    if (segment_spans_[i].first < segment_spans_[i - 1].second) return false;
  }
  return true;
}

std::uint64_t Fabric::post(EngineRef engine, std::vector<CopyDescriptor> descriptors,
                           Callback on_done) {
  topology_->engine_resource(engine.device, engine.engine);  // throws if there is no such engine
  check_descriptors(descriptors);
  Engine& e = *engines_[static_cast<std::size_t>(engine.device * topology_->spec().dma.engines +
                                                 engine.engine)];
  std::unique_ptr<Batch> batch = new_batch();
  Batch* b = batch.get();
  b->id = next_batch_id_++;
  b->engine = &e;
  b->on_done = std::move(on_done);
  b->outcome.id = b->id;
  b->outcome.posted = now();
  b->outcome.descriptors = descriptors.size();
  const std::size_t per_chunk = static_cast<std::size_t>(topology_->spec().dma.chunk_descriptors);
  for (std::size_t first = 0; first < descriptors.size(); first += per_chunk) {
    std::unique_ptr<Chunk> c = new_chunk();
    c->batch = b;
    c->first = first;
    c->count = std::min(per_chunk, descriptors.size() - first);
    c->opens_batch = first == 0;
    // Each descriptor costs what its route's path charges (Topology::apply_path); consecutive
    // descriptors mostly share a memory pair, so the last route is reused.
    MemoryId last_src{UINT32_MAX}, last_dst{UINT32_MAX};
    const Route* r = nullptr;
    c->src_mem = desc_memories_[first].first;
    c->dst_mem = desc_memories_[first].second;
    c->uniform = true;
    c->src_frees = topology_->memory(c->src_mem).frees();
    c->dst_frees = topology_->memory(c->dst_mem).frees();
    for (std::size_t i = first; i < first + c->count; ++i) {
      c->bytes += descriptors[i].length;
      const auto [src, dst] = desc_memories_[i];
      c->uniform = c->uniform && src == c->src_mem && dst == c->dst_mem;
      if (r == nullptr || src != last_src || dst != last_dst) {
        r = &route(src, dst, e);
        last_src = src;
        last_dst = dst;
      }
      c->cost += r->descriptor_cost;
      c->serial = c->serial || !r->overlap;
    }
    b->outcome.bytes += c->bytes;
    e.queue.push_back(c.get());
    b->chunks.push_back(std::move(c));
  }
  b->descs = std::move(descriptors);
  batches_.emplace(b->id, std::move(batch));
  ++stats_.batches_posted;
  stats_.chunks += b->chunks.size();
  if (!in_run_) {
    net_.advance_to(now());
    try_process(e);
    wake_at(now());
  } else {
    try_process(e);
  }
  return b->id;
}

std::unique_ptr<Fabric::Chunk> Fabric::new_chunk() {
  if (chunk_pool_.empty()) return std::make_unique<Chunk>();
  std::unique_ptr<Chunk> c = std::move(chunk_pool_.back());
  chunk_pool_.pop_back();
  std::vector<std::uint32_t> links = std::move(c->links);
  std::vector<FluidNetwork::FlowId> flows = std::move(c->flows);
  *c = Chunk();
  links.clear();
  flows.clear();
  c->links = std::move(links);
  c->flows = std::move(flows);
  return c;
}

std::unique_ptr<Fabric::Batch> Fabric::new_batch() {
  if (batch_pool_.empty()) return std::make_unique<Batch>();
  std::unique_ptr<Batch> b = std::move(batch_pool_.back());
  batch_pool_.pop_back();
  std::vector<std::unique_ptr<Chunk>> chunks = std::move(b->chunks);
  *b = Batch();
  chunks.clear();
  b->chunks = std::move(chunks);
  return b;
}

void Fabric::release(std::uint64_t id) {
  auto it = batches_.find(id);
  // The pools keep as many chunks and batches as were ever released at once, up to a bound.
  constexpr std::size_t kPoolLimit = 4096;
  Batch& b = *it->second;
  for (std::unique_ptr<Chunk>& c : b.chunks) {
    if (chunk_pool_.size() < kPoolLimit) chunk_pool_.push_back(std::move(c));
  }
  b.chunks.clear();
  b.on_done = nullptr;  // what the callback holds goes now, not when the batch is reused
  if (batch_pool_.size() < kPoolLimit) batch_pool_.push_back(std::move(it->second));
  batches_.erase(it);
}

void Fabric::schedule_link_event(const std::string& link, SimTime at, LinkEvent event) {
  const std::uint32_t l = topology_->link_index(link);
  if (at < now()) {
    throw ModelError(ErrorKind::kInvalidArgument, "schedule_link_event: time is in the past");
  }
  if (event.kind == LinkEvent::Kind::kDegrade && !(event.factor > 0 && event.factor <= 1)) {
    throw ModelError(ErrorKind::kInvalidArgument,
                     "schedule_link_event: degrade factor must be in (0, 1]");
  }
  Action a(Action::Kind::kLinkEvent);
  a.link = l;
  a.event = event;
  schedule(at, a);
  if (!in_run_) wake_at(at);
}

void Fabric::stall_engines(int device, SimTime from, SimTime until) {
  if (device < 0 || device >= topology_->device_count()) {
    throw ModelError(ErrorKind::kOutOfRange,
                     "stall_engines: unknown device " + std::to_string(device));
  }
  if (from < now() || until < from) {
    throw ModelError(
        ErrorKind::kInvalidArgument,
        "stall_engines: the window must not start in the past or end before it starts");
  }
  if (until == from) return;
  stalls_.push_back({device, from, until});
  Action a(Action::Kind::kStallEnd);  // the queues drain again
  a.device = device;
  schedule(until, a);
  if (!in_run_) wake_at(until);
}

bool Fabric::stalled(int device) const {
  const SimTime t = now();
  for (const Stall& s : stalls_) {
    if (s.device == device && t >= s.from && t < s.until) return true;
  }
  return false;
}

bool Fabric::link_up(std::uint32_t link) const {
  return link_state_.at(link) > 0;
}

void Fabric::schedule(SimTime at, Action action) {
  action.at = at;
  action.seq = next_seq_++;
  if (action.batch) ++action.batch->refs;
  agenda_.push(action);
}

void Fabric::wake_at(SimTime at) {
  if (at >= wake_time_) return;
  const SimTime t = now();
  wake_time_ = at;
  wake_.cancel();
  if (at <= t) {
    wake_.notify(sc_core::SC_ZERO_TIME);
  } else {
    wake_.notify(sc_core::sc_time::from_value(at - t));
  }
}

void Fabric::try_process(Engine& e) {
  if (!stalls_.empty() && stalled(e.ref.device)) return;  // kStallEnd calls again
  while (e.processing == nullptr && !e.queue.empty()) {
    Chunk* c = e.queue.front();
    if (c->batch->failed) {
      e.queue.pop_front();
      continue;
    }
    // A serial path processes a chunk only once the engine's earlier bytes have left.
    if (c->serial && (e.in_flight > 0 || e.blocked != nullptr)) return;
    e.queue.pop_front();
    const DmaSpec& dma = topology_->spec().dma;
    const SimTime cost = (c->opens_batch ? dma.batch_setup : 0) + c->cost;
    e.processing = c;
    c->processing_start = now();
    Action a(Action::Kind::kDescriptorsDone);
    a.engine = &e;
    a.chunk = c;
    a.batch = c->batch;
    schedule(now() + cost, a);
  }
}

const Route& Fabric::route(MemoryId src, MemoryId dst, const Engine& e, int rail) {
  // Memories < 2^16 and engines < 2^21 (TopologySpec::validate), rails < 16.
  const std::uint64_t engine =
      static_cast<std::uint64_t>(e.ref.device * topology_->spec().dma.engines + e.ref.engine);
  const std::uint64_t key = (std::uint64_t{src.index} << 48) | (std::uint64_t{dst.index} << 32) |
                            (engine << 4) | static_cast<std::uint64_t>(rail);
  auto it = route_cache_.find(key);
  if (it == route_cache_.end()) {
    it = route_cache_.emplace(key, topology_->route(src, dst, e.ref.device, e.ref.engine, rail))
             .first;
  }
  return it->second;
}

int Fabric::rail_of(const Engine& e, const Chunk& c) const {
  // A device with several NICs spreads a batch's chunks over them, from its engine's rail on, as
  // transfer engines spread a device's requests over its NICs (Mooncake round-robins requests
  // over a segment's NICs, efa_transport.md; NIXL's libfabric backend stripes across rails).
  const TopologySpec& s = topology_->spec();
  const int rails = std::max(1, s.fabric.nics_per_node / s.devices_per_node);
  if (rails == 1) return 0;
  const std::size_t index = c.first / static_cast<std::size_t>(s.dma.chunk_descriptors);
  return static_cast<int>((static_cast<std::size_t>(e.ref.engine) + index) %
                          static_cast<std::size_t>(rails));
}

void Fabric::start_data(Engine& e, Chunk* c) {
  Batch* b = c->batch;
  ++e.in_flight;
  c->sending = true;
  c->data_start = now();
  // One flow per distinct (source memory, destination memory) pair in the chunk, in first-seen
  // order.
  std::vector<FlowGroup>& groups = groups_;
  groups.clear();
  if (c->uniform)
    groups.push_back({c->src_mem, c->dst_mem, static_cast<double>(c->bytes), nullptr});
  for (std::size_t i = c->first; !c->uniform && i < c->first + c->count; ++i) {
    MemoryId s, d;
    topology_->memory_at(b->descs[i].src_addr, &s);
    topology_->memory_at(b->descs[i].dst_addr, &d);
    auto g = std::find_if(groups.begin(), groups.end(),
                          [&](const FlowGroup& x) { return x.src == s && x.dst == d; });
    if (g == groups.end()) {
      groups.push_back({s, d, 0.0, nullptr});
      g = groups.end() - 1;
    }
    g->bytes += static_cast<double>(b->descs[i].length);
  }
  const int rail = rail_of(e, *c);
  for (FlowGroup& g : groups) {
    g.route = &route(g.src, g.dst, e, rail);
    for (std::uint32_t l : g.route->links) {
      if (!link_up(l)) {
        fail_batch(b, "link '" + topology_->links()[l].name + "' is down");  // may reuse groups_
        return;
      }
    }
  }
  for (const FlowGroup& g : groups) {
    const Route& r = *g.route;
    c->latency = std::max(c->latency, r.latency);
    c->links.insert(c->links.end(), r.links.begin(), r.links.end());
    const FluidNetwork::FlowId f = net_.add_flow(g.bytes, r.uses);
    if (observer_) observer_->on_flow_start(f, b->id, now(), g.bytes, r.uses);
    c->flows.push_back(f);
    flow_owner_.emplace(f, c);
    ++c->pending_flows;
  }
}

void Fabric::on_flows_done(const std::vector<FluidNetwork::FlowId>& flows) {
  for (FluidNetwork::FlowId f : flows) {
    auto it = flow_owner_.find(f);
    if (it == flow_owner_.end()) continue;
    Chunk* c = it->second;
    flow_owner_.erase(it);
    ++stats_.flows_completed;
    if (observer_) observer_->on_flow_end(f, now(), true);
    if (--c->pending_flows == 0) on_chunk_sent(c);
  }
}

void Fabric::on_chunk_sent(Chunk* c) {
  Batch* b = c->batch;
  Engine& e = *b->engine;
  c->sending = false;
  c->flows.clear();
  --e.in_flight;
  if (observer_) observer_->on_data(e.ref, b->id, c->data_start, now(), c->bytes, c->links, true);
  b->outcome.landed_bytes += c->bytes;  // committed: its bytes are on the wire and will land
  Action a(Action::Kind::kArrive);
  a.chunk = c;
  a.batch = b;
  schedule(now() + c->latency, a);
  if (e.blocked != nullptr) {
    Chunk* next = e.blocked;
    e.blocked = nullptr;
    start_data(e, next);
  }
  try_process(e);
}

void Fabric::land(Chunk* c) {
  Batch* b = c->batch;
  MemoryId s = c->src_mem, t = c->dst_mem;
  // Nothing freed in either memory since post checked the chunk: its ranges are still allocated.
  if (c->uniform && topology_->memory(s).frees() == c->src_frees &&
      topology_->memory(t).frees() == c->dst_frees) {
    const Hbm& src = topology_->memory(s);
    Hbm& dst = topology_->memory(t);
    if (!has_content(src, *c, true) && !has_content(dst, *c, false)) {
      return land_done(b);  // gaps copied over gaps: no byte changes (most unverified transfers)
    }
    for (std::size_t i = c->first; i < c->first + c->count; ++i) {
      const CopyDescriptor& d = b->descs[i];
      Hbm::copy_checked(src, d.src_addr, dst, d.dst_addr, d.length);
    }
    return land_done(b);
  }
  for (std::size_t i = c->first; i < c->first + c->count; ++i) {
    const CopyDescriptor& d = b->descs[i];
    if (!c->uniform) {
      topology_->memory_at(d.src_addr, &s);
      topology_->memory_at(d.dst_addr, &t);
    }
    try {
      Hbm::copy(topology_->memory(s), d.src_addr, topology_->memory(t), d.dst_addr, d.length);
    } catch (const ModelError& err) {
      // Memory freed while the copy was in flight (its process died): the transfer fails, as an
      // RDMA access to a deregistered region does.
      if (err.kind() != ErrorKind::kUnallocated) throw;
      fail_batch(b, "descriptor " + std::to_string(i) + ": " + err.what());
      return;
    }
  }
  land_done(b);
}

bool Fabric::has_content(const Hbm& m, const Chunk& c, bool source) const {
  const ContentStore& content = m.content();
  if (content.extent_count() == 0) return false;
  std::uint64_t lo = UINT64_MAX, hi = 0;
  for (std::size_t i = c.first; i < c.first + c.count; ++i) {
    const CopyDescriptor& d = c.batch->descs[i];
    const std::uint64_t addr = source ? d.src_addr : d.dst_addr;
    lo = std::min(lo, addr);
    hi = std::max(hi, addr + d.length);  // inside an allocation: no overflow
  }
  return content.has_content(lo, hi - lo);
}

void Fabric::land_done(Batch* b) {
  if (++b->chunks_landed == b->chunks.size() && !b->failed) {
    b->outcome.ok = true;
    b->outcome.finished = now();
    finish_batch(b);
  }
}

void Fabric::fail_batch(Batch* b, const std::string& why) {
  if (b->failed) return;
  b->failed = true;
  ++stats_.batches_failed;
  Engine& e = *b->engine;
  for (auto& c : b->chunks) {
    if (!c->sending) continue;
    if (observer_)
      observer_->on_data(e.ref, b->id, c->data_start, now(), c->bytes, c->links, false);
    for (FluidNetwork::FlowId f : c->flows) {
      if (flow_owner_.erase(f) > 0) {
        net_.cancel_flow(f);
        if (observer_) observer_->on_flow_end(f, now(), false);
      }
    }
    c->flows.clear();
    c->pending_flows = 0;
    c->sending = false;
    --e.in_flight;
  }
  if (e.blocked != nullptr && e.blocked->batch == b) e.blocked = nullptr;
  e.queue.erase(
      std::remove_if(e.queue.begin(), e.queue.end(), [b](const Chunk* c) { return c->batch == b; }),
      e.queue.end());
  b->outcome.ok = false;
  b->outcome.error = why + " at " + format_time(now());
  b->outcome.finished = now() + topology_->spec().fault_detection_time;
  Action a(Action::Kind::kReport);
  a.batch = b;
  schedule(b->outcome.finished, a);
  if (e.blocked != nullptr && e.in_flight < topology_->spec().dma.queue_depth) {
    Chunk* next = e.blocked;
    e.blocked = nullptr;
    start_data(e, next);
  }
  try_process(e);
}

void Fabric::finish_batch(Batch* b) {
  b->reported = true;
  if (observer_) observer_->on_batch_end(b->engine->ref, b->outcome);
  if (b->on_done) b->on_done(b->outcome);
}

void Fabric::apply_link_event(std::uint32_t link, LinkEvent ev) {
  const Link& l = topology_->links()[link];
  if (observer_) observer_->on_link_event(link, now(), ev);
  switch (ev.kind) {
    case LinkEvent::Kind::kDown: {
      link_state_[link] = 0;
      std::vector<Batch*> hit;
      for (const auto& [flow, chunk] : flow_owner_) {
        (void)flow;
        if (std::find(chunk->links.begin(), chunk->links.end(), link) != chunk->links.end() &&
            std::find(hit.begin(), hit.end(), chunk->batch) == hit.end()) {
          hit.push_back(chunk->batch);
        }
      }
      std::sort(hit.begin(), hit.end(),
                [](const Batch* x, const Batch* y) { return x->id < y->id; });
      for (Batch* b : hit) fail_batch(b, "link '" + l.name + "' went down");
      return;
    }
    case LinkEvent::Kind::kUp:
      link_state_[link] = 1.0;
      break;
    case LinkEvent::Kind::kDegrade:
      link_state_[link] = ev.factor;
      break;
  }
  net_.set_capacity(l.forward, l.nominal_effective * link_state_[link]);
  net_.set_capacity(l.backward, l.nominal_effective * link_state_[link]);
}

void Fabric::run() {
  ++stats_.activations;
  in_run_ = true;
  wake_time_ = FluidNetwork::kNever;
  const SimTime t = now();
  net_.advance_to(t);
  for (;;) {
    if (net_.next_completion() <= t) {
      // on_flows_done starts chunks and schedules actions but never completes flows itself.
      net_.complete_until(t, done_flows_);
      on_flows_done(done_flows_);
      continue;
    }
    if (agenda_.empty() || agenda_.top().at > t) break;
    Action a = agenda_.top();
    agenda_.pop();
    if (a.batch) --a.batch->refs;
    switch (a.kind) {
      case Action::Kind::kDescriptorsDone: {
        Engine& e = *a.engine;
        e.processing = nullptr;
        if (observer_) {
          observer_->on_processing(e.ref, a.chunk->batch->id, a.chunk->processing_start, now(),
                                   a.chunk->count);
        }
        if (!a.chunk->batch->failed) {
          if (e.in_flight < topology_->spec().dma.queue_depth) {
            start_data(e, a.chunk);
          } else {
            e.blocked = a.chunk;
          }
        }
        if (e.blocked == nullptr) try_process(e);
        break;
      }
      case Action::Kind::kArrive:
        land(a.chunk);
        break;
      case Action::Kind::kReport:
        finish_batch(a.batch);
        break;
      case Action::Kind::kLinkEvent:
        apply_link_event(a.link, a.event);
        break;
      case Action::Kind::kStallEnd: {
        const int per_device = topology_->spec().dma.engines;
        for (int k = 0; k < per_device; ++k) {
          Engine& e = *engines_[static_cast<std::size_t>(a.device * per_device + k)];
          if (e.blocked == nullptr) try_process(e);
        }
        break;
      }
    }
    if (a.batch && a.batch->reported && a.batch->refs == 0) release(a.batch->id);
  }
  in_run_ = false;
  const SimTime next =
      std::min(net_.next_completion(), agenda_.empty() ? FluidNetwork::kNever : agenda_.top().at);
  if (next != FluidNetwork::kNever) wake_at(next);
}

}  // namespace kvsim::model
