// Property 2, concurrency constraints (spec §3.4, §3.5, §4, §9) and the link rules: random programs
// of transfer_cache_async (1-2 configs), pull_cache, pull_blocks (C2B by id, B2B by
// BlocksCacheKey), push_cache, push_blocks, link_clusters and unlink_clusters (force or not), each
// called by the prompt or by a decoder toward the prompt over its own side of the link, between one
// prompt process and 1-3 decoders (RoCE and HCCS links; several operations share a link), each
// operation on its own simulated job at a random time, faithful or strict. Every process is a host
// process of its own and listens at its host address; the generation options
// (llm.EnableCacheManager "1", "0" or absent, llm.LocalCommRes, llm.EnableRemoteCacheAccessible,
// llm.TransferBackend "hixl") are generated and the engine they give is predicted by
// engine_rules.h: v1 (KvCacheManager on a memory pool: the decoders link and pull, the prompt
// transfers, no push_*, pulls and tasks on one link diagnosed at either end), v2 with or without
// remote-accessible mode (the prompt links, both sides hold the link), or v2 hixl (a link is its
// client's alone; some decoders link to the prompt too, so both directions exist). The run must
// equal a prediction of the reference model (concurrency_model.h) for some order of simultaneous
// events: every status and per-config result, when each call returns (hence the completion order),
// every hold of every mutex (requested, acquired, released: who blocks on which lock and how long),
// when each batch is posted, every diagnostic (kind, time, link) and strict-mode error. The model
// takes from the run only what the rules do not decide: how long the hardware served each batch (as
// the Recorder saw it) and the link round trip. Bytes: replaying the predicted batches in
// completion order on a shadow copy of every cache gives exactly the simulated memory (a pull sees
// what the transfers and pushes before it on that link wrote; no byte is corrupted, none written
// that no batch should write).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdio>
#include <deque>
#include <numeric>
#include <sstream>
#include <tuple>

#include "impl/diagnostics.h"
#include "properties/concurrency_model.h"
#include "properties/engine_rules.h"
#include "properties/prop_support.h"
#include "sim/engine_setup.h"

namespace kvsim::properties {
namespace {

using concurrency::OpKind;
using impl::LLMRole;

constexpr int kRows = 6;        ///< rows (and blocks) of every cache; op i owns prompt row i
constexpr int kSharedRows = 3;  ///< decoder rows the operations pick from (so they collide)

/// One operation of a program.
struct Op {
  OpKind kind = OpKind::kTransfer;
  int cluster = 2;
  int cluster2 = 0;         ///< transfer: a second config's cluster (0: one config)
  int row = 0;              ///< the decoder row (block) it writes or reads
  bool blocks_key = false;  ///< pull_blocks: B2B by BlocksCacheKey, else C2B by id
  int start_us = 0;         ///< called at start_us µs plus its index in ps (ties in index order)
  int sync_delay_us = 0;    ///< transfer: time each synchronize_layer takes
  bool force = false;       ///< unlink: force=True
  /// Decoder `cluster` calls it toward the prompt over its side of the link. A transfer or push
  /// reads its row `row` and writes prompt row (block) op index, a pull reads prompt row `row`
  /// and writes its own row op index; link and unlink name the prompt.
  bool by_decoder = false;
};

struct Program {
  int decoders = 1;  ///< clusters 2.. (devices 8 RoCE, 1 HCCS, 9 RoCE)
  int layers = 1;
  int row_bytes = 64;
  bool strict = false;
  /// The generation options every process passes to init (each listens at its own address).
  engine_rules::InitOptions init{};
  /// hixl: decoder k links to the prompt too before the program (a link of its own).
  std::vector<bool> reverse{};
  std::vector<Op> ops;
};

/// The engine the rules predict for the program's init options (every process listens).
engine_rules::Engine engine_of(const engine_rules::InitOptions& init) {
  engine_rules::InitOptions o = init;
  o.listen = true;
  o.prompt = true;
  return engine_rules::init(o);
}

void showValue(const Program& p, std::ostream& os) {
  const engine_rules::Engine e = engine_of(p.init);
  os << p.decoders << " decoder(s), " << p.layers << " layer(s) of " << p.row_bytes << " B rows, "
     << (p.strict ? "strict" : "faithful") << ", options {";
  const char* sep = "";
  for (const auto& [k, v] : p.init.to_map()) {
    os << sep << k << ": \"" << v << "\"";
    sep = ", ";
  }
  os << "}: " << (!e.v2 ? "v1" : e.hixl ? "v2 hixl" : e.remote ? "v2 remote-accessible" : "v2");
  for (std::size_t k = 0; k < p.reverse.size(); ++k) {
    if (e.hixl && p.reverse[k]) os << ", c" << 2 + k << " linked to c1 too";
  }
  os << "; program:";
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    const Op& o = p.ops[i];
    os << "\n  [" << i << "] t=" << o.start_us << "us " << to_string(o.kind) << "(cluster "
       << o.cluster;
    if (o.kind == OpKind::kTransfer && o.cluster2 != 0) {
      os << (o.by_decoder ? ", two configs" : " and " + std::to_string(o.cluster2));
    }
    if (o.kind != OpKind::kLink && o.kind != OpKind::kUnlink) os << ", row " << o.row;
    if (o.kind == OpKind::kPullBlocks) os << (o.blocks_key ? ", BlocksCacheKey" : ", by id");
    if (o.kind == OpKind::kTransfer) os << ", sync " << o.sync_delay_us << "us/layer";
    if (o.kind == OpKind::kUnlink && o.force) os << ", force";
    if (o.by_decoder) os << ", called by the decoder";
    os << ")";
  }
}

/// Generation options that init accepts (engine_rules): v1 by llm.EnableCacheManager "0" or by
/// its absence, v2 by "1" or by llm.LocalCommRes, with or without remote-accessible caches, or
/// the hixl backend. v1 is never given llm.EnableRemoteCacheAccessible=1 (v1 has no such mode).
rc::Gen<engine_rules::InitOptions> gen_init() {
  const auto any = rc::gen::build<engine_rules::InitOptions>(
      rc::gen::set(&engine_rules::InitOptions::enable_cache_manager,
                   rc::gen::element<std::optional<bool>>(std::nullopt, false, true)),
      rc::gen::set(&engine_rules::InitOptions::local_comm_res, rc::gen::arbitrary<bool>()),
      rc::gen::set(&engine_rules::InitOptions::remote_accessible,
                   rc::gen::element<std::optional<bool>>(std::nullopt, false, true)),
      rc::gen::set(&engine_rules::InitOptions::transfer_backend,
                   rc::gen::weightedElement<std::optional<std::string>>(
                       {{3, std::nullopt}, {2, std::string("hixl")}})));
  return rc::gen::suchThat(any, [](const engine_rules::InitOptions& o) {
    const engine_rules::Engine e = engine_of(o);
    return !e.error && (e.v2 || o.remote_accessible != std::optional<bool>(true));
  });
}

/// In how many of 6 calls of `kind` a decoder is the caller: v1 lets the prompt transfer and the
/// decoders link and pull, so most calls follow the roles (the others show the refusals).
int decoder_share(OpKind kind, bool v1) {
  if (!v1) return kind == OpKind::kLink || kind == OpKind::kUnlink ? 3 : 2;
  switch (kind) {
    case OpKind::kTransfer:
      return 1;
    case OpKind::kPullCache:
    case OpKind::kPullBlocks:
    case OpKind::kLink:
      return 5;
    default:
      return 3;
  }
}

rc::Gen<Program> gen_program() {
  return rc::gen::mapcat(
      rc::gen::pair(rc::gen::inRange(1, 4), gen_init()),
      [](const std::pair<int, engine_rules::InitOptions>& mode) {
        const int decoders = mode.first;
        const bool v1 = !engine_of(mode.second).v2;
        const auto built = rc::gen::build<Op>(
            rc::gen::set(&Op::kind, rc::gen::weightedElement<OpKind>({{4, OpKind::kTransfer},
                                                                      {2, OpKind::kPullCache},
                                                                      {2, OpKind::kPullBlocks},
                                                                      {2, OpKind::kPushCache},
                                                                      {2, OpKind::kPushBlocks},
                                                                      {2, OpKind::kUnlink},
                                                                      {2, OpKind::kLink}})),
            rc::gen::set(&Op::cluster, rc::gen::inRange(2, 2 + decoders)),
            rc::gen::set(&Op::cluster2,
                         rc::gen::weightedElement<int>(
                             {{3, 0}, {1, 2}, {1, 1 + decoders}, {1, 2 + decoders / 2}})),
            rc::gen::set(&Op::row, rc::gen::inRange(0, kSharedRows)),
            rc::gen::set(&Op::blocks_key, rc::gen::arbitrary<bool>()),
            rc::gen::set(&Op::start_us, rc::gen::inRange(0, 40)),
            rc::gen::set(&Op::sync_delay_us, rc::gen::inRange(0, 10)),
            rc::gen::set(&Op::force, rc::gen::weightedElement<bool>({{3, false}, {1, true}})));
        const auto op =
            rc::gen::map(rc::gen::pair(built, rc::gen::inRange(0, 6)), [v1](std::pair<Op, int> p) {
              p.first.by_decoder = p.second < decoder_share(p.first.kind, v1);
              return p.first;
            });
        return rc::gen::build<Program>(
            rc::gen::set(&Program::decoders, rc::gen::just(decoders)),
            rc::gen::set(&Program::layers, rc::gen::inRange(1, 5)),
            rc::gen::set(&Program::row_bytes,
                         rc::gen::map(rc::gen::inRange(1, 9), [](int n) { return 64 * n; })),
            rc::gen::set(&Program::strict, rc::gen::weightedElement<bool>({{3, false}, {1, true}})),
            rc::gen::set(&Program::init, rc::gen::just(mode.second)),
            rc::gen::set(&Program::reverse,
                         rc::gen::container<std::vector<bool>>(static_cast<std::size_t>(decoders),
                                                               rc::gen::arbitrary<bool>())),
            rc::gen::set(
                &Program::ops,
                // At most kRows operations, cut from a list that shrinks by dropping operations.
                rc::gen::map(rc::gen::nonEmpty(rc::gen::container<std::vector<Op>>(op)),
                             [](std::vector<Op> ops) {
                               if (ops.size() > static_cast<std::size_t>(kRows)) ops.resize(kRows);
                               return ops;
                             })));
      });
}

int device_of(int cluster) {
  return cluster == 2 ? 8 : cluster == 3 ? 1 : 9;
}

/// One hold of a mutex as impl took it.
struct ObservedHold {
  std::string lock;
  Time requested = 0;
  Time acquired = 0;
  Time released = 0;
};

/// Records every hold of every mutex impl makes (the layer right under impl).
class LockLog final : public ForwardingPlatform {
 public:
  using ForwardingPlatform::ForwardingPlatform;
  std::unique_ptr<impl::Mutex> make_mutex(const std::string& name) override;
  std::vector<ObservedHold> holds;
};

class LoggedMutex final : public impl::Mutex {
 public:
  LoggedMutex(LockLog& log, std::string name, std::unique_ptr<impl::Mutex> inner)
      : log_(log), name_(std::move(name)), inner_(std::move(inner)) {}
  void lock() override {
    const Time asked = log_.now();
    inner_->lock();
    open(asked);
  }
  bool try_lock() override {
    if (!inner_->try_lock()) return false;
    open(log_.now());
    return true;
  }
  void unlock() override {
    // The oldest open hold: the only one unless the mutex lets several in (ignore_lock).
    if (!open_.empty()) {
      log_.holds[open_.front()].released = log_.now();
      open_.pop_front();
    }
    inner_->unlock();
  }
  bool locked() const override { return inner_->locked(); }

 private:
  void open(Time asked) {
    log_.holds.push_back({name_, asked, log_.now(), 0});
    open_.push_back(log_.holds.size() - 1);
  }
  LockLog& log_;
  std::string name_;
  std::unique_ptr<impl::Mutex> inner_;
  std::deque<std::size_t> open_;
};

std::unique_ptr<impl::Mutex> LockLog::make_mutex(const std::string& name) {
  return std::make_unique<LoggedMutex>(*this, name, inner_.make_mutex(name));
}

/// What one operation did.
struct Observed {
  Time called = 0;
  Time ended = 0;
  bool finished = false;
  CallOutcome outcome{};
  std::vector<std::optional<LLMStatusCode>> results{};
};

class DelayedSync final : public impl::LayerSynchronizer {
 public:
  DelayedSync(impl::Platform& p, Time delay) : platform_(p), delay_(delay) {}
  bool synchronize_layer(std::int64_t, std::optional<std::int64_t>) override {
    if (delay_ > 0) platform_.sleep(delay_);
    return true;
  }

 private:
  impl::Platform& platform_;
  Time delay_;
};

/// A cache and the shadow of its bytes.
struct Cache {
  impl::CacheView view;
  std::vector<std::vector<std::uint8_t>> shadow;  ///< per tensor
};

/// Where an address is: (cache, tensor, offset), found in a list of caches.
struct Place {
  Cache* cache = nullptr;
  std::size_t tensor = 0;
  std::uint64_t offset = 0;
};

std::optional<Place> place_of(std::vector<Cache*>& caches, std::uint64_t addr,
                              std::uint64_t tensor_bytes) {
  for (Cache* c : caches) {
    for (std::size_t t = 0; t < c->view.tensor_addrs.size(); ++t) {
      const std::uint64_t base = c->view.tensor_addrs[t];
      if (addr >= base && addr < base + tensor_bytes) return Place{c, t, addr - base};
    }
  }
  return std::nullopt;
}

std::string us(Time t, Time t0) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.6fus", static_cast<double>(t - t0) / static_cast<double>(kUs));
  return buf;
}

std::string show_outcome(const CallOutcome& o) {
  CallOutcome plain = o;
  plain.what.clear();
  return rc::toString(plain);
}

std::string show_results(const std::vector<std::optional<LLMStatusCode>>& r) {
  if (r.empty()) return "";
  std::string s = " results [";
  for (std::size_t i = 0; i < r.size(); ++i) s += (i ? ", " : "") + show_result(r[i]);
  return s + "]";
}

RC_GTEST_PROP(Concurrency, RunEqualsTheReferenceModelOfTheLockRules, ()) {
  const Program prog = *gen_program();
  const std::size_t n_ops = prog.ops.size();
  const int L = prog.layers;
  const auto R = static_cast<std::uint64_t>(prog.row_bytes);
  const engine_rules::Engine engine = engine_of(prog.init);
  RC_ASSERT(!engine.error);
  const bool v1 = !engine.v2;
  const bool remote = engine.remote;
  Harness h;
  LockLog log(h.platform());
  std::map<std::string, std::string> mode = prog.init.to_map();
  mode[impl::kOptionSyncKvCacheWaitTime] = std::to_string(kSyncTimeoutMs);
  if (prog.strict) mode[impl::kOptionKvsimStrict] = "1";
  if (v1) mode[impl::kOptionMemPoolConfig] = "{\"memory_size\": 8388608}";
  // Each engine a host process of its own seeing its device as device 0, every one listening at
  // its node's host address (v1 prompts must, hixl engines must, and decoders link to the prompt).
  auto make_dist = [&](LLMRole role, int cluster, int device) {
    auto dist = std::make_unique<impl::LLMDataDist>(log, h.world().directory(), role,
                                                    static_cast<std::uint64_t>(cluster));
    std::map<std::string, std::string> options = sim::engine_options(log, device, true);
    options.erase(impl::kOptionEnableCacheManager);
    options[impl::kOptionDeviceId] = "0";
    for (const auto& [k, v] : mode) options[k] = v;
    const int process = h.world().platform().add_process(
        {"c" + std::to_string(cluster), log.node_of(device), {device}});
    h.world().platform().run_as(process, [&] { dist->init(options); });
    return dist;
  };

  const impl::CacheDesc desc(2 * L, {kRows, prog.row_bytes}, impl::DataType::DT_INT8);
  const std::uint64_t tensor_bytes = desc.size();
  std::uint64_t seed = 100;
  auto make_cache = [&](impl::LLMDataDist& dist, int device, bool blocks,
                        std::optional<impl::BlocksCacheKey> key) {
    std::vector<std::vector<std::uint8_t>> shadow;
    if (v1) {
      impl::KvCacheManager& km = dist.kv_cache_manager();
      const impl::KvCache c =
          blocks ? km.allocate_blocks_cache(desc, key) : km.allocate_cache(desc);
      for (std::uint64_t addr : c.view().tensor_addrs) {
        shadow.push_back(pattern(tensor_bytes, seed++));
        h.write(addr, shadow.back());
      }
      return Cache{c.view(), std::move(shadow)};
    }
    std::vector<std::uint64_t> addrs;
    for (int t = 0; t < 2 * L; ++t) {
      shadow.push_back(pattern(tensor_bytes, seed++));
      // 2 MiB aligned like Harness::alloc, so that nothing else lies right after a tensor.
      const auto addr =
          h.recorder().allocate(device, impl::Placement::DEVICE, tensor_bytes, 2 << 20);
      RC_ASSERT(addr.has_value());
      h.write(*addr, shadow.back());
      addrs.push_back(*addr);
    }
    return Cache{blocks ? dist.cache_manager().register_blocks_cache(desc, addrs, key)
                        : dist.cache_manager().register_cache(desc, addrs),
                 std::move(shadow)};
  };
  auto p = make_dist(LLMRole::PROMPT, 1, 0);
  // The generation the rules predict: its manager answers, the other raises (hixl
  // v2/llm_datadist.py _check_is_cache_mgr_mode / _check_is_not_cache_mgr_mode).
  const auto managers = [&](impl::LLMDataDist& d) {
    RC_ASSERT(status_of([&] { (void)d.cache_manager(); }) ==
              engine_rules::manager_error(engine, true).value_or(LLMStatusCode::LLM_SUCCESS));
    RC_ASSERT(status_of([&] { (void)d.kv_cache_manager(); }) ==
              engine_rules::manager_error(engine, false).value_or(LLMStatusCode::LLM_SUCCESS));
  };
  managers(*p);
  Cache src = make_cache(*p, 0, false, std::nullopt);
  Cache src_blocks = make_cache(*p, 0, true, std::nullopt);
  Cache local = make_cache(*p, 0, false, std::nullopt);
  // Keyed so that decoders can push_blocks into it and pull_blocks from it by BlocksCacheKey.
  Cache local_blocks = make_cache(*p, 0, true, impl::BlocksCacheKey{1, 0});
  std::vector<std::unique_ptr<impl::LLMDataDist>> decoders;
  std::vector<Cache> dst;
  std::vector<Cache> dst_blocks;
  std::vector<Cache> dec_local;         ///< where the decoder's own pull_cache lands
  std::vector<Cache> dec_local_blocks;  ///< where the decoder's own pull_blocks lands
  for (int k = 0; k < prog.decoders; ++k) {
    const int cluster = 2 + k;
    decoders.push_back(make_dist(LLMRole::DECODER, cluster, device_of(cluster)));
    managers(*decoders.back());
    dst.push_back(make_cache(*decoders.back(), device_of(cluster), false, std::nullopt));
    dec_local.push_back(make_cache(*decoders.back(), device_of(cluster), false, std::nullopt));
    dec_local_blocks.push_back(
        make_cache(*decoders.back(), device_of(cluster), true, std::nullopt));
    // v1 refuses a BlocksCacheKey on a DECODER (kv_cache_manager.py allocate_blocks_cache).
    dst_blocks.push_back(make_cache(
        *decoders.back(), device_of(cluster), true,
        v1 ? std::nullopt
           : std::optional<impl::BlocksCacheKey>({static_cast<std::uint64_t>(cluster), 0})));
  }
  // The links before the program: v1's are made by the decoders (only a DECODER links), v2's by
  // the prompt; under hixl some decoders link to the prompt too.
  std::vector<std::pair<int, int>> linked_at_start;
  for (int k = 0; k < prog.decoders; ++k) {
    const int cluster = 2 + k;
    const auto link_from_decoder = [&] {
      impl::LLMDataDist& d = *decoders[static_cast<std::size_t>(k)];
      RC_ASSERT(d.link_clusters({h.cluster_info(1, 0, device_of(cluster))}).first ==
                LLMStatusCode::LLM_SUCCESS);
      linked_at_start.emplace_back(cluster, 1);
    };
    if (v1) {
      link_from_decoder();
      continue;
    }
    RC_ASSERT(h.link(*p, static_cast<std::uint64_t>(cluster), device_of(cluster)) ==
              LLMStatusCode::LLM_SUCCESS);
    linked_at_start.emplace_back(1, cluster);
    if (engine.hixl && prog.reverse[static_cast<std::size_t>(k)]) link_from_decoder();
  }
  h.recorder().batches.clear();
  log.holds.clear();
  const std::size_t diagnostics_before = h.world().directory().diagnostics().entries().size();
  const Time t0 = h.platform().now();
  auto call_time = [&](std::size_t i) {
    return t0 + static_cast<Time>(prog.ops[i].start_us) * kUs + i;
  };

  std::vector<Observed> seen(n_ops);
  for (std::size_t i = 0; i < n_ops; ++i) {
    h.platform().spawn("op", [&, i] {
      const Op& op = prog.ops[i];
      const auto cluster = static_cast<std::uint64_t>(op.cluster);
      const auto k = static_cast<std::size_t>(op.cluster - 2);
      const auto row = static_cast<std::int64_t>(op.row);
      const auto mine = static_cast<std::int64_t>(i);
      Observed& o = seen[i];
      h.platform().sleep(call_time(i) - t0);
      o.called = h.platform().now();
      // v1 calls go to the KvCacheManager; push_* to the CacheManager, which v1 refuses.
      auto cm = [&]() -> impl::CacheManager& { return p->cache_manager(); };
      auto transfer = [&](std::vector<impl::AnyTransferConfig>& configs,
                          std::shared_ptr<impl::LayerSynchronizer> sync) {
        return v1 ? p->kv_cache_manager().transfer_cache_async(impl::KvCache(src.view),
                                                               std::move(sync), configs)
                  : cm().transfer_cache_async(src.view, std::move(sync), configs);
      };
      auto pull_blocks = [&](const impl::PullBlocksKey& key, std::vector<std::int64_t> from) {
        if (v1) {
          p->kv_cache_manager().pull_blocks(key, impl::KvCache(local_blocks.view), from, {mine});
        } else {
          cm().pull_blocks(key, local_blocks.view, from, {mine});
        }
      };
      const impl::CacheKeyByIdAndIndex row_key(cluster, dst[k].view.cache_id, row);
      const impl::BlocksCacheKey blocks_key{cluster, 0};
      if (op.by_decoder) {
        impl::LLMDataDist& d = *decoders[k];
        const impl::CacheKeyByIdAndIndex my_row(1, local.view.cache_id, mine);
        const impl::BlocksCacheKey prompt_blocks{1, 0};
        switch (op.kind) {
          case OpKind::kTransfer: {
            std::vector<impl::AnyTransferConfig> configs;
            const impl::LayerRange all{0, L};
            for (int c = 0; c < (op.cluster2 != 0 ? 2 : 1); ++c) {
              if (remote) {
                configs.emplace_back(impl::TransferWithCacheKeyConfig(my_row, all, all, row));
              } else {
                std::vector<std::uint64_t> addrs;
                for (std::uint64_t a : local.view.tensor_addrs) addrs.push_back(a + i * R);
                configs.emplace_back(impl::TransferConfig(1, addrs, all, row));
              }
            }
            auto sync = std::make_shared<DelayedSync>(h.platform(),
                                                      static_cast<Time>(op.sync_delay_us) * kUs);
            o.outcome = outcome_of([&] {
              auto task = v1 ? d.kv_cache_manager().transfer_cache_async(impl::KvCache(dst[k].view),
                                                                         sync, configs)
                             : d.cache_manager().transfer_cache_async(dst[k].view, sync, configs);
              o.results = task.get_results();
            });
            break;
          }
          case OpKind::kPullBlocks:
            o.outcome = outcome_of([&] {
              const impl::CacheKeyByIdAndIndex prompt_row(1, src.view.cache_id, row);
              std::vector<std::int64_t> from;
              if (op.blocks_key) from = {row};
              const impl::PullBlocksKey key = op.blocks_key ? impl::PullBlocksKey(prompt_blocks)
                                                            : impl::PullBlocksKey(prompt_row);
              if (v1) {
                d.kv_cache_manager().pull_blocks(key, impl::KvCache(dec_local_blocks[k].view), from,
                                                 {mine});
              } else {
                d.cache_manager().pull_blocks(key, dec_local_blocks[k].view, from, {mine});
              }
            });
            break;
          case OpKind::kPushCache:
            o.outcome = outcome_of([&] { d.cache_manager().push_cache(my_row, dst[k].view, row); });
            break;
          case OpKind::kPushBlocks:
            o.outcome = outcome_of([&] {
              d.cache_manager().push_blocks(prompt_blocks, dst_blocks[k].view, {row}, {mine});
            });
            break;
          case OpKind::kPullCache:
            o.outcome = outcome_of([&] {
              const impl::CacheKeyByIdAndIndex prompt_row(1, src.view.cache_id, row);
              if (v1) {
                d.kv_cache_manager().pull_cache(prompt_row, impl::KvCache(dec_local[k].view), mine);
              } else {
                d.cache_manager().pull_cache(prompt_row, dec_local[k].view, mine);
              }
            });
            break;
          case OpKind::kLink:
            o.outcome =
                llm_outcome(d.link_clusters({h.cluster_info(1, 0, device_of(op.cluster))}).first);
            break;
          case OpKind::kUnlink:
            o.outcome = llm_outcome(
                d.unlink_clusters({h.cluster_info(1, 0, device_of(op.cluster))}, 3000, op.force)
                    .first);
            break;
        }
      } else {
        switch (op.kind) {
          case OpKind::kTransfer: {
            std::vector<impl::AnyTransferConfig> configs;
            for (const int c : {op.cluster, op.cluster2}) {
              if (c == 0) continue;
              const auto& d = dst[static_cast<std::size_t>(c - 2)].view;
              const impl::LayerRange all{0, L};
              if (remote) {
                configs.emplace_back(impl::TransferWithCacheKeyConfig(
                    impl::CacheKeyByIdAndIndex(static_cast<std::uint64_t>(c), d.cache_id, row), all,
                    all, mine));
              } else {
                std::vector<std::uint64_t> addrs;
                for (std::uint64_t a : d.tensor_addrs) addrs.push_back(a + op.row * R);
                configs.emplace_back(
                    impl::TransferConfig(static_cast<std::uint64_t>(c), addrs, all, mine));
              }
            }
            auto sync = std::make_shared<DelayedSync>(h.platform(),
                                                      static_cast<Time>(op.sync_delay_us) * kUs);
            o.outcome = outcome_of([&] {
              auto task = transfer(configs, sync);
              o.results = task.get_results();
            });
            break;
          }
          case OpKind::kPullCache:
            o.outcome = outcome_of([&] {
              if (v1) {
                p->kv_cache_manager().pull_cache(row_key, impl::KvCache(local.view), mine);
              } else {
                cm().pull_cache(row_key, local.view, mine);
              }
            });
            break;
          case OpKind::kPullBlocks:
            o.outcome = outcome_of([&] {
              if (op.blocks_key) {
                pull_blocks(blocks_key, {row});
              } else {
                pull_blocks(row_key, {});
              }
            });
            break;
          case OpKind::kPushCache:
            o.outcome = outcome_of([&] { cm().push_cache(row_key, src.view, mine); });
            break;
          case OpKind::kPushBlocks:
            o.outcome =
                outcome_of([&] { cm().push_blocks(blocks_key, src_blocks.view, {mine}, {row}); });
            break;
          case OpKind::kUnlink:
            o.outcome = llm_outcome(
                p->unlink_clusters({h.cluster_info(cluster, device_of(op.cluster))}, 3000, op.force)
                    .first);
            break;
          case OpKind::kLink:
            o.outcome = llm_outcome(h.link(*p, cluster, device_of(op.cluster)));
            break;
        }
      }
      o.ended = h.platform().now();
      o.finished = true;
    });
  }
  h.systemc().run_until_idle();
  for (std::size_t i = 0; i < n_ops; ++i) RC_ASSERT(seen[i].finished);
  RC_ASSERT(h.job_failures().empty());

  // Observed batches by operation: pulls write their own local row, the decoder's transfers and
  // pushes their own row of the prompt's local caches; the prompt's transfers and pushes read their
  // own prompt row.
  std::vector<Cache*> own_src = {&src, &src_blocks};
  std::vector<Cache*> own_dst = {&local, &local_blocks};
  for (auto& c : dec_local) own_dst.push_back(&c);
  for (auto& c : dec_local_blocks) own_dst.push_back(&c);
  std::vector<std::vector<const Batch*>> batches_of(n_ops);
  for (const Batch& b : h.recorder().batches) {
    RC_ASSERT(!b.descriptors.empty());
    std::optional<Place> at = place_of(own_dst, b.descriptors.front().dst_addr, tensor_bytes);
    if (!at) at = place_of(own_src, b.descriptors.front().src_addr, tensor_bytes);
    RC_ASSERT(at.has_value());
    const std::size_t op = at->offset / R;
    RC_ASSERT(op < n_ops);
    batches_of[op].push_back(&b);
  }

  concurrency::ProgramSpec spec;
  spec.layers = L;
  spec.strict = prog.strict;
  spec.remote_accessible = remote;
  spec.v1 = v1;
  spec.hixl = engine.hixl;
  spec.sync_timeout = impl::from_ms(kSyncTimeoutMs);
  spec.link_op_wait = 3000 * kUs;  // link_clusters' default and unlink_clusters' 3000 ms, as µs
  spec.linked_at_start = linked_at_start;
  for (std::size_t i = 0; i < n_ops; ++i) {
    const Op& op = prog.ops[i];
    concurrency::OpSpec s;
    s.kind = op.kind;
    const bool by_decoder = op.by_decoder;
    const int peer = by_decoder ? spec.prompt_cluster : op.cluster;
    s.clusters = {peer};
    if (op.kind == OpKind::kTransfer && op.cluster2 != 0) {
      s.clusters.push_back(by_decoder ? peer : op.cluster2);
    }
    s.call = call_time(i);
    s.sync_delay = static_cast<Time>(op.sync_delay_us) * kUs;
    s.force = op.force;
    if (by_decoder) s.issuer = op.cluster;
    spec.ops.push_back(s);
  }
  concurrency::Durations durations;
  durations.batch = [&](std::size_t op, std::size_t k) -> std::optional<concurrency::BatchService> {
    if (k >= batches_of[op].size() || !batches_of[op][k]->finished) return std::nullopt;
    const Batch& b = *batches_of[op][k];
    return concurrency::BatchService{*b.finished - b.posted, b.ok};
  };
  const auto device_of_cluster = [](int cluster) { return cluster == 1 ? 0 : device_of(cluster); };
  durations.round_trip = [&](int a, int b) {
    return log.round_trip(device_of_cluster(a), device_of_cluster(b));
  };

  // The observed run in the model's terms, for comparison.
  using HoldKey = std::tuple<std::string, Time, Time, Time>;
  std::vector<HoldKey> observed_holds;
  for (const ObservedHold& x : log.holds) {
    observed_holds.emplace_back(x.lock, x.requested, x.acquired, x.released);
  }
  std::sort(observed_holds.begin(), observed_holds.end());
  using DiagKey = std::tuple<int, Time, std::uint64_t>;
  const auto& all_diagnostics = h.world().directory().diagnostics().entries();
  std::vector<DiagKey> observed_diagnostics;
  for (std::size_t j = diagnostics_before; j < all_diagnostics.size(); ++j) {
    const impl::Diagnostic& d = all_diagnostics[j];
    observed_diagnostics.emplace_back(static_cast<int>(d.kind), d.time,
                                      d.peer_cluster_id.value_or(0));
  }
  std::sort(observed_diagnostics.begin(), observed_diagnostics.end());

  // The first difference between a prediction and the run, or "".
  auto difference = [&](const concurrency::Prediction& pr) -> std::string {
    std::ostringstream os;
    for (std::size_t i = 0; i < n_ops; ++i) {
      const concurrency::OpOutcome& want = pr.ops[i];
      const Observed& got = seen[i];
      const CallOutcome want_outcome = llm_outcome(want.raised);
      if (got.called != want.called || got.ended != want.ended || got.outcome != want_outcome ||
          got.results != want.results) {
        os << "[" << i << "] predicted " << us(want.called, t0) << "-" << us(want.ended, t0) << " "
           << show_outcome(want_outcome) << show_results(want.results) << ", observed "
           << us(got.called, t0) << "-" << us(got.ended, t0) << " " << show_outcome(got.outcome)
           << show_results(got.results);
        return os.str();
      }
    }
    if (pr.unobserved_batches > 0) {
      return std::to_string(pr.unobserved_batches) + " predicted batch(es) never posted";
    }
    for (std::size_t i = 0; i < n_ops; ++i) {
      std::size_t predicted = 0;
      for (const concurrency::BatchPost& b : pr.batches) {
        if (b.op != i) continue;
        ++predicted;
        if (b.index < batches_of[i].size() && batches_of[i][b.index]->posted != b.posted) {
          os << "[" << i << "] batch " << b.index << " predicted posted at " << us(b.posted, t0)
             << ", observed at " << us(batches_of[i][b.index]->posted, t0);
          return os.str();
        }
      }
      if (predicted != batches_of[i].size()) {
        os << "[" << i << "] posts " << batches_of[i].size() << " batch(es), predicted "
           << predicted;
        return os.str();
      }
    }
    std::vector<HoldKey> holds;
    for (const concurrency::LockHold& x : pr.holds) {
      holds.emplace_back(x.lock, x.requested, x.acquired, x.released);
    }
    std::sort(holds.begin(), holds.end());
    if (holds != observed_holds) return "the mutex holds differ";
    std::vector<DiagKey> diagnostics;
    for (const concurrency::DiagnosticEvent& d : pr.diagnostics) {
      diagnostics.emplace_back(static_cast<int>(d.kind), d.time, d.peer.value_or(0));
    }
    std::sort(diagnostics.begin(), diagnostics.end());
    if (diagnostics != observed_diagnostics) return "the diagnostics differ";
    return "";
  };

  const concurrency::SearchResult found = concurrency::search(
      spec, durations, [&](const concurrency::Prediction& pr) { return difference(pr).empty(); },
      4096);
  RC_CLASSIFY(found.runs > 1, "another order of simultaneous events");

  const concurrency::Prediction& shown = found.match ? *found.match : found.first;
  std::ostringstream report;
  report << (found.match ? "the matching prediction" : "the default prediction")
         << " (P) against the run (O), times from the first call:\n";
  for (std::size_t i = 0; i < n_ops; ++i) {
    const concurrency::OpOutcome& want = shown.ops[i];
    report << "  [" << i << "] " << to_string(prog.ops[i].kind) << " P " << us(want.called, t0)
           << "-" << us(want.ended, t0) << " " << show_outcome(llm_outcome(want.raised))
           << show_results(want.results) << "\n      O " << us(seen[i].called, t0) << "-"
           << us(seen[i].ended, t0) << " " << show_outcome(seen[i].outcome)
           << show_results(seen[i].results) << "\n";
    for (const concurrency::LockHold& x : shown.holds) {
      if (x.op != i) continue;
      report << "      P holds " << x.lock << ": asked " << us(x.requested, t0) << ", got "
             << us(x.acquired, t0) << ", released " << us(x.released, t0) << "\n";
    }
    for (const concurrency::BatchPost& b : shown.batches) {
      if (b.op != i) continue;
      report << "      P batch " << b.index << " (layer " << b.layer << ", cluster " << b.cluster
             << ") posted " << us(b.posted, t0) << ", done " << us(b.finished, t0)
             << (b.timed_out ? " (timed out)" : "") << "\n";
    }
    for (const concurrency::DiagnosticEvent& d : shown.diagnostics) {
      if (d.op == i) report << "      P diagnostic " << impl::to_string(d.kind) << "\n";
    }
  }
  report << "  completion order P:";
  for (std::size_t i : shown.completion_order()) report << " " << i;
  std::vector<std::size_t> observed_order(n_ops);
  std::iota(observed_order.begin(), observed_order.end(), std::size_t{0});
  std::stable_sort(observed_order.begin(), observed_order.end(),
                   [&](std::size_t a, std::size_t b) { return seen[a].ended < seen[b].ended; });
  report << ", O:";
  for (std::size_t i : observed_order) report << " " << i;
  report << "\n  observed holds:\n";
  for (const ObservedHold& x : log.holds) {
    report << "    " << x.lock << ": asked " << us(x.requested, t0) << ", got "
           << us(x.acquired, t0) << ", released " << us(x.released, t0) << "\n";
  }
  report << "  observed diagnostics:";
  for (std::size_t j = diagnostics_before; j < all_diagnostics.size(); ++j) {
    report << " " << impl::to_string(all_diagnostics[j].kind) << "@"
           << us(all_diagnostics[j].time, t0);
  }
  report << "\n  observed batches:\n";
  for (std::size_t i = 0; i < n_ops; ++i) {
    for (std::size_t k = 0; k < batches_of[i].size(); ++k) {
      const Batch& b = *batches_of[i][k];
      report << "    [" << i << "] batch " << k << ": posted " << us(b.posted, t0) << ", done "
             << (b.finished ? us(*b.finished, t0) : std::string("never"))
             << (b.ok ? "" : ", failed") << ", " << b.descriptors.size() << " descriptor(s)\n";
    }
  }
  RC_LOG() << report.str();
  if (!found.match) {
    const std::string why =
        ("no order of simultaneous events lets the rules give this run (" +
         std::to_string(found.runs) + " tried" + (found.exhausted ? "" : ", limit reached") +
         "); with the default order: " + difference(found.first));
    RC_FAIL(why);
  }
  const concurrency::Prediction& pr = *found.match;
  RC_CLASSIFY(std::any_of(pr.holds.begin(), pr.holds.end(),
                          [](const auto& x) { return x.acquired > x.requested; }),
              "some operation waited for a mutex");
  RC_CLASSIFY(std::any_of(pr.ops.begin(), pr.ops.end(),
                          [](const auto& o) { return o.raised == LLMStatusCode::LLM_LINK_BUSY; }),
              "strict mode raised LLM_LINK_BUSY");
  RC_CLASSIFY(
      std::any_of(pr.diagnostics.begin(), pr.diagnostics.end(),
                  [](const auto& d) { return d.kind == impl::DiagnosticKind::kLinkCallOverlap; }),
      "v1: a pull and a task overlapped on a link");
  RC_CLASSIFY(std::any_of(pr.ops.begin(), pr.ops.end(),
                          [](const auto& o) {
                            return o.raised == LLMStatusCode::LLM_NOT_YET_LINK ||
                                   std::count(o.results.begin(), o.results.end(),
                                              LLMStatusCode::LLM_NOT_YET_LINK) > 0;
                          }),
              "some operation found its link down");
  RC_CLASSIFY(
      std::any_of(
          pr.batches.begin(), pr.batches.end(),
          [&](const concurrency::BatchPost& read) {
            const Op& r = prog.ops[read.op];
            if ((r.kind != OpKind::kPullCache && r.kind != OpKind::kPullBlocks) ||
                spec.ops[read.op].issuer != 0) {
              return false;
            }
            const bool blocks = r.kind == OpKind::kPullBlocks && r.blocks_key;
            return std::any_of(pr.batches.begin(), pr.batches.end(), [&](const auto& write) {
              const Op& w = prog.ops[write.op];
              const bool writes_blocks = w.kind == OpKind::kPushBlocks;
              return spec.ops[write.op].issuer == 0 && w.row == r.row &&
                     write.cluster == read.cluster && write.finished <= read.posted &&
                     (writes_blocks == blocks) &&
                     (w.kind == OpKind::kTransfer || w.kind == OpKind::kPushCache || writes_blocks);
            });
          }),
      "a pull read what a transfer or push wrote");
  RC_CLASSIFY(std::any_of(pr.holds.begin(), pr.holds.end(),
                          [&](const auto& x) {
                            return spec.ops[x.op].issuer != 0 && x.acquired > x.requested;
                          }),
              "a decoder-side call waited for a mutex");
  RC_CLASSIFY(std::any_of(pr.batches.begin(), pr.batches.end(),
                          [&](const auto& b) {
                            return spec.ops[b.op].issuer != 0 &&
                                   prog.ops[b.op].kind != OpKind::kPullCache;
                          }),
              "a decoder sent by transfer, push or pull_blocks");
  RC_CLASSIFY(
      v1 &&
          [&] {
            for (std::size_t a = 0; a < n_ops; ++a) {
              for (std::size_t b = a + 1; b < n_ops; ++b) {
                const auto link_op = [&](std::size_t i) {
                  return prog.ops[i].kind == OpKind::kLink || prog.ops[i].kind == OpKind::kUnlink;
                };
                if (link_op(a) && link_op(b) && spec.ops[a].issuer == spec.ops[b].issuer &&
                    pr.ops[a].called < pr.ops[b].ended && pr.ops[b].called < pr.ops[a].ended) {
                  return true;
                }
              }
            }
            return false;
          }(),
      "v1: a link or unlink waited for another");
  RC_CLASSIFY(!prog.init.enable_cache_manager && !prog.init.local_comm_res,
              "v1 for want of llm.EnableCacheManager");
  RC_CLASSIFY(prog.init.local_comm_res && !prog.init.enable_cache_manager,
              "v2 by llm.LocalCommRes alone");
  RC_CLASSIFY(engine.hixl, "hixl backend");
  RC_CLASSIFY(std::any_of(spec.ops.begin(), spec.ops.end(),
                          [](const concurrency::OpSpec& o) {
                            return o.issuer != 0 &&
                                   (o.kind == OpKind::kLink || o.kind == OpKind::kUnlink);
                          }),
              "a decoder linked or unlinked");
  RC_CLASSIFY(
      engine.hixl &&
          [&] {
            for (std::size_t i = 0; i < n_ops; ++i) {
              if (spec.ops[i].issuer != 0 && prog.ops[i].kind != OpKind::kLink &&
                  prog.ops[i].kind != OpKind::kUnlink &&
                  pr.ops[i].raised == LLMStatusCode::LLM_NOT_YET_LINK) {
                return true;
              }
            }
            return false;
          }(),
      "hixl: a decoder's call found no link of its own");

  // Bytes: replay the predicted batches in completion order on the shadows. A timed-out batch
  // lands after its caller moved on, out of the lock order: bytes are then not predicted.
  const bool timed_out = std::any_of(pr.batches.begin(), pr.batches.end(),
                                     [](const concurrency::BatchPost& b) { return b.timed_out; });
  if (timed_out) return;
  std::vector<concurrency::BatchPost> order = pr.batches;
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.finished < b.finished; });
  auto copy_row = [&](Cache& from, std::size_t t, std::uint64_t from_row, Cache& to,
                      std::uint64_t to_row) {
    std::copy_n(from.shadow[t].begin() + static_cast<std::ptrdiff_t>(from_row * R), R,
                to.shadow[t].begin() + static_cast<std::ptrdiff_t>(to_row * R));
  };
  for (const concurrency::BatchPost& b : order) {
    if (!b.ok) continue;
    const Op& op = prog.ops[b.op];
    const bool by_decoder = spec.ops[b.op].issuer != 0;
    const auto k = static_cast<std::size_t>((by_decoder ? op.cluster : b.cluster) - 2);
    const auto row = static_cast<std::uint64_t>(op.row);
    for (std::size_t t = 0; t < static_cast<std::size_t>(2 * L); ++t) {
      const bool in_layer = b.layer < 0 || t / 2 == static_cast<std::size_t>(b.layer);
      if (!in_layer) continue;
      switch (op.kind) {
        case OpKind::kTransfer:
        case OpKind::kPushCache:
          if (by_decoder) {
            copy_row(dst[k], t, row, local, b.op);
          } else {
            copy_row(src, t, b.op, dst[k], row);
          }
          break;
        case OpKind::kPushBlocks:
          if (by_decoder) {
            copy_row(dst_blocks[k], t, row, local_blocks, b.op);
          } else {
            copy_row(src_blocks, t, b.op, dst_blocks[k], row);
          }
          break;
        case OpKind::kPullCache:
          if (by_decoder) {
            copy_row(src, t, row, dec_local[k], b.op);
          } else {
            copy_row(dst[k], t, row, local, b.op);
          }
          break;
        case OpKind::kPullBlocks:
          if (by_decoder) {
            copy_row(op.blocks_key ? local_blocks : src, t, row, dec_local_blocks[k], b.op);
          } else {
            copy_row(op.blocks_key ? dst_blocks[k] : dst[k], t, row, local_blocks, b.op);
          }
          break;
        case OpKind::kLink:
        case OpKind::kUnlink:
          break;
      }
    }
  }
  std::vector<Cache*> every = {&src, &src_blocks, &local, &local_blocks};
  std::vector<int> owner(every.size(), 1);
  for (int k = 0; k < prog.decoders; ++k) {
    const auto kk = static_cast<std::size_t>(k);
    for (Cache* c : {&dst[kk], &dst_blocks[kk], &dec_local[kk], &dec_local_blocks[kk]}) {
      every.push_back(c);
      owner.push_back(2 + k);
    }
  }
  for (std::size_t c = 0; c < every.size(); ++c) {
    for (std::size_t t = 0; t < every[c]->shadow.size(); ++t) {
      const auto actual = h.read(every[c]->view.tensor_addrs[t], tensor_bytes);
      if (actual != every[c]->shadow[t]) {
        std::size_t at = 0;
        while (actual[at] == every[c]->shadow[t][at]) ++at;
        const std::string why = "cache " + std::to_string(every[c]->view.cache_id) +
                                " of cluster " + std::to_string(owner[c]) + ", tensor " +
                                std::to_string(t) + ": byte " + std::to_string(at) + " (row " +
                                std::to_string(at / R) +
                                ") differs from the replay of the predicted batches";
        RC_FAIL(why);
      }
    }
  }
}

}  // namespace
}  // namespace kvsim::properties
