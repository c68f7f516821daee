#include "sim/serving/serving_runner.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <tuple>

#include "impl/directory.h"
#include "impl/llm_datadist.h"
#include "impl/validation.h"
#include "sim/chrome_trace.h"
#include "sim/engine_setup.h"
#include "sim/serving/block_pool.h"
#include "sim/world.h"

namespace kvsim::sim::serving {
namespace {

using impl::LLMStatusCode;
using model::SimTime;

constexpr std::size_t kTraceRequestLimit = 500;  // a Chrome trace of more would not open
// Samples a series holds before its interval doubles (even: samples merge in pairs).
constexpr std::size_t kMaxSamples = 512;

// Nodes `instances` of `tp` ranks fill, whole instances per node.
int nodes_for(int instances, int tp, const model::TopologySpec& spec) {
  const int per_node = spec.devices_per_node / tp;
  return (instances + per_node - 1) / per_node;
}

// One rank of an instance: its engine on its device and its registered paged cache.
struct RankEngine {
  int device = 0;
  std::uint64_t cluster = 0;
  int process = 0;  // the host process it runs in (killed by process_killed)
  std::unique_ptr<impl::LLMDataDist> dist;
  std::optional<impl::CacheView> cache;  // set once registered
};

// The per-layer "computed" events of one prefill batch, shared by its requests' tasks (the
// documented per-layer event pattern, spec 8).
struct BatchLayers {
  std::vector<std::unique_ptr<impl::Signal>> computed;
  bool aborted = false;  // its instance died: the layers left are never computed
};

// A prefill or decode instance: TP ranks on one node sharing one block table. A process_killed
// fault ends every rank's process; a restart brings new ones up with new engines, pool and loop,
// and raises the epoch, so that the jobs of the dead ones leave what they held alone.
struct Instance {
  std::string name;
  bool prefill = false;
  bool alive = true;
  int epoch = 0;
  std::vector<RankEngine> ranks;
  std::unique_ptr<BlockPool> pool;
  std::shared_ptr<impl::Signal> bell;      // set to wake the instance's loop (fresh per wait)
  std::deque<int> queue;                   // prefill: waiting requests; decode: KV landed
  std::uint64_t queued_tokens = 0;         // prefill: prompt tokens queued or in the running batch
  std::vector<int> running;                // decode: the batch being stepped
  std::vector<int> batch;                  // prefill: the batch being computed
  std::shared_ptr<BatchLayers> computing;  // and its layers' events
};

// The link between rank r of a prefill instance and rank r of a decode instance, as the engine
// keeps it for recovery: a relink raises the generation, so that requests that failed before it
// retry on the new link instead of relinking again.
struct PairLink {
  bool linked = true;
  int generation = 0;
  std::shared_ptr<impl::Signal> relinking;  // set while a relink runs; set() when it ends
};

// A request's life in the cluster.
struct Live {
  RequestResult r;
  std::vector<std::int64_t> src_blocks;  // prefill side
  std::vector<std::int64_t> dst_all;     // decode side: prompt and output blocks
  std::vector<std::int64_t> dst_blocks;  // decode side: the prompt's, where the KV lands
  std::vector<impl::CacheTask> tasks;    // layer-wise: one per rank
  std::size_t pending_ranks = 0;         // push_blocks: ranks still pushing
  std::uint64_t generated = 0;
  std::uint64_t queued = 0;  // tokens it counts in its prefill instance's queued_tokens
  int src_epoch = 0;         // its instances' epochs when it got their blocks
  int dst_epoch = 0;
  /// Tokens prefill computes: the prompt, and on a recompute the tokens made so far.
  std::uint64_t context() const { return r.prompt_tokens + generated; }
};

class LayerEvents final : public impl::LayerSynchronizer {
 public:
  explicit LayerEvents(std::shared_ptr<BatchLayers> batch) : batch_(std::move(batch)) {}
  bool synchronize_layer(std::int64_t layer, std::optional<std::int64_t>) override {
    return batch_->computed.at(static_cast<std::size_t>(layer))->wait_for(impl::kForever) &&
           !batch_->aborted;
  }

 private:
  std::shared_ptr<BatchLayers> batch_;
};

// A retry's synchronizer: every layer was computed before the first attempt failed.
class LayersDone final : public impl::LayerSynchronizer {
 public:
  bool synchronize_layer(std::int64_t, std::optional<std::int64_t>) override { return true; }
};

class Serving {
 public:
  Serving(const Scenario& s, const RunOptions& o)
      : s_(s), v_(*s.serving), options_(o), world_(s.preset, s.hardware_overrides) {
    if (o.trace && o.attach) {
      throw std::invalid_argument("RunOptions: trace and attach both need the fabric's observer");
    }
    if (o.trace && s.requests.size() <= kTraceRequestLimit) {
      trace_ = std::make_unique<ChromeTrace>(world_.fabric());
    }
    if (o.attach) o.attach(world_.fabric());
    result_.scenario = s;
    live_.resize(s.requests.size());
  }

  RunResult go() {
    // Faults first: one at the start meets the engines' link handshakes.
    for (const FaultSpec& f : s_.faults) world_.fabric().schedule_link_event(f.link, f.at, f.event);
    for (const MemoryFaultSpec& m : s_.memory_faults) {
      world_.platform().add_memory_fault(m.device, m.from, m.until);
    }
    for (const CompletionDelaySpec& c : s_.completion_delays) {
      world_.platform().add_completion_delay(c.device, c.from, c.until, c.delay);
    }
    for (const QueueStallSpec& q : s_.queue_stalls) {
      world_.platform().add_queue_stall(q.device, q.from, q.until);
    }
    setup();
    busy_ = 1;  // the arrivals job
    world_.platform().spawn("arrivals", [this] { arrivals(); });
    for (Instance& p : prefill_) start_loop(p);
    for (Instance& d : decode_) start_loop(d);
    for (const ProcessFaultSpec& f : s_.process_faults) {
      Instance& inst = instance_named(f.instance);
      world_.platform().spawn("kill_" + f.instance, [this, &inst, f] { kill(inst, f); });
    }
    world_.platform().spawn("sampler", [this] { sampler(); });
    world_.platform().run_until_idle();
    if (!error_.empty()) throw std::runtime_error(error_);
    if (completed_ != live_.size()) {
      throw std::runtime_error("serving stalled with " + std::to_string(live_.size() - completed_) +
                               " of " + std::to_string(live_.size()) + " requests unserved");
    }
    finish();
    return std::move(result_);
  }

 private:
  impl::Platform& platform() { return world_.platform(); }
  int tp() const { return s_.tensor_parallel; }
  bool layerwise() const { return s_.method == TransferMethod::kLayerwise; }
  bool pushes() const { return s_.method == TransferMethod::kPushBlocks; }

  std::uint64_t blocks_for(std::uint64_t tokens) const {
    return (tokens + s_.block_tokens - 1) / s_.block_tokens;
  }
  std::uint64_t block_bytes() const {  // one block of one tensor
    return desc_.size() / static_cast<std::uint64_t>(blocks_);
  }

  // Weights one rank reads per decode step: the active parameters of every layer [I]:
  // embeddings are left out and MoE experts count once per token.
  double weight_bytes_per_rank() const {
    return s_.model.active_params_per_layer() * s_.model.layers * s_.dtype_bytes / tp();
  }
  double kv_bytes_per_token_rank() const {
    return static_cast<double>(s_.model.kv_elements_per_token(tp())) * 2.0 * s_.model.layers *
           s_.kv_dtype_bytes;
  }

  // Blocks per rank's cache: given, or what fits beside the weights (vLLM's sizing rule)...
  std::int64_t cache_blocks(const model::TopologySpec& spec) const {
    if (v_.cache_blocks) return *v_.cache_blocks;
    const double per_block = static_cast<double>(s_.block_tokens) * kv_bytes_per_token_rank();
    const double room = static_cast<double>(spec.hbm_capacity) * v_.memory_utilization -
                        weight_bytes_per_rank() - 2.0 * s_.model.layers * kCacheAlign;
    // ... and within what one device may register (spec 4: at most 50 GB).
    const double limit = static_cast<double>(impl::RegistrationLimits{}.max_device_bytes);
    const auto blocks = static_cast<std::int64_t>(std::floor(std::min(room, limit) / per_block));
    if (blocks < 1) {
      throw std::runtime_error("serving: the weights (" +
                               std::to_string(weight_bytes_per_rank() / 1e9) +
                               " GB per rank) leave no HBM for KV blocks");
    }
    return blocks;
  }

  void make_instance(Instance& inst, const std::string& name, int first_device,
                     std::uint64_t first_cluster, impl::LLMRole role) {
    inst.name = name;
    inst.prefill = role == impl::LLMRole::PROMPT;
    inst.ranks.resize(static_cast<std::size_t>(tp()));
    for (int r = 0; r < tp(); ++r) {
      RankEngine& k = inst.ranks[static_cast<std::size_t>(r)];
      k.device = first_device + r;
      k.cluster = first_cluster + static_cast<std::uint64_t>(r);
      k.dist = std::make_unique<impl::LLMDataDist>(platform(), world_.directory(), role, k.cluster);
    }
    inst.pool = std::make_unique<BlockPool>(blocks_, s_.block_order);
  }

  // Decode listens when the prompt side pushes (layer-wise, push_blocks); prefill listens when
  // decode pulls (spec 8).
  bool listens(const Instance& inst) const { return inst.prefill == !(layerwise() || pushes()); }

  // A host process for rank k of `inst` (one per rank and start: an engine is a process).
  void add_rank_process(RankEngine& k, const Instance& inst, std::size_t r) {
    const std::string name = inst.name + "r" + std::to_string(r) +
                             (inst.epoch > 0 ? "." + std::to_string(inst.epoch) : "");
    k.process = world_.platform().add_process(
        {name, world_.fabric().topology().node_of(k.device), {k.device}});
  }

  void init_rank(RankEngine& k, bool listen) {
    std::map<std::string, std::string> o = engine_options(platform(), k.device, listen);
    o[impl::kOptionDeviceId] = "0";  // each engine is a process that sees its one device
    if (s_.sync_kv_timeout_ms) {
      o[impl::kOptionSyncKvCacheWaitTime] = std::to_string(*s_.sync_kv_timeout_ms);
    }
    if (pushes()) o[impl::kOptionEnableRemoteCacheAccessible] = "1";  // push_* need it (spec 4)
    k.dist->init(o);
  }

  // Registers rank k's paged cache. push_blocks names the decode side's by its BlocksCacheKey,
  // pull_blocks the prefill side's.
  void register_cache(RankEngine& k, const Instance& inst) {
    const bool keyed = inst.prefill ? !layerwise() : pushes();
    k.cache = allocate_with_retries(
        k, keyed ? std::optional<impl::BlocksCacheKey>(impl::BlocksCacheKey{k.cluster, 0})
                 : std::nullopt);
  }

  // Links rank r of prefill p and decode d from the side that transfers; a careful engine tries
  // a link that failed (a path down) again. The status of the last attempt.
  LLMStatusCode link_pair(std::size_t p, std::size_t d, std::size_t r) {
    const auto [client, info] = link_ends(prefill_[p].ranks[r], decode_[d].ranks[r]);
    auto [code, codes] = client.link_clusters({info}, v_.recovery.link_timeout_ms);
    for (int k = 0; code != LLMStatusCode::LLM_SUCCESS && k < v_.recovery.retries; ++k) {
      platform().sleep(v_.recovery.pause);
      std::tie(code, codes) = client.link_clusters({info}, v_.recovery.link_timeout_ms);
    }
    return code;
  }

  void setup() {
    const model::TopologySpec& spec = world_.spec();
    std::uint64_t longest = 0;
    for (const Request& q : s_.requests) {
      longest = std::max(longest, q.prompt_tokens + std::max<std::uint64_t>(q.output_tokens, 1));
    }
    blocks_ = cache_blocks(spec);
    // vLLM's null block 0 is never handed out.
    const std::int64_t usable = s_.block_order == BlockOrder::kVllm ? blocks_ - 1 : blocks_;
    if (blocks_for(longest) > static_cast<std::uint64_t>(std::max<std::int64_t>(usable, 0))) {
      throw std::runtime_error("serving: a request of " + std::to_string(longest) +
                               " tokens needs " + std::to_string(blocks_for(longest)) +
                               " blocks but a cache holds " + std::to_string(usable) +
                               " (serving.cache_blocks or a shorter workload.trace cap)");
    }
    desc_ = impl::CacheDesc(2 * s_.model.layers,
                            {blocks_, static_cast<std::int64_t>(s_.block_tokens),
                             static_cast<std::int64_t>(s_.model.kv_elements_per_token(tp()))},
                            data_type_of(s_.kv_dtype));
    // Instances fill nodes in order, prefill first; decode starts on a node of its own.
    const int per_node = spec.devices_per_node / tp();
    const int dpn = spec.devices_per_node;
    const int prefill_nodes = nodes_for(v_.prefill_instances, tp(), spec);
    const std::uint64_t decode_base = std::max<std::uint64_t>(
        kDecodeClusterBase, kPromptClusterBase + static_cast<std::uint64_t>(v_.prefill_instances) *
                                                     static_cast<std::uint64_t>(tp()));
    prefill_.resize(static_cast<std::size_t>(v_.prefill_instances));
    decode_.resize(static_cast<std::size_t>(v_.decode_instances));
    for (int p = 0; p < v_.prefill_instances; ++p) {
      make_instance(prefill_[static_cast<std::size_t>(p)], "prefill" + std::to_string(p),
                    (p / per_node) * dpn + (p % per_node) * tp(),
                    kPromptClusterBase + static_cast<std::uint64_t>(p * tp()),
                    impl::LLMRole::PROMPT);
    }
    for (int d = 0; d < v_.decode_instances; ++d) {
      make_instance(decode_[static_cast<std::size_t>(d)], "decode" + std::to_string(d),
                    (prefill_nodes + d / per_node) * dpn + (d % per_node) * tp(),
                    decode_base + static_cast<std::uint64_t>(d * tp()), impl::LLMRole::DECODER);
    }
    // Rank r of every prefill instance links to rank r of every decode instance, in the
    // single-request runner's order for 1P1D. Each rank's engine and cache belong to its process.
    for (std::size_t r = 0; r < static_cast<std::size_t>(tp()); ++r) {
      for (std::vector<Instance>* side : {&prefill_, &decode_}) {
        for (Instance& inst : *side) {
          add_rank_process(inst.ranks[r], inst, r);
          world_.platform().run_as(inst.ranks[r].process,
                                   [&] { init_rank(inst.ranks[r], listens(inst)); });
        }
      }
      for (std::vector<Instance>* side : {&prefill_, &decode_}) {
        for (Instance& inst : *side) {
          world_.platform().run_as(inst.ranks[r].process,
                                   [&] { register_cache(inst.ranks[r], inst); });
        }
      }
      for (std::size_t p = 0; p < prefill_.size(); ++p) {
        for (std::size_t d = 0; d < decode_.size(); ++d) {
          const LLMStatusCode code = link_pair(p, d, r);
          if (code != LLMStatusCode::LLM_SUCCESS) {
            throw std::runtime_error(prefill_[p].name + " rank " + std::to_string(r) + " to " +
                                     decode_[d].name + ": link_clusters failed with " +
                                     std::string(impl::to_string(code)));
          }
        }
      }
    }
    const model::Topology& t = world_.fabric().topology();
    const int pd = prefill_[0].ranks[0].device, dd = decode_[0].ranks[0].device;
    const model::Route route = t.route(t.device_memory(pd), t.device_memory(dd), pd, 0);
    const model::Link& link = t.links()[route.links.front()];
    result_.effective_rate = link.nominal_effective;
    result_.line_rate =
        link.type == spec.scale_out.type ? spec.scale_out.bandwidth : spec.scale_up.bandwidth;
    const std::size_t stride =
        v_.verify_fraction > 0
            ? std::max<std::size_t>(1,
                                    static_cast<std::size_t>(std::llround(1 / v_.verify_fraction)))
            : 0;
    for (std::size_t i = 0; i < live_.size(); ++i) {
      const Request& q = s_.requests[i];
      RequestResult& r = live_[i].r;
      r.id = static_cast<int>(i);
      r.prompt_tokens = q.prompt_tokens;
      r.output_tokens = std::max<std::uint64_t>(q.output_tokens, 1);
      r.arrival = q.arrival;
      r.checked = stride > 0 && i % stride == 0;
      last_arrival_ = std::max(last_arrival_, q.arrival);
    }
  }

  // A rank's paged cache; a careful engine (serving.recovery.retries) allocates again after a
  // pause when its device is out of memory for a while (a device_oom fault at start-up).
  impl::CacheView allocate_with_retries(RankEngine& k,
                                        const std::optional<impl::BlocksCacheKey>& key) {
    for (int attempt = 0;; ++attempt) {
      try {
        return allocate_and_register(platform(), *k.dist, k.device, desc_, true, key);
      } catch (const std::runtime_error&) {
        if (attempt >= v_.recovery.retries) throw;
        platform().sleep(v_.recovery.pause);
      }
    }
  }

  // Who links the pair (the side that transfers) and the address it links to. Layer-wise and
  // push_blocks push from the prompt side, so decode listens; pull_blocks pulls from the decode
  // side, so prefill listens (spec 8).
  std::pair<impl::LLMDataDist&, impl::LLMClusterInfo> link_ends(const RankEngine& pk,
                                                                const RankEngine& dk) {
    if (layerwise() || pushes()) {
      return {*pk.dist, server_info(platform(), dk.cluster, dk.device, pk.device)};
    }
    return {*dk.dist, server_info(platform(), pk.cluster, pk.device, dk.device)};
  }

  // Unlinks and links rank r's pair of q's instances again, unless another request did since
  // `seen` (its generation when this request's transfer failed); waits for a relink in progress.
  // A link attempt while the path is down fails after link_timeout; the next retry tries again.
  void relink(const Live& q, std::size_t r, int seen) {
    PairLink& pair = pairs_[{q.r.prefill_instance, q.r.decode_instance, r}];
    while (pair.relinking) {
      const std::shared_ptr<impl::Signal> running = pair.relinking;
      (void)running->wait_for(impl::kForever);
    }
    if (pair.linked && pair.generation != seen) return;
    pair.relinking = std::shared_ptr<impl::Signal>(platform().make_signal());
    const auto [client, info] =
        link_ends(prefill_[static_cast<std::size_t>(q.r.prefill_instance)].ranks[r],
                  decode_[static_cast<std::size_t>(q.r.decode_instance)].ranks[r]);
    (void)client.unlink_clusters({info}, v_.recovery.link_timeout_ms, true);
    pair.linked = false;
    const auto [code, codes] = client.link_clusters({info}, v_.recovery.link_timeout_ms);
    if (code == LLMStatusCode::LLM_SUCCESS) {
      pair.linked = true;
      ++pair.generation;
      ++result_.relinks;
    }
    const std::shared_ptr<impl::Signal> done = std::move(pair.relinking);
    done->set();
  }

  // Runs one rank's transfer of q (`attempt`: "" on success, else its status) and, on a failure,
  // what serving.recovery says: a pause, a relink when asked, and another attempt, up to
  // `retries`. The last attempt's status.
  // No retry once one of q's instances died: its blocks went with it, and the engine knows (its
  // peer's process is gone, not a link).
  std::string with_recovery(Live& q, std::size_t r, const std::function<std::string()>& attempt) {
    int seen = pairs_[{q.r.prefill_instance, q.r.decode_instance, r}].generation;
    std::string error = attempt();
    for (int k = 0; !error.empty() && k < v_.recovery.retries && !instance_lost(q); ++k) {
      ++q.r.retries;
      platform().sleep(v_.recovery.pause);
      if (instance_lost(q)) break;
      if (v_.recovery.relink) relink(q, r, seen);
      seen = pairs_[{q.r.prefill_instance, q.r.decode_instance, r}].generation;
      error = attempt();
    }
    return error;
  }

  void ring(Instance& inst) {
    if (inst.bell && !inst.bell->is_set()) inst.bell->set();
  }
  void wait(Instance& inst) {
    const std::shared_ptr<impl::Signal> bell = platform().make_signal();
    inst.bell = bell;
    (void)bell->wait_for(impl::kForever);
    if (inst.bell == bell) inst.bell.reset();  // a restarted loop may wait on its own by now
  }

  void fail(const std::exception& e) {
    if (error_.empty()) error_ = std::string("request serving failed: ") + e.what();
    finished_ = true;
    for (Instance& i : prefill_) ring(i);
    for (Instance& i : decode_) ring(i);
  }

  // Queues request `id` at a live prefill instance by the router's rule (a router sends nothing
  // to an instance its health checks found dead); with none alive, it waits for a restart.
  void route(int id, bool first = false) {
    Live& q = live_[static_cast<std::size_t>(id)];
    int p = -1;
    for (std::size_t k = 0; k < prefill_.size(); ++k) {
      const std::size_t c = (next_prefill_ + k) % prefill_.size();
      if (!prefill_[c].alive) continue;
      if (v_.router == ServingSpec::Router::kRoundRobin) {
        p = static_cast<int>(c);
        next_prefill_ = (c + 1) % prefill_.size();
        break;
      }
      if (p < 0 ||
          prefill_[c].queued_tokens < prefill_[static_cast<std::size_t>(p)].queued_tokens) {
        p = static_cast<int>(c);
      }
    }
    if (p < 0) {
      orphans_.push_back(id);
      return;
    }
    Instance& inst = prefill_[static_cast<std::size_t>(p)];
    q.r.prefill_instance = p;
    q.queued = q.context();
    if (first) {
      inst.queue.push_front(id);
    } else {
      inst.queue.push_back(id);
    }
    inst.queued_tokens += q.queued;
    ring(inst);
  }

  void arrivals() {
    try {
      for (std::size_t i = 0; i < live_.size(); ++i) {
        // The engine's router or proxy hop and scheduling come before any prefill queue.
        const SimTime at = live_[i].r.arrival + s_.engine.request_overhead;
        if (platform().now() < at) platform().sleep(at - platform().now());
        route(static_cast<int>(i));
      }
    } catch (const std::exception& e) {
      fail(e);
    }
    --busy_;
  }

  // A live decode instance with room for `blocks`, by the router's rule; -1 if none has.
  int pick_decode(std::uint64_t blocks) {
    const auto fits = [&](std::size_t d) {
      return decode_[d].alive &&
             static_cast<std::uint64_t>(decode_[d].pool->free_blocks()) >= blocks;
    };
    if (v_.router == ServingSpec::Router::kRoundRobin) {
      for (std::size_t k = 0; k < decode_.size(); ++k) {
        const std::size_t d = (next_decode_ + k) % decode_.size();
        if (fits(d)) {
          next_decode_ = (d + 1) % decode_.size();
          return static_cast<int>(d);
        }
      }
      return -1;
    }
    int best = -1;
    for (std::size_t d = 0; d < decode_.size(); ++d) {
      if (fits(d) &&
          (best < 0 || decode_[d].pool->free_blocks() >
                           decode_[static_cast<std::size_t>(best)].pool->free_blocks())) {
        best = static_cast<int>(d);
      }
    }
    return best;
  }

  // Takes queued requests in order up to the token budget, each with its prefill blocks and a
  // decode reservation: the prompt and whole output, or only the context when the engine's decode
  // side allocates as tokens come. Stops at the first that cannot get its blocks.
  std::vector<int> form_batch(Instance& inst) {
    std::vector<int> batch;
    std::uint64_t tokens = 0;
    while (!inst.queue.empty()) {
      Live& q = live_[static_cast<std::size_t>(inst.queue.front())];
      if (!batch.empty() && tokens + q.context() > v_.token_budget) break;
      const std::uint64_t need = blocks_for(q.context());
      const std::uint64_t reserve = s_.engine.incremental_decode_blocks
                                        ? need
                                        : blocks_for(q.r.prompt_tokens + q.r.output_tokens);
      if (static_cast<std::uint64_t>(inst.pool->free_blocks()) < need) break;
      const int d = pick_decode(reserve);
      if (d < 0) break;
      const auto id = static_cast<std::uint64_t>(q.r.id);
      q.src_blocks = *inst.pool->allocate(need, 2 * id + 1);  // the single-request runner's seeds
      q.dst_all = *decode_[static_cast<std::size_t>(d)].pool->allocate(reserve, 2 * id + 2);
      q.dst_blocks.assign(q.dst_all.begin(), q.dst_all.begin() + static_cast<std::ptrdiff_t>(need));
      q.r.decode_instance = d;
      q.src_epoch = inst.epoch;
      q.dst_epoch = decode_[static_cast<std::size_t>(d)].epoch;
      tokens += q.context();
      batch.push_back(q.r.id);
      inst.queue.pop_front();
    }
    return batch;
  }

  // An instance's loop, for as long as this start of it lives (`epoch`).
  void start_loop(Instance& inst) {
    const int epoch = inst.epoch;
    world_.platform().spawn(inst.name, [this, &inst, epoch] {
      if (inst.prefill) {
        prefill_loop(inst, epoch);
      } else {
        decode_loop(inst, epoch);
      }
    });
  }

  void prefill_loop(Instance& inst, int epoch) {
    try {
      while (!finished_ && inst.epoch == epoch) {
        std::vector<int> batch = inst.queue.empty() ? std::vector<int>{} : form_batch(inst);
        if (batch.empty()) {
          wait(inst);
          continue;
        }
        ++busy_;
        run_batch(inst, batch, epoch);
        --busy_;
      }
    } catch (const std::exception& e) {
      fail(e);
    }
  }

  // Calls fn(first block, blocks) for each run of consecutive ids in `blocks`.
  template <typename F>
  static void for_runs(const std::vector<std::int64_t>& blocks, F fn) {
    for (std::size_t i = 0; i < blocks.size();) {
      std::size_t j = i + 1;
      while (j < blocks.size() && blocks[j] == blocks[j - 1] + 1) ++j;
      fn(static_cast<std::uint64_t>(blocks[i]), static_cast<std::uint64_t>(j - i));
      i = j;
    }
  }

  // What prefill writes, for requests that will be verified: a distinct stream per request, rank,
  // tensor and run of blocks.
  void fill(const Live& q, const Instance& inst) {
    model::Topology& t = world_.fabric().topology();
    for (std::size_t r = 0; r < inst.ranks.size(); ++r) {
      const RankEngine& k = inst.ranks[r];
      model::Hbm& mem = t.memory(t.device_memory(k.device));
      for (std::size_t tensor = 0; tensor < k.cache->tensor_addrs.size(); ++tensor) {
        for_runs(q.src_blocks, [&](std::uint64_t first, std::uint64_t n) {
          mem.fill_pattern(
              k.cache->tensor_addrs[tensor] + first * block_bytes(), n * block_bytes(),
              (static_cast<std::uint64_t>(q.r.id) << 32) ^ (r << 24) ^ (tensor << 16) ^ first);
        });
      }
    }
  }

  // Forgets a verified request's content on both sides, so that later, unverified copies over
  // these blocks cost nothing (content is a map of extents, DESIGN.md).
  // A side that died since q got its blocks is skipped: its memory went with its process.
  void forget(const Live& q) {
    model::Topology& t = world_.fabric().topology();
    const Instance& src = prefill_[static_cast<std::size_t>(q.r.prefill_instance)];
    const Instance& dst = decode_[static_cast<std::size_t>(q.r.decode_instance)];
    const bool src_alive = src.epoch == q.src_epoch, dst_alive = dst.epoch == q.dst_epoch;
    const auto clear = [&](const RankEngine& k, const std::vector<std::int64_t>& blocks) {
      model::ContentStore& c = t.memory(t.device_memory(k.device)).content();
      for (const std::uint64_t base : k.cache->tensor_addrs) {
        for_runs(blocks, [&](std::uint64_t first, std::uint64_t n) {
          c.clear(base + first * block_bytes(), n * block_bytes());
        });
      }
    };
    for (std::size_t r = 0; r < static_cast<std::size_t>(tp()); ++r) {
      if (src_alive) clear(src.ranks[r], q.src_blocks);
      if (dst_alive) clear(dst.ranks[r], q.dst_blocks);
    }
  }

  // Computes `batch` layer by layer on `inst` while its transfers run. Stops where it is if the
  // instance dies (kill() has taken the batch over by then).
  void run_batch(Instance& inst, const std::vector<int>& batch, int epoch) {
    const SimTime start = platform().now();
    auto layers = std::make_shared<BatchLayers>();
    for (int l = 0; l < s_.model.layers; ++l) layers->computed.push_back(platform().make_signal());
    inst.computing = layers;
    inst.batch = batch;
    SimTime layer_time = 0;
    for (const int id : batch) {
      Live& q = live_[static_cast<std::size_t>(id)];
      q.r.prefill_start = start;
      q.r.ok = true;  // until a rank's transfer says otherwise (set_status)
      q.r.status = "LLM_SUCCESS";
      layer_time += s_.prefill_layer_time(q.context());
      if (q.r.checked) fill(q, inst);
    }
    if (layerwise()) {
      // One task per request and rank. The tasks of a batch run at once, their layers serialised
      // by the engine's transfer mutex (hixl src/llm_datadist/llm_datadist_v2.cc
      // LLMDataDistV2::TransferCache), which v2 allows and kvsim diagnoses (ConcurrentTransfer).
      auto sync = std::make_shared<LayerEvents>(layers);
      for (const int id : batch) {
        Live& q = live_[static_cast<std::size_t>(id)];
        const Instance& dst = decode_[static_cast<std::size_t>(q.r.decode_instance)];
        for (std::size_t r = 0; r < inst.ranks.size(); ++r) {
          std::vector<impl::AnyTransferConfig> configs{
              impl::TransferConfig(dst.ranks[r].cluster, dst.ranks[r].cache->tensor_addrs,
                                   impl::LayerRange{0, s_.model.layers, 1}, 0)};
          q.tasks.push_back(inst.ranks[r].dist->cache_manager().transfer_cache_async(
              *inst.ranks[r].cache, sync, configs, blocks_args(q)));
        }
        ++busy_;
        platform().spawn("deliver", [this, id] { deliver(id); });
      }
    }
    if (pushes()) {
      for (const int id : batch)
        live_[static_cast<std::size_t>(id)].pending_ranks = inst.ranks.size();
      for (std::size_t r = 0; r < inst.ranks.size(); ++r) {
        ++busy_;
        platform().spawn("push",
                         [this, &inst, r, layers, batch] { push(inst, r, *layers, batch); });
      }
    }
    for (std::size_t l = 0; l < layers->computed.size(); ++l) {
      const SimTime ls = platform().now();
      platform().sleep(layer_time);
      if (inst.epoch != epoch) return;
      layers->computed[l]->set();
      if (l == 0) {
        for (const int id : batch)
          live_[static_cast<std::size_t>(id)].r.transfer_start = platform().now();
      }
      if (trace_) {
        trace_->add_span(inst.name, "compute", "layer " + std::to_string(l), ls, platform().now());
      }
    }
    inst.computing.reset();
    inst.batch.clear();
    for (const int id : batch) {
      Live& q = live_[static_cast<std::size_t>(id)];
      q.r.prefill_end = platform().now();
      inst.queued_tokens -= q.queued;
      if (s_.method == TransferMethod::kPullBlocks) {
        q.r.transfer_start = q.r.prefill_end;
        ++busy_;
        platform().spawn("pull", [this, id] { pull(id); });
      }
    }
  }

  static impl::TransferBlockArgs blocks_args(const Live& q) {
    impl::TransferBlockArgs b;
    b.src_block_indices = q.src_blocks;
    b.dst_block_indices = q.dst_blocks;
    return b;
  }

  void set_status(Live& q, const std::string& status) {
    if (q.r.ok) q.r.status = status;
    q.r.ok = false;
  }

  // Runs fn(r) for every rank at once, each as a job of its own (each rank is a process of its
  // own), and returns their results ("" or a status) once all have ended.
  std::vector<std::string> on_every_rank(std::size_t ranks,
                                         const std::function<std::string(std::size_t)>& fn) {
    std::vector<std::unique_ptr<impl::Signal>> done;
    std::vector<std::string> out(ranks);
    for (std::size_t r = 0; r < ranks; ++r) {
      done.push_back(platform().make_signal());
      platform().spawn("rank", [&, r] {
        try {
          out[r] = fn(r);
        } catch (const std::exception& e) {
          out[r] = e.what();
        }
        done[r]->set();
      });
    }
    for (std::size_t r = 0; r < ranks; ++r) (void)done[r]->wait_for(impl::kForever);
    return out;
  }

  // Layer-wise: waits for every rank's task, then hands the request to its decode instance. A
  // rank whose task failed retries as serving.recovery says, sending every layer again (all
  // computed by then).
  void deliver(int id) {
    Live& q = live_[static_cast<std::size_t>(id)];
    try {
      Instance& src = prefill_[static_cast<std::size_t>(q.r.prefill_instance)];
      const Instance& dst = decode_[static_cast<std::size_t>(q.r.decode_instance)];
      const std::vector<std::string> errors = on_every_rank(q.tasks.size(), [&](std::size_t r) {
        bool first = true;
        return with_recovery(q, r, [&] {
          std::optional<impl::CacheTask> again;
          if (!first) {
            std::vector<impl::AnyTransferConfig> configs{
                impl::TransferConfig(dst.ranks[r].cluster, dst.ranks[r].cache->tensor_addrs,
                                     impl::LayerRange{0, s_.model.layers, 1}, 0)};
            again = src.ranks[r].dist->cache_manager().transfer_cache_async(
                *src.ranks[r].cache, std::make_shared<LayersDone>(), configs, blocks_args(q));
          }
          impl::CacheTask& task = first ? q.tasks[r] : *again;
          first = false;
          const LLMStatusCode code = task.synchronize();
          return code == LLMStatusCode::LLM_SUCCESS ? std::string()
                                                    : std::string(impl::to_string(code));
        });
      });
      for (const std::string& error : errors) {
        if (!error.empty()) set_status(q, error);
      }
      q.tasks.clear();
      landed(q);
    } catch (const std::exception& e) {
      fail(e);
    }
    --busy_;
  }

  // push_blocks, as xLLM drives PushKvBlocks: one rank's transfer thread waits for each layer of
  // the batch and pushes it for every request, synchronously (spec 8; hixl
  // src/python/llm_datadist/llm_datadist/v2/cache_manager.py CacheManager.push_blocks: remote-
  // accessible mode, one transfer per layer). A failed push ends that request's later layers on
  // this rank; the request still lands (failed) after the last layer.
  void push(Instance& inst, std::size_t r, BatchLayers& layers, const std::vector<int>& batch) {
    try {
      RankEngine& k = inst.ranks[r];
      std::vector<std::string> errors(batch.size());
      for (std::size_t l = 0; l < layers.computed.size(); ++l) {
        (void)layers.computed[l]->wait_for(impl::kForever);
        const impl::LayerRange range{static_cast<std::int64_t>(l), static_cast<std::int64_t>(l) + 1,
                                     1};
        for (std::size_t i = 0; i < batch.size(); ++i) {
          Live& q = live_[static_cast<std::size_t>(batch[i])];
          const RankEngine& dst = decode_[static_cast<std::size_t>(q.r.decode_instance)].ranks[r];
          if (errors[i].empty() && (layers.aborted || instance_lost(q))) {
            errors[i] = lost_status(q);  // this process, or its peer's, died
          }
          if (errors[i].empty()) {
            try {
              k.dist->cache_manager().push_blocks(impl::BlocksCacheKey{dst.cluster, 0}, *k.cache,
                                                  q.src_blocks, q.dst_blocks, range, range);
            } catch (const impl::LLMException& e) {
              errors[i] = std::string(impl::to_string(e.status_code()));
            }
          }
          if (l + 1 == layers.computed.size()) {
            if (!errors[i].empty() && v_.recovery.retries > 0) {
              // The retries push every layer again, in one call.
              const impl::LayerRange all{0, s_.model.layers, 1};
              bool first = true;
              errors[i] = with_recovery(q, r, [&]() -> std::string {
                if (first) {
                  first = false;
                  return errors[i];
                }
                try {
                  k.dist->cache_manager().push_blocks(impl::BlocksCacheKey{dst.cluster, 0},
                                                      *k.cache, q.src_blocks, q.dst_blocks, all,
                                                      all);
                  return {};
                } catch (const impl::LLMException& e) {
                  return std::string(impl::to_string(e.status_code()));
                }
              });
            }
            if (!errors[i].empty()) set_status(q, errors[i]);
            if (--q.pending_ranks == 0) landed(q);
          }
        }
      }
    } catch (const std::exception& e) {
      fail(e);
    }
    --busy_;
  }

  // pull_blocks after prefill: every decode rank pulls its shard at once (spec 8, vLLM-Ascend).
  void pull(int id) {
    Live& q = live_[static_cast<std::size_t>(id)];
    try {
      // The engine's handoff to the decode side, and its bootstrap from arrival (beside prefill).
      const SimTime ask = s_.engine.kv_ask(q.r.arrival, platform().now());
      if (ask > platform().now()) platform().sleep(ask - platform().now());
      q.r.transfer_start = platform().now();
      if (s_.engine.transfer_overhead > 0) platform().sleep(s_.engine.transfer_overhead);
      Instance& src = prefill_[static_cast<std::size_t>(q.r.prefill_instance)];
      Instance& dst = decode_[static_cast<std::size_t>(q.r.decode_instance)];
      if (instance_lost(q)) {  // died during the handoff
        set_status(q, lost_status(q));
        landed(q);
        --busy_;
        return;
      }
      const std::vector<std::string> errors = on_every_rank(dst.ranks.size(), [&](std::size_t r) {
        return with_recovery(q, r, [&]() -> std::string {
          try {
            dst.ranks[r].dist->cache_manager().pull_blocks(
                impl::BlocksCacheKey{src.ranks[r].cluster, 0}, *dst.ranks[r].cache, q.src_blocks,
                q.dst_blocks);
            return {};
          } catch (const impl::LLMException& e) {
            return std::string(impl::to_string(e.status_code()));
          }
        });
      });
      for (const std::string& error : errors) {
        if (!error.empty()) set_status(q, error);
      }
      landed(q);
    } catch (const std::exception& e) {
      fail(e);
    }
    --busy_;
  }

  // Every rank's transferred blocks on the decode side equal their prefill-side sources.
  bool verify(const Live& q) {
    const model::Topology& t = world_.fabric().topology();
    const Instance& src = prefill_[static_cast<std::size_t>(q.r.prefill_instance)];
    const Instance& dst = decode_[static_cast<std::size_t>(q.r.decode_instance)];
    const std::vector<std::size_t> order = by_destination(q.dst_blocks);
    for (std::size_t r = 0; r < src.ranks.size(); ++r) {
      const model::ContentStore& a = t.memory(t.device_memory(src.ranks[r].device)).content();
      const model::ContentStore& b = t.memory(t.device_memory(dst.ranks[r].device)).content();
      for (std::size_t tensor = 0; tensor < src.ranks[r].cache->tensor_addrs.size(); ++tensor) {
        const std::uint64_t s0 = src.ranks[r].cache->tensor_addrs[tensor];
        const std::uint64_t d0 = dst.ranks[r].cache->tensor_addrs[tensor];
        for (const std::size_t i : order) {
          if (b.first_difference(d0 + static_cast<std::uint64_t>(q.dst_blocks[i]) * block_bytes(),
                                 a,
                                 s0 + static_cast<std::uint64_t>(q.src_blocks[i]) * block_bytes(),
                                 block_bytes())) {
            return false;
          }
        }
      }
    }
    return true;
  }

  // The KV is on the decode side (or failed to get there): free the prefill blocks, verify, and
  // queue for decode admission.
  // KV that landed on a decode instance that died meanwhile is gone with it; a prefill instance
  // that died after its KV landed takes nothing away (but the bytes can no longer be compared).
  void landed(Live& q) {
    q.r.transfer_end = platform().now();
    q.r.bytes = q.src_blocks.size() * block_bytes() * desc_.num_tensors() *
                static_cast<std::uint64_t>(tp());
    Instance& src = prefill_[static_cast<std::size_t>(q.r.prefill_instance)];
    Instance& dst = decode_[static_cast<std::size_t>(q.r.decode_instance)];
    const bool src_alive = src.epoch == q.src_epoch, dst_alive = dst.epoch == q.dst_epoch;
    if (q.r.ok && !dst_alive) set_status(q, lost_status(q));
    if (q.r.ok && !src_alive) q.r.checked = false;
    q.r.verified = q.r.ok && q.r.checked && verify(q);
    if (q.r.checked) forget(q);
    if (src_alive) {
      src.pool->release(q.src_blocks);
      ring(src);
    }
    if (trace_) {
      const std::string track = "request " + std::to_string(q.r.id);
      trace_->add_span("requests", track, "prefill", q.r.prefill_start, q.r.prefill_end);
      trace_->add_span("requests", track, "exposed transfer", q.r.prefill_end, q.r.transfer_end);
    }
    if (!q.r.ok) {
      if (dst_alive) dst.pool->release(q.dst_all);
      recompute_or_lose(q);
      return;
    }
    dst.queue.push_back(q.r.id);
    ring(dst);
  }

  // Whether an instance q holds blocks on died since it got them.
  bool instance_lost(const Live& q) const {
    return prefill_[static_cast<std::size_t>(q.r.prefill_instance)].epoch != q.src_epoch ||
           decode_[static_cast<std::size_t>(q.r.decode_instance)].epoch != q.dst_epoch;
  }
  // The status of a request whose instance died: "killed with decode0".
  std::string lost_status(const Live& q) const {
    const Instance& src = prefill_[static_cast<std::size_t>(q.r.prefill_instance)];
    return "killed with " + (src.epoch != q.src_epoch
                                 ? src.name
                                 : decode_[static_cast<std::size_t>(q.r.decode_instance)].name);
  }

  // A request that failed (q.r.status says why), or whose KV died: computed again from its prompt
  // and the tokens it made when serving.recovery.recompute allows another, else lost.
  void recompute_or_lose(Live& q) {
    if (q.r.recomputes >= v_.recovery.recompute) {
      q.r.ok = false;
      complete();
      return;
    }
    ++q.r.recomputes;
    q.r.ok = true;
    q.r.status = "LLM_SUCCESS";
    forget_blocks(q);
    route(q.r.id);
  }

  // A request computed again holds no blocks and no transfer tasks until it is batched anew.
  static void forget_blocks(Live& q) {
    q.src_blocks.clear();
    q.dst_all.clear();
    q.dst_blocks.clear();
    q.tasks.clear();
  }

  void complete() {
    ++completed_;
    last_completion_ = platform().now();
    for (Instance& p : prefill_) ring(p);  // blocks came free
    if (options_.progress) options_.progress(completed_, live_.size());
    if (completed_ == live_.size()) {
      finished_ = true;
      for (Instance& d : decode_) ring(d);
    }
  }

  Instance& instance_named(const std::string& name) {
    for (std::vector<Instance>* side : {&prefill_, &decode_}) {
      for (Instance& inst : *side) {
        if (inst.name == name) return inst;
      }
    }
    throw std::invalid_argument("process_killed: no serving instance is named '" + name + "'");
  }

  // process_killed: at f.at every rank process of `inst` dies as SIGKILL would. Its engines leave
  // without telling their peers, its HBM (KV blocks) is freed, and what it held is lost: the
  // batch it computed, its queue and, on the decode side, the requests it was stepping. Transfers
  // to or from it fail where they are. At f.restart the orchestrator starts it again.
  void kill(Instance& inst, const ProcessFaultSpec& f) {
    try {
      if (platform().now() < f.at) platform().sleep(f.at - platform().now());
      if (finished_ || !inst.alive) return;
      ++busy_;  // while it is down its requests wait for it, which is not a stall
      const SimTime at = platform().now();
      const std::string why = inst.name + " killed at t=" + std::to_string(model::to_seconds(at)) +
                              " s (process_killed)";
      inst.alive = false;
      ++inst.epoch;
      for (RankEngine& k : inst.ranks) {
        k.dist->abandon(why);
        world_.platform().kill_process(k.process);
      }
      std::vector<int> orphaned(inst.queue.begin(), inst.queue.end());
      if (inst.computing) {  // the layers left never come: its transfer jobs fail and end
        inst.computing->aborted = true;
        for (const auto& layer : inst.computing->computed) {
          if (!layer->is_set()) layer->set();
        }
        // pull_blocks starts after prefill: its batch has no transfer job to end it.
        if (s_.method == TransferMethod::kPullBlocks) {
          for (const int id : inst.batch) {
            Live& q = live_[static_cast<std::size_t>(id)];
            Instance& dst = decode_[static_cast<std::size_t>(q.r.decode_instance)];
            if (dst.epoch == q.dst_epoch) dst.pool->release(q.dst_all);
            orphaned.push_back(id);
          }
        }
        inst.computing.reset();
      }
      orphaned.insert(orphaned.end(), inst.running.begin(), inst.running.end());
      inst.queue.clear();
      inst.batch.clear();
      inst.running.clear();
      inst.queued_tokens = 0;
      ring(inst);  // its loop wakes and ends
      for (const int id : orphaned) {
        Live& q = live_[static_cast<std::size_t>(id)];
        q.r.ok = false;  // queued, computing or decoding: it had not failed before
        q.r.status = "killed with " + inst.name;
        recompute_or_lose(q);
      }
      if (!finished_) {
        if (platform().now() < f.restart) platform().sleep(f.restart - platform().now());
        if (trace_) trace_->add_span(inst.name, "fault", "killed", at, platform().now());
        restart(inst);
      }
      --busy_;
    } catch (const std::exception& e) {
      fail(e);
    }
  }

  // The instance starts again: a new process per rank inits its engine, registers a fresh cache
  // and links where its side links (the peers' ends of the old links are lost: a careful peer
  // relinks when a transfer over one fails). The dead ranks and pool stay for the jobs that
  // still hold them.
  void restart(Instance& inst) {
    retired_ranks_.push_back(std::move(inst.ranks));
    retired_pools_.push_back(std::move(inst.pool));
    const std::vector<RankEngine>& old = retired_ranks_.back();
    inst.ranks = std::vector<RankEngine>(old.size());
    for (std::size_t r = 0; r < old.size(); ++r) {
      RankEngine& k = inst.ranks[r];
      k.device = old[r].device;
      k.cluster = old[r].cluster;
      k.dist = std::make_unique<impl::LLMDataDist>(
          platform(), world_.directory(),
          inst.prefill ? impl::LLMRole::PROMPT : impl::LLMRole::DECODER, k.cluster);
      add_rank_process(k, inst, r);
    }
    inst.pool = std::make_unique<BlockPool>(blocks_, s_.block_order);
    std::vector<std::unique_ptr<impl::Signal>> done;
    std::vector<std::string> errors(inst.ranks.size());
    for (std::size_t r = 0; r < inst.ranks.size(); ++r) {
      done.push_back(platform().make_signal());
      world_.platform().spawn_as(inst.ranks[r].process, inst.name + "_start", [&, r] {
        try {
          start_rank(inst, r);
        } catch (const std::exception& e) {
          errors[r] = e.what();
        }
        done[r]->set();
      });
    }
    for (const auto& d : done) (void)d->wait_for(impl::kForever);
    for (std::size_t r = 0; r < errors.size(); ++r) {
      if (!errors[r].empty()) {
        throw std::runtime_error(inst.name + " rank " + std::to_string(r) +
                                 " could not start again: " + errors[r]);
      }
    }
    inst.alive = true;
    ++result_.restarts;
    start_loop(inst);
    std::vector<int> waiting;
    waiting.swap(orphans_);
    for (const int id : waiting) route(id);
    for (Instance& p : prefill_) ring(p);  // a decode instance with room again
  }

  // Rank r of a restarted instance, in its own process: init, register, link.
  void start_rank(Instance& inst, std::size_t r) {
    RankEngine& k = inst.ranks[r];
    init_rank(k, listens(inst));
    register_cache(k, inst);
    if (listens(inst)) return;
    const std::size_t self =
        static_cast<std::size_t>(&inst - (inst.prefill ? prefill_.data() : decode_.data()));
    const std::vector<Instance>& peers = inst.prefill ? decode_ : prefill_;
    for (std::size_t o = 0; o < peers.size(); ++o) {
      if (!peers[o].alive) continue;
      const std::size_t p = inst.prefill ? self : o, d = inst.prefill ? o : self;
      PairLink& pair = pairs_[{static_cast<int>(p), static_cast<int>(d), r}];
      pair.linked = link_pair(p, d, r) == LLMStatusCode::LLM_SUCCESS;
      if (pair.linked) ++pair.generation;
    }
  }

  // One decode step reads the rank's weights and the KV of every running request [I]: with the
  // preset's compute model when it prices prefill too (no prefill: section), else at
  // serving.decode_efficiency of the HBM bandwidth.
  SimTime step_time(const Instance& inst) const {
    std::uint64_t kv_tokens = 0;
    for (const int id : inst.running) {
      const Live& q = live_[static_cast<std::size_t>(id)];
      kv_tokens += q.r.prompt_tokens + q.generated;
    }
    if (s_.prefill_from_preset) return s_.decode_step_time(inst.running.size(), kv_tokens);
    const double bytes =
        weight_bytes_per_rank() + static_cast<double>(kv_tokens) * kv_bytes_per_token_rank();
    const double rate = world_.spec().hbm_bandwidth * v_.decode_efficiency;
    return static_cast<SimTime>(std::ceil(bytes / rate * 1e12)) +
           static_cast<SimTime>(inst.running.size()) * s_.engine.decode_request_overhead;
  }

  // vLLM's decode side: each step first gives every running request room for the token it
  // writes (KVCacheManager.allocate_slots); when no block is free it preempts the newest running
  // request (Scheduler.schedule: self.running.pop(), _preempt_request) until the request gets its
  // block or is itself the one preempted. vllm/v1/core/sched/scheduler.py.
  void grow_or_preempt(Instance& inst) {
    for (std::size_t i = 0; i < inst.running.size();) {
      Live& q = live_[static_cast<std::size_t>(inst.running[i])];
      const std::uint64_t want = blocks_for(q.context() + 1);
      while (i < inst.running.size() && q.dst_all.size() < want) {
        if (auto block = inst.pool->allocate(1, 2 * static_cast<std::uint64_t>(q.r.id) + 2)) {
          q.dst_all.push_back(block->front());
          continue;
        }
        const int victim = inst.running.back();
        inst.running.pop_back();
        preempt(inst, victim);
      }
      ++i;
    }
  }

  // Gives a running request's decode blocks back and computes its context again, ahead of new
  // prompts (vLLM recomputes a preempted request; kvsim does it through a prefill instance).
  void preempt(Instance& inst, int id) {
    Live& q = live_[static_cast<std::size_t>(id)];
    inst.pool->release(q.dst_all);
    ++q.r.preemptions;
    forget_blocks(q);
    route(id, true);
    for (Instance& p : prefill_) ring(p);  // blocks came free
  }

  void decode_loop(Instance& inst, int epoch) {
    try {
      while (inst.epoch == epoch) {
        while (!inst.queue.empty() &&
               inst.running.size() < static_cast<std::size_t>(v_.decode_batch)) {
          const int id = inst.queue.front();
          inst.queue.pop_front();
          live_[static_cast<std::size_t>(id)].r.decode_start = platform().now();
          inst.running.push_back(id);
        }
        if (s_.engine.incremental_decode_blocks) grow_or_preempt(inst);
        if (inst.running.empty()) {
          if (finished_) return;
          wait(inst);
          continue;
        }
        ++busy_;
        const SimTime start = platform().now();
        platform().sleep(step_time(inst));
        if (inst.epoch != epoch) {  // died during the step: kill() took its requests over
          --busy_;
          return;
        }
        if (trace_) trace_->add_span(inst.name, "decode", "step", start, platform().now());
        std::vector<int> still;
        for (const int id : inst.running) {
          Live& q = live_[static_cast<std::size_t>(id)];
          if (++q.generated == 1)
            q.r.first_token = platform().now() + s_.engine.first_token_overhead;
          if (q.generated < q.r.output_tokens) {
            still.push_back(id);
            continue;
          }
          q.r.completion = platform().now();
          inst.pool->release(q.dst_all);
          complete();
        }
        inst.running.swap(still);
        --busy_;
      }
    } catch (const std::exception& e) {
      fail(e);
    }
  }

  // Queue lengths and scale-out link utilisation at a simulated interval: a 200th of the arrivals'
  // span (at least 1 ms), doubled whenever kMaxSamples are held, each pair of samples becoming
  // one, so that a run much longer than its arrivals (a burst decoding for minutes) keeps a
  // bounded series. Ends with the last request, or when nothing is left that could make progress
  // (a stall go() reports).
  void sampler() {
    const model::Topology& t = world_.fabric().topology();
    const model::FluidNetwork& net = world_.fabric().network();
    std::vector<TimeSeries>& series = result_.series;
    for (const Instance& p : prefill_) series.push_back({p.name + " queue", {}});
    for (const Instance& d : decode_) {
      series.push_back({d.name + " running", {}});
      series.push_back({d.name + " waiting", {}});
    }
    std::vector<const model::Link*> links;
    for (const model::Link& l : t.links()) {
      if (l.type != world_.spec().scale_out.type) continue;
      links.push_back(&l);
      series.push_back({l.name + " util", {}});
    }
    std::vector<double> last(links.size(), 0.0);
    SimTime interval = std::max<SimTime>(model::kMs, last_arrival_ / 200);
    const std::size_t queues = prefill_.size() + 2 * decode_.size();  // then the links' columns
    int idle_samples = 0;
    std::size_t completed_before = 0;
    while (!finished_) {
      platform().sleep(interval);
      const SimTime now = platform().now();
      result_.sample_times.push_back(now);
      auto column = series.begin();
      for (const Instance& p : prefill_)
        (column++)->values.push_back(static_cast<double>(p.queue.size()));
      for (const Instance& d : decode_) {
        (column++)->values.push_back(static_cast<double>(d.running.size()));
        (column++)->values.push_back(static_cast<double>(d.queue.size()));
      }
      for (std::size_t k = 0; k < links.size(); ++k) {
        // The busier direction's share of the healthy capacity over the interval.
        const double carried = std::max(net.carried_bytes_at(links[k]->forward, now),
                                        net.carried_bytes_at(links[k]->backward, now));
        (column++)->values.push_back((carried - last[k]) /
                                     (links[k]->nominal_effective * model::to_seconds(interval)));
        last[k] = carried;
      }
      if (result_.sample_times.size() == kMaxSamples) {
        halve_samples(queues);
        interval *= 2;
      }
      // Nothing running for two samples in a row while requests are left: a stall.
      idle_samples =
          busy_ == 0 && all_waiting() && completed_ == completed_before ? idle_samples + 1 : 0;
      completed_before = completed_;
      if (idle_samples >= 2) return;
    }
  }

  // Merges each pair of samples into one at the later time: the later value of a queue or batch
  // length (an instantaneous count), the mean of a link's two utilisations (each over an interval).
  void halve_samples(std::size_t queues) {
    std::vector<SimTime>& times = result_.sample_times;
    for (std::size_t i = 0; 2 * i + 1 < times.size(); ++i) times[i] = times[2 * i + 1];
    times.resize(times.size() / 2);
    for (std::size_t c = 0; c < result_.series.size(); ++c) {
      std::vector<double>& v = result_.series[c].values;
      for (std::size_t i = 0; 2 * i + 1 < v.size(); ++i) {
        v[i] = c < queues ? v[2 * i + 1] : (v[2 * i] + v[2 * i + 1]) / 2;
      }
      v.resize(v.size() / 2);
    }
  }

  bool all_waiting() const {
    for (const Instance& d : decode_) {
      if (!d.running.empty()) return false;
    }
    return true;
  }

  void finish() {
    result_.end = last_completion_;
    for (Live& q : live_) result_.requests.push_back(std::move(q.r));
    collect_world_results(world_, result_);
    if (trace_) result_.trace_json = trace_->json();
    // Keep the links that carried anything.
    auto& series = result_.series;
    series.erase(std::remove_if(series.begin(), series.end(),
                                [](const TimeSeries& t) {
                                  return t.name.size() > 5 &&
                                         t.name.compare(t.name.size() - 5, 5, " util") == 0 &&
                                         std::none_of(t.values.begin(), t.values.end(),
                                                      [](double x) { return x > 0; });
                                }),
                 series.end());
  }

  const Scenario& s_;
  const ServingSpec& v_;
  RunOptions options_;
  World world_;
  std::unique_ptr<ChromeTrace> trace_;
  std::vector<Instance> prefill_;
  std::vector<Instance> decode_;
  std::vector<Live> live_;
  impl::CacheDesc desc_{2, {1, 1}, impl::DataType::DT_INT8};
  std::int64_t blocks_ = 0;
  std::map<std::tuple<int, int, std::size_t>, PairLink> pairs_;  // (prefill, decode, rank)
  std::size_t next_decode_ = 0;
  std::size_t next_prefill_ = 0;
  std::vector<int> orphans_;                           // routed while no prefill instance was alive
  std::deque<std::vector<RankEngine>> retired_ranks_;  // killed instances' ranks, kept for
  std::vector<std::unique_ptr<BlockPool>> retired_pools_;  // the jobs that still hold them
  std::size_t completed_ = 0;
  int busy_ = 0;
  bool finished_ = false;
  SimTime last_arrival_ = 0;
  SimTime last_completion_ = 0;
  RunResult result_;
  std::string error_;
};

}  // namespace

std::vector<std::string> instance_names(const Scenario& scenario) {
  const ServingSpec& v = *scenario.serving;
  std::vector<std::string> out;
  for (int p = 0; p < v.prefill_instances; ++p) out.push_back("prefill" + std::to_string(p));
  for (int d = 0; d < v.decode_instances; ++d) out.push_back("decode" + std::to_string(d));
  return out;
}

std::vector<int> serving_nodes(const Scenario& scenario, const model::TopologySpec& spec) {
  const ServingSpec& v = *scenario.serving;
  const int nodes = nodes_for(v.prefill_instances, scenario.tensor_parallel, spec) +
                    nodes_for(v.decode_instances, scenario.tensor_parallel, spec);
  std::vector<int> out;
  for (int n = 0; n < nodes; ++n) out.push_back(n);
  return out;
}

RunResult run_serving(const Scenario& scenario, const RunOptions& options) {
  if (!scenario.serving) throw std::invalid_argument("run_serving: the scenario has no instances");
  Serving run(scenario, options);
  return run.go();
}

}  // namespace kvsim::sim::serving
