#include "sim/runner.h"

#include <algorithm>
#include <memory>
#include <stdexcept>

#include "impl/directory.h"
#include "impl/llm_datadist.h"
#include "sim/chrome_trace.h"
#include "sim/engine_setup.h"
#include "sim/serving/block_pool.h"
#include "sim/serving/serving_runner.h"
#include "sim/world.h"

namespace kvsim::sim {
namespace {

using impl::LLMStatusCode;
using model::SimTime;

// Releases layer L of the current request once the simulated prefill has computed it (the
// documented per-layer event pattern, spec 8).
class LayerEvents final : public impl::LayerSynchronizer {
 public:
  explicit LayerEvents(std::vector<std::unique_ptr<impl::Signal>>& done) : done_(done) {}
  bool synchronize_layer(std::int64_t layer, std::optional<std::int64_t>) override {
    return done_.at(static_cast<std::size_t>(layer))->wait_for(impl::kForever);
  }

 private:
  std::vector<std::unique_ptr<impl::Signal>>& done_;
};

// One tensor-parallel rank: a prompt process and a decode process with their caches.
struct Rank {
  int prompt_device = 0;
  int decode_device = 0;
  std::unique_ptr<impl::LLMDataDist> prompt;
  std::unique_ptr<impl::LLMDataDist> decode;
  std::optional<impl::CacheView> prompt_cache;  // set once registered
  std::optional<impl::CacheView> decode_cache;
};

class Run {
 public:
  Run(const Scenario& s, const RunOptions& o)
      : s_(s), options_(o), world_(s.preset, s.hardware_overrides) {
    if (o.trace && o.attach) {
      throw std::invalid_argument("RunOptions: trace and attach both need the fabric's observer");
    }
    if (o.trace) trace_ = std::make_unique<ChromeTrace>(world_.fabric());
    if (o.attach) o.attach(world_.fabric());
    result_.scenario = s;
  }

  RunResult go() {
    for (const MemoryFaultSpec& m : s_.memory_faults) {  // before the caches are allocated
      world_.platform().add_memory_fault(m.device, m.from, m.until);
    }
    for (const CompletionDelaySpec& c : s_.completion_delays) {
      world_.platform().add_completion_delay(c.device, c.from, c.until, c.delay);
    }
    for (const QueueStallSpec& q : s_.queue_stalls) {
      world_.platform().add_queue_stall(q.device, q.from, q.until);
    }
    setup();
    for (const FaultSpec& f : s_.faults) world_.fabric().schedule_link_event(f.link, f.at, f.event);
    world_.platform().spawn("serve", [this] { serve(); });
    world_.platform().run_until_idle();
    if (!error_.empty()) throw std::runtime_error(error_);
    finish();
    return std::move(result_);
  }

 private:
  impl::Platform& platform() { return world_.platform(); }

  // Each engine is a host process of its own that sees its one device as device 0.
  std::map<std::string, std::string> options(int device, bool listen) {
    std::map<std::string, std::string> o = engine_options(platform(), device, listen);
    o[impl::kOptionDeviceId] = "0";
    if (s_.sync_kv_timeout_ms) {
      o[impl::kOptionSyncKvCacheWaitTime] = std::to_string(*s_.sync_kv_timeout_ms);
    }
    if (s_.api_version == 1) {
      o.erase(impl::kOptionEnableCacheManager);
      o[impl::kOptionMemPoolConfig] =
          "{\"memory_size\": " + std::to_string(pool_bytes_) + ", \"page_shift\": 21}";
    } else if (s_.prompt_on_host != s_.decode_on_host) {
      // A pull between host and device stages through a device pool of at least 100 MiB
      // (impl/validation.cpp validate_pull_placement).
      o[impl::kOptionMemPoolConfig] =
          "{\"memory_size\": " + std::to_string(std::uint64_t{128} << 20) + ", \"page_shift\": 21}";
    }
    return o;
  }

  void init_as_process(impl::LLMDataDist& dist, const std::string& name, int device,
                       const std::map<std::string, std::string>& options) {
    const int process =
        world_.platform().add_process({name, world_.fabric().topology().node_of(device), {device}});
    world_.platform().run_as(process, [&] { dist.init(options); });
  }

  impl::CacheView make_cache(impl::LLMDataDist& dist, int device, std::uint64_t cluster, bool key,
                             bool host) {
    const std::optional<impl::BlocksCacheKey> blocks_key =
        key ? std::optional<impl::BlocksCacheKey>(impl::BlocksCacheKey{cluster, 0}) : std::nullopt;
    if (s_.api_version == 1) {
      return s_.paged ? dist.kv_cache_manager().allocate_blocks_cache(desc_, blocks_key).view()
                      : dist.kv_cache_manager().allocate_cache(desc_).view();
    }
    // cache.prompt_memory / decode_memory: host: the same shape in the node's DRAM.
    const impl::CacheDesc desc(desc_.num_tensors(), desc_.shape(), desc_.data_type(),
                               host ? impl::Placement::HOST : impl::Placement::DEVICE);
    return allocate_and_register(platform(), dist, device, desc, s_.paged, blocks_key);
  }

  // The memory a rank's cache lives in: its device's HBM, or its node's host DRAM.
  model::MemoryId cache_memory(int device, bool host) {
    const model::Topology& t = world_.fabric().topology();
    return host ? t.host_memory(t.node_of(device)) : t.device_memory(device);
  }

  void setup() {
    const model::TopologySpec& spec = world_.spec();
    max_tokens_ = 0;
    for (const Request& r : s_.requests) max_tokens_ = std::max(max_tokens_, r.prompt_tokens);
    const auto elems =
        static_cast<std::int64_t>(s_.model.kv_elements_per_token(s_.tensor_parallel));
    if (s_.paged) {
      blocks_ = static_cast<std::int64_t>((max_tokens_ + s_.block_tokens - 1) / s_.block_tokens);
      if (s_.block_order == BlockOrder::kVllm) ++blocks_;  // vLLM's null block 0
      desc_ = impl::CacheDesc(2 * s_.model.layers,
                              {blocks_, static_cast<std::int64_t>(s_.block_tokens), elems},
                              data_type_of(s_.kv_dtype));
    } else {
      desc_ =
          impl::CacheDesc(2 * s_.model.layers, {1, static_cast<std::int64_t>(max_tokens_), elems},
                          data_type_of(s_.kv_dtype));
    }
    pool_bytes_ =
        ((desc_.size() + kCacheAlign - 1) / kCacheAlign * kCacheAlign) * desc_.num_tensors() +
        64 * kCacheAlign;
    const int dpn = spec.devices_per_node;
    const bool same_node = s_.prompt_node == s_.decode_node;
    const bool layerwise = s_.method == TransferMethod::kLayerwise;
    ranks_.resize(static_cast<std::size_t>(s_.tensor_parallel));
    for (int r = 0; r < s_.tensor_parallel; ++r) {
      Rank& k = ranks_[static_cast<std::size_t>(r)];
      k.prompt_device = s_.prompt_node * dpn + r;
      k.decode_device = s_.decode_node * dpn + r + (same_node ? s_.tensor_parallel : 0);
      const std::uint64_t pc = kPromptClusterBase + static_cast<std::uint64_t>(r);
      const std::uint64_t dc = kDecodeClusterBase + static_cast<std::uint64_t>(r);
      k.prompt = std::make_unique<impl::LLMDataDist>(platform(), world_.directory(),
                                                     impl::LLMRole::PROMPT, pc);
      k.decode = std::make_unique<impl::LLMDataDist>(platform(), world_.directory(),
                                                     impl::LLMRole::DECODER, dc);
      // Layer-wise: the prompt side pushes, so decode listens; v1 links from the decoder only,
      // so there the prompt listens. pull_blocks: decode pulls (spec 8).
      const bool decode_listens = layerwise && s_.api_version != 1;
      init_as_process(*k.prompt, "prompt" + std::to_string(r), k.prompt_device,
                      options(k.prompt_device, !decode_listens));
      init_as_process(*k.decode, "decode" + std::to_string(r), k.decode_device,
                      options(k.decode_device, decode_listens));
      k.prompt_cache = make_cache(*k.prompt, k.prompt_device, pc, !layerwise, s_.prompt_on_host);
      k.decode_cache = make_cache(*k.decode, k.decode_device, dc, false, s_.decode_on_host);
      const impl::LLMClusterInfo info =
          decode_listens ? server_info(platform(), dc, k.decode_device, k.prompt_device)
                         : server_info(platform(), pc, k.prompt_device, k.decode_device);
      impl::LLMDataDist& client = decode_listens ? *k.prompt : *k.decode;
      const auto [code, codes] = client.link_clusters({info});
      if (code != LLMStatusCode::LLM_SUCCESS) {
        throw std::runtime_error("rank " + std::to_string(r) + ": link_clusters failed with " +
                                 std::string(impl::to_string(code)));
      }
    }
    const model::Topology& t = world_.fabric().topology();
    const model::Route route = t.route(cache_memory(ranks_[0].prompt_device, s_.prompt_on_host),
                                       cache_memory(ranks_[0].decode_device, s_.decode_on_host),
                                       ranks_[0].prompt_device, 0);
    const model::Link& link = t.links()[route.links.front()];
    result_.effective_rate = link.nominal_effective;
    const model::LinkSpec& ls =
        link.type == spec.scale_out.type && !same_node ? spec.scale_out : spec.scale_up;
    result_.line_rate = ls.bandwidth;
  }

  // The block table a fresh engine's allocator gives a request of `n` blocks (cache.block_table:
  // vLLM's 1, 2, ..., n by default, which merge into one run per tensor), deterministically: the
  // serving runner's allocator on an empty cache, so both draw the same tables. A serving study
  // (sim/serving) lets the pool fragment as requests come and go.
  std::vector<std::int64_t> block_table(std::uint64_t n, std::uint64_t seed) const {
    return *serving::BlockPool(blocks_, s_.block_order).allocate(n, seed);
  }

  void serve() {
    try {
      for (std::size_t i = 0; i < s_.requests.size(); ++i) {
        serve_one(static_cast<int>(i), s_.requests[i]);
        if (options_.progress) options_.progress(i + 1, s_.requests.size());
      }
    } catch (const std::exception& e) {
      error_ = std::string("request serving failed: ") + e.what();
    }
  }

  void serve_one(int id, const Request& req) {
    if (platform().now() < req.arrival) platform().sleep(req.arrival - platform().now());
    RequestResult rr;
    rr.id = id;
    rr.prompt_tokens = req.prompt_tokens;
    rr.arrival = req.arrival;
    // The engine's hop and scheduling before prefill (serving.engine; zero for a bare run).
    if (s_.engine.request_overhead > 0) platform().sleep(s_.engine.request_overhead);
    rr.prefill_start = platform().now();
    const auto layers = static_cast<std::size_t>(s_.model.layers);
    const std::uint64_t blocks =
        s_.paged ? (req.prompt_tokens + s_.block_tokens - 1) / s_.block_tokens : 0;
    const std::vector<std::int64_t> src_blocks =
        s_.paged ? block_table(blocks, 2 * id + 1) : std::vector<std::int64_t>{};
    const std::vector<std::int64_t> dst_blocks =
        s_.paged ? block_table(blocks, 2 * id + 2) : std::vector<std::int64_t>{};
    // What prefill writes: a distinct byte stream per request, rank and tensor.
    for (std::size_t r = 0; r < ranks_.size(); ++r) {
      for (std::size_t t = 0; t < ranks_[r].prompt_cache->tensor_addrs.size(); ++t) {
        fill(cache_memory(ranks_[r].prompt_device, s_.prompt_on_host),
             ranks_[r].prompt_cache->tensor_addrs[t], desc_.size(),
             (static_cast<std::uint64_t>(id) << 32) | (r << 16) | t);
      }
    }
    std::vector<std::unique_ptr<impl::Signal>> computed;
    for (std::size_t l = 0; l < layers; ++l) computed.push_back(platform().make_signal());
    std::vector<impl::CacheTask> tasks;
    std::vector<std::vector<impl::AnyTransferConfig>> configs(ranks_.size());
    auto sync = std::make_shared<LayerEvents>(computed);
    const bool layerwise = s_.method == TransferMethod::kLayerwise;
    if (layerwise) {
      for (std::size_t r = 0; r < ranks_.size(); ++r) {
        Rank& k = ranks_[r];
        configs[r].push_back(impl::TransferConfig(kDecodeClusterBase + r,
                                                  k.decode_cache->tensor_addrs,
                                                  impl::LayerRange{0, s_.model.layers, 1}, 0));
        impl::TransferBlockArgs b;
        if (s_.paged) {
          b.src_block_indices = src_blocks;
          b.dst_block_indices = dst_blocks;
        }
        tasks.push_back(s_.api_version == 1
                            ? k.prompt->kv_cache_manager().transfer_cache_async(
                                  impl::KvCache(*k.prompt_cache), sync, configs[r], b)
                            : k.prompt->cache_manager().transfer_cache_async(*k.prompt_cache, sync,
                                                                             configs[r], b));
      }
    }
    const SimTime layer_time = s_.prefill_layer_time(req.prompt_tokens);
    for (std::size_t l = 0; l < layers; ++l) {
      const SimTime start = platform().now();
      platform().sleep(layer_time);
      computed[l]->set();
      if (l == 0) rr.transfer_start = platform().now();
      result_.compute.push_back({id, static_cast<int>(l), start, platform().now()});
      if (trace_)
        trace_->add_span("prefill", "compute", "layer " + std::to_string(l), start,
                         platform().now());
    }
    rr.prefill_end = platform().now();
    rr.ok = true;
    rr.status = "LLM_SUCCESS";
    auto fail = [&rr](const std::string& why) {
      if (rr.ok) rr.status = why;
      rr.ok = false;
    };
    if (layerwise) {
      for (impl::CacheTask& task : tasks) {
        const LLMStatusCode code = task.synchronize();
        if (code != LLMStatusCode::LLM_SUCCESS) fail(std::string(impl::to_string(code)));
      }
    } else {
      // The decode side asks for the KV after the engine's handoff, and not before its
      // bootstrap with the prefill side (which ran from arrival, beside prefill).
      const SimTime ask = s_.engine.kv_ask(rr.arrival, rr.prefill_end);
      if (ask > platform().now()) platform().sleep(ask - platform().now());
      rr.transfer_start = platform().now();
      if (s_.engine.transfer_overhead > 0) platform().sleep(s_.engine.transfer_overhead);
      pull_all(src_blocks, dst_blocks, fail);
    }
    rr.transfer_end = platform().now();
    if (s_.engine.decodes) {
      // The decode instance's first step over the prompt's KV makes the first token; timed, not
      // slept, so that the next request's arrival is unchanged.
      rr.first_token = rr.transfer_end + s_.engine.first_token_overhead +
                       s_.decode_step_time(1, req.prompt_tokens);
    }
    if (trace_) {
      trace_->add_span("requests", "request " + std::to_string(id), "prefill", rr.prefill_start,
                       rr.prefill_end);
      trace_->add_span("requests", "request " + std::to_string(id), "exposed transfer",
                       rr.prefill_end, rr.transfer_end);
    }
    rr.bytes = moved_bytes(blocks);
    rr.verified = rr.ok && verify(src_blocks, dst_blocks);
    result_.requests.push_back(rr);
  }

  void pull_all(const std::vector<std::int64_t>& src_blocks,
                const std::vector<std::int64_t>& dst_blocks,
                const std::function<void(const std::string&)>& fail) {
    std::vector<std::unique_ptr<impl::Signal>> done;
    std::vector<std::string> errors(ranks_.size());
    for (std::size_t r = 0; r < ranks_.size(); ++r) {
      done.push_back(platform().make_signal());
      platform().spawn("pull", [this, r, &src_blocks, &dst_blocks, &done, &errors] {
        Rank& k = ranks_[r];
        try {
          const impl::BlocksCacheKey key{kPromptClusterBase + r, 0};
          if (s_.api_version == 1) {
            k.decode->kv_cache_manager().pull_blocks(key, impl::KvCache(*k.decode_cache),
                                                     src_blocks, dst_blocks);
          } else {
            k.decode->cache_manager().pull_blocks(key, *k.decode_cache, src_blocks, dst_blocks);
          }
        } catch (const impl::LLMException& e) {
          errors[r] = std::string(impl::to_string(e.status_code()));
        } catch (const std::exception& e) {
          errors[r] = e.what();
        }
        done[r]->set();
      });
    }
    for (std::size_t r = 0; r < ranks_.size(); ++r) {
      (void)done[r]->wait_for(impl::kForever);
      if (!errors[r].empty()) fail(errors[r]);
    }
  }

  void fill(model::MemoryId memory, std::uint64_t addr, std::uint64_t len, std::uint64_t seed) {
    world_.fabric().topology().memory(memory).fill_pattern(addr, len, seed);
  }

  std::uint64_t moved_bytes(std::uint64_t blocks) const {
    const std::uint64_t per_tensor =
        s_.paged ? blocks * (desc_.size() / static_cast<std::uint64_t>(blocks_)) : desc_.size();
    return per_tensor * desc_.num_tensors() * ranks_.size();
  }

  // Every transferred row or block on the decode side equals its prompt-side source.
  bool verify(const std::vector<std::int64_t>& src_blocks,
              const std::vector<std::int64_t>& dst_blocks) {
    const model::Topology& t = world_.fabric().topology();
    const std::vector<std::size_t> order = serving::by_destination(dst_blocks);
    for (const Rank& k : ranks_) {
      const model::ContentStore& src =
          t.memory(cache_memory(k.prompt_device, s_.prompt_on_host)).content();
      const model::ContentStore& dst =
          t.memory(cache_memory(k.decode_device, s_.decode_on_host)).content();
      for (std::size_t tensor = 0; tensor < k.prompt_cache->tensor_addrs.size(); ++tensor) {
        const std::uint64_t s0 = k.prompt_cache->tensor_addrs[tensor],
                            d0 = k.decode_cache->tensor_addrs[tensor];
        if (!s_.paged) {
          if (dst.first_difference(d0, src, s0, desc_.size())) return false;
          continue;
        }
        const std::uint64_t block = desc_.size() / static_cast<std::uint64_t>(blocks_);
        for (const std::size_t b : order) {
          if (dst.first_difference(d0 + static_cast<std::uint64_t>(dst_blocks[b]) * block, src,
                                   s0 + static_cast<std::uint64_t>(src_blocks[b]) * block, block)) {
            return false;
          }
        }
      }
    }
    return true;
  }

  void finish() {
    result_.end = platform().now();
    collect_world_results(world_, result_);
    if (trace_) result_.trace_json = trace_->json();
  }

  const Scenario& s_;
  RunOptions options_;
  World world_;
  std::unique_ptr<ChromeTrace> trace_;
  std::vector<Rank> ranks_;
  impl::CacheDesc desc_{2, {1, 1}, impl::DataType::DT_INT8};
  std::uint64_t max_tokens_ = 0;
  std::int64_t blocks_ = 0;
  std::uint64_t pool_bytes_ = 0;
  RunResult result_;
  std::string error_;
};

}  // namespace

void collect_world_results(World& world, RunResult& result) {
  const model::Topology& t = world.fabric().topology();
  const model::FluidNetwork& net = world.fabric().network();
  for (const model::Link& l : t.links()) {
    const double fwd = net.carried_bytes(l.forward), back = net.carried_bytes(l.backward);
    if (fwd + back <= 0) continue;
    const double capacity = l.nominal_effective * model::to_seconds(result.end);
    result.links.push_back(
        {l.name, model::to_string(l.type), fwd + back, std::max(fwd, back) / capacity});
  }
  std::stable_sort(result.links.begin(), result.links.end(),
                   [](const LinkUsage& a, const LinkUsage& b) { return a.bytes > b.bytes; });
  // A serving run flags the same rule thousands of times: keep the first of each kind, and count.
  std::map<std::string, std::size_t> kinds;
  const auto& entries = world.directory().diagnostics().entries();
  for (const impl::Diagnostic& d : entries) {
    const std::string kind(impl::to_string(d.kind));
    if (kinds[kind]++ > 0 && entries.size() > kDiagnosticsListed) continue;
    result.diagnostics.push_back(model::format_time(d.time) + " cluster " +
                                 std::to_string(d.cluster_id) + " " + kind + ": " + d.message);
  }
  if (entries.size() > kDiagnosticsListed) {
    for (const auto& [kind, n] : kinds) {
      result.diagnostics.push_back(kind + ": " + std::to_string(n) + " in all");
    }
  }
}

RunResult run_scenario(const Scenario& scenario, const RunOptions& options) {
  if (scenario.serving) return serving::run_serving(scenario, options);
  Run run(scenario, options);
  return run.go();
}

}  // namespace kvsim::sim
