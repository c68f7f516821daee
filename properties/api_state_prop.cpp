// Property 4, the whole API as a state machine (spec §3, §4): rc::state commands over one prompt
// process (cluster 1, device 0) and two decoders (cluster 2 on device 8 over RoCE, cluster 3 on
// device 1 over HCCS), each a host process of its own listening at its host address:
// register/unregister (with CacheKeys and BlocksCacheKeys), allocate/deallocate with the deferred
// release of keyed caches, remove_cache_key, link/unlink between any two processes (at the
// address the server listens at or not, force or not), switch_role (with its init address, a new
// one, or none), transfer_cache_async with a gated synchronizer whose layers the commands release
// or fail one at a time (the interleavings), synchronize/get_results with timeouts, pull_cache (by
// id or by CacheKey, which a pull uses up), pull_blocks, push_cache/push_blocks, cache_manager /
// kv_cache_manager, and the init of a fifth engine with generated options, on DEVICE and HOST
// caches. Each case generates the generation options every process passes to init
// (llm.EnableCacheManager "1", "0" or absent, llm.LocalCommRes, llm.EnableRemoteCacheAccessible,
// llm.TransferBackend "hixl") and engine_rules.h predicts the engine: v1 (KvCacheManager: the
// decoders link and pull, the prompt transfers), v2 plain, v2 remote-accessible (pushes, a remote
// cache table read at the first access of a side, TransferConfig refused) or v2 hixl (a link is
// its client's alone); with or without llm.EnableSwitchRole, faithful or strict (kvsim.Strict=1:
// diagnostics are errors). The pure reference model (api_model.h) and the commands' rules predict
// every call's status or exception and the bytes of every live cache; both are checked after each
// command.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>
#include <rapidcheck/state.h>

#include <algorithm>
#include <set>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include "properties/api_model.h"
#include "properties/engine_rules.h"
#include "properties/prop_support.h"
#include "sim/engine_setup.h"

namespace kvsim::properties {
namespace {

using impl::LLMRole;
using Results = std::vector<std::optional<LLMStatusCode>>;
using api_model::cluster_of;
using api_model::device_of;
using api_model::kProcesses;
using api_model::Model;
using api_model::ModelCache;
using api_model::ModelConfig;
using api_model::ModelKey;
using api_model::ModelTask;
using api_model::next_covered;

const char* role_name(LLMRole r) {
  return r == LLMRole::PROMPT ? "PROMPT" : r == LLMRole::DECODER ? "DECODER" : "MIX";
}

/// The real world: the harness, the three processes, and what the model's handles stand for.
class GateSync;
struct Sut {
  Sut() = default;
  Sut(const Sut&) = delete;
  Sut& operator=(const Sut&) = delete;
  /// Fails the layer every task still waits on, so that no job outlives the world.
  ~Sut();
  Harness h;
  std::vector<std::unique_ptr<impl::LLMDataDist>> dists;
  std::vector<impl::CacheView> views;  ///< by handle
  std::vector<impl::CacheTask> tasks;
  std::vector<std::shared_ptr<GateSync>> gates;
  bool v1 = false;  ///< the model's generation: the calls below go to the KvCacheManager
  std::set<std::string> tagged;  ///< classification labels given so far
  impl::CacheManager& cm(int process) {
    return dists[static_cast<std::size_t>(process)]->cache_manager();
  }
  impl::KvCacheManager& kv(int process) {
    return dists[static_cast<std::size_t>(process)]->kv_cache_manager();
  }
  /// The calls both cache managers have, on the case's one.
  impl::CacheView allocate(int process, const impl::CacheDesc& desc, bool blocks,
                           const std::vector<impl::CacheKey>& keys,
                           std::optional<impl::BlocksCacheKey> blocks_key) {
    if (!v1) {
      return blocks ? cm(process).allocate_blocks_cache(desc, blocks_key)
                    : cm(process).allocate_cache(desc, keys);
    }
    return (blocks ? kv(process).allocate_blocks_cache(desc, blocks_key)
                   : kv(process).allocate_cache(desc, keys))
        .view();
  }
  void deallocate(int process, const impl::CacheView& v, bool blocks) {
    if (!v1) {
      blocks ? cm(process).deallocate_blocks_cache(v) : cm(process).deallocate_cache(v);
    } else {
      blocks ? kv(process).deallocate_blocks_cache(impl::KvCache(v))
             : kv(process).deallocate_cache(impl::KvCache(v));
    }
  }
  void remove_cache_key(int process, const impl::CacheKey& key) {
    v1 ? kv(process).remove_cache_key(key) : cm(process).remove_cache_key(key);
  }
  void pull_cache(int process, const impl::PullCacheKey& key, const impl::CacheView& local,
                  std::int64_t row) {
    v1 ? kv(process).pull_cache(key, impl::KvCache(local), row)
       : cm(process).pull_cache(key, local, row);
  }
  void pull_blocks(int process, const impl::PullBlocksKey& key, const impl::CacheView& local,
                   const std::vector<std::int64_t>& src, const std::vector<std::int64_t>& dst) {
    v1 ? kv(process).pull_blocks(key, impl::KvCache(local), src, dst)
       : cm(process).pull_blocks(key, local, src, dst);
  }
  impl::CacheTask transfer(const impl::CacheView& src,
                           std::shared_ptr<impl::LayerSynchronizer> sync,
                           std::vector<impl::AnyTransferConfig>& configs) {
    return v1 ? kv(0).transfer_cache_async(impl::KvCache(src), std::move(sync), configs)
              : cm(0).transfer_cache_async(src, std::move(sync), configs);
  }
};

/// A synchronizer whose layers the driver releases (True) or fails (False) one at a time.
class GateSync final : public impl::LayerSynchronizer {
 public:
  explicit GateSync(impl::Platform& p) : platform_(p) {}
  bool synchronize_layer(std::int64_t layer, std::optional<std::int64_t>) override {
    waiting = layer;
    gate_ = platform_.make_signal();
    const bool opened = gate_->wait_for(impl::kForever);
    waiting.reset();
    return opened && answer_;
  }
  /// Opens the waiting layer with `answer`.
  void open(bool answer) {
    answer_ = answer;
    if (gate_) gate_->set();
  }
  std::optional<std::int64_t> waiting{};

 private:
  impl::Platform& platform_;
  std::unique_ptr<impl::Signal> gate_{};
  bool answer_ = true;
};

Sut::~Sut() {
  try {
    for (auto& gate : gates) {
      gate->open(false);
      h.systemc().run_until_idle();
    }
  } catch (...) {  // a destructor must not throw; the case has failed already
  }
}

/// What a call should give: how it ends, and for get_results its list.
struct Expect {
  CallOutcome outcome{};
  std::optional<Results> results{};
};

CallOutcome param_invalid() {
  return llm_outcome(LLMStatusCode::LLM_PARAM_INVALID);
}

/// Checks that every live cache holds its model image, each task's gate waits where the model says,
/// and no job raised.
void check_world(const Model& m, Sut& s) {
  for (std::size_t i = 0; i < m.caches.size(); ++i) {
    const ModelCache& c = m.caches[i];
    if (!c.live) continue;
    for (std::size_t t = 0; t < c.tensors.size(); ++t) {
      if (s.h.read(s.views[i].tensor_addrs[t], m.tensor_bytes()) != c.tensors[t]) {
        RC_FAIL("cache #" + std::to_string(i) + " tensor " + std::to_string(t) +
                ": bytes differ from the model");
      }
    }
  }
  for (std::size_t i = 0; i < m.tasks.size(); ++i) {
    const ModelTask& t = m.tasks[i];
    RC_ASSERT(s.tasks[i].done() == t.done);
    if (!t.done) RC_ASSERT(s.gates[i]->waiting == std::optional<std::int64_t>(t.next_layer));
  }
  RC_ASSERT(s.h.job_failures().empty());
}

/// Base of every command: run() applies the model to a copy, makes the real call, and compares.
struct ApiCommand : rc::state::Command<Model, Sut> {
  /// The model's effect and the expected outcome.
  virtual Expect effect(Model& m) const = 0;
  /// The real call; fills `results` for get_results.
  virtual void call(const Model& before, Sut& s, Results& results) const = 0;
  /// A label for the case's classification when this call shows a rule worth counting, or "".
  virtual std::string tag(const Model&, const Expect&) const { return ""; }

  void apply(Model& m) const override { (void)effect(m); }
  void run(const Model& m, Sut& s) const override {
    Model after = m;
    const Expect e = effect(after);
    Results results;
    const CallOutcome got = outcome_of([&] { call(m, s, results); });
    s.h.systemc().run_until_idle();
    std::ostringstream text;
    show(text);
    std::string line = text.str();
    for (const auto& [from, to] :
         {std::pair<std::string, std::string>{"#new", "#" + std::to_string(m.caches.size())},
          {"task(new)", "task" + std::to_string(m.tasks.size())}}) {
      const auto at = line.find(from);
      if (at != std::string::npos) line.replace(at, from.size(), to);
    }
    RC_LOG() << "  " << line << ": expected " << rc::toString(e.outcome) << ", got "
             << rc::toString(got) << "\n";
    RC_ASSERT(got == e.outcome);
    if (e.results) RC_ASSERT(results == *e.results);
    check_world(after, s);
    const std::string label = tag(m, e);
    if (!label.empty() && s.tagged.insert(label).second) RC_TAG(label);
  }
};

/// A random CacheKey of `process`: mostly exactly one of req_id/prefix_id valid.
ModelKey gen_key(int process) {
  ModelKey k;
  k.cluster_process = process;
  const int shape = *rc::gen::weightedElement<int>({{4, 0}, {2, 1}, {1, 2}, {1, 3}});
  if (shape == 0 || shape == 2) k.req = *rc::gen::inRange(0, 3);
  if (shape == 1 || shape == 2) k.prefix = *rc::gen::inRange(0, 2);
  return k;
}

/// A key of `process`: mostly (3 in 4) one that some row carries or carried, when there is one.
ModelKey pick_key(const Model& m, int process) {
  std::vector<ModelKey> known;
  for (const ModelCache& c : m.caches) {
    if (c.process != process || !(c.live || c.pending)) continue;
    for (const auto& k : c.row_keys) {
      if (k) known.push_back(*k);
    }
  }
  for (const ModelKey& k : m.used_keys) {
    if (k.cluster_process == process) known.push_back(k);
  }
  if (!known.empty() && *rc::gen::weightedElement<bool>({{3, true}, {1, false}})) {
    return *rc::gen::elementOf(known);
  }
  return gen_key(process);
}

/// A key for `puller` to pull: mostly (4 in 5) one that a row of a process it is linked to carries
/// or carried.
ModelKey pick_pull_key(const Model& m, int puller) {
  std::vector<ModelKey> known = m.used_keys;
  for (const ModelCache& c : m.caches) {
    if (!(c.live || c.pending)) continue;
    for (const auto& k : c.row_keys) {
      if (k) known.push_back(*k);
    }
  }
  const auto unlinked = [&](const ModelKey& k) {
    return k.cluster_process == puller || !m.linked[puller][k.cluster_process];
  };
  known.erase(std::remove_if(known.begin(), known.end(), unlinked), known.end());
  // A key pulled already, in 1 case of 3: it must be gone.
  std::vector<ModelKey> used = m.used_keys;
  used.erase(std::remove_if(used.begin(), used.end(), unlinked), used.end());
  if (!used.empty() && *rc::gen::weightedElement<bool>({{1, true}, {2, false}})) {
    return *rc::gen::elementOf(used);
  }
  if (!known.empty() && *rc::gen::weightedElement<bool>({{4, true}, {1, false}})) {
    return *rc::gen::elementOf(known);
  }
  return pick_key(m, (puller + *rc::gen::inRange(1, kProcesses)) % kProcesses);
}

/// cache_keys of a new contiguous cache of `process`: none, or one per row (one too many in 1 case
/// of 10); placeholders (both ids invalid) keep a row keyless.
std::vector<ModelKey> gen_row_keys(const Model& m, int process) {
  // v1 pulls by key from a PROMPT's allocations only: key them 3 times in 4 there.
  const bool keyed_prompt = m.v1 && m.role[process] == LLMRole::PROMPT;
  if (*rc::gen::weightedElement<bool>(
          {{keyed_prompt ? 1 : 2, true}, {keyed_prompt ? 3 : 2, false}})) {
    return {};
  }
  const int n = *rc::gen::weightedOneOf<int>(
      {{9, rc::gen::inRange(1, m.rows + 1)}, {1, rc::gen::just(m.rows + 1)}});
  std::vector<ModelKey> keys;
  for (int i = 0; i < n; ++i) {
    keys.push_back(*rc::gen::arbitrary<bool>() ? gen_key(process) : pick_key(m, process));
  }
  return keys;
}

/// The rows' keys of a new cache, or the expected failure: too many keys (LLM_PARAM_INVALID) or a
/// key in use on the process or twice in the list (LLM_CACHE_KEY_ALREADY_EXIST, a C++-only code
/// that Python reports as LLM_FAILED).
std::optional<CallOutcome> row_keys_of(const Model& m, int process,
                                       const std::vector<ModelKey>& keys,
                                       std::vector<std::optional<ModelKey>>& out) {
  if (static_cast<int>(keys.size()) > m.rows) return param_invalid();
  for (const ModelKey& k : keys) {
    if (k.placeholder()) {
      out.emplace_back();
      continue;
    }
    if (std::find(out.begin(), out.end(), std::optional<ModelKey>(k)) != out.end() ||
        m.find_key(process, k)) {
      return llm_outcome(LLMStatusCode::LLM_FAILED);
    }
    out.emplace_back(k);
  }
  return std::nullopt;
}

std::vector<impl::CacheKey> real_keys(const std::vector<ModelKey>& keys) {
  std::vector<impl::CacheKey> out;
  for (const ModelKey& k : keys) out.push_back(k.real());
  return out;
}

void show_keys(const std::vector<ModelKey>& keys, std::ostream& os) {
  os << "[";
  for (std::size_t i = 0; i < keys.size(); ++i) {
    os << (i ? ", " : "");
    showValue(keys[i], os);
  }
  os << "]";
}

/// HOST in 1 case of 5.
bool gen_host() {
  return *rc::gen::weightedElement<bool>({{4, false}, {1, true}});
}

impl::CacheDesc desc_of(const Model& m, bool host) {
  return impl::CacheDesc(m.tensors(), {m.rows, m.width}, impl::DataType::DT_INT8,
                         host ? impl::Placement::HOST : impl::Placement::DEVICE);
}

/// `size` bytes of memory for a cache of `process`, 2 MiB aligned: its device's HBM or its node's
/// host memory.
std::uint64_t alloc(Sut& s, int process, bool host, std::uint64_t size) {
  if (!host) return s.h.alloc(device_of(process), size, 0);
  const auto addr =
      s.h.recorder().allocate(device_of(process), impl::Placement::HOST, size, 2ull << 20);
  if (!addr) throw std::runtime_error("out of host memory");
  return *addr;
}

struct RegisterCache : ApiCommand {
  int process;
  bool blocks;
  std::optional<int> key;
  std::vector<ModelKey> keys;  ///< cache_keys (contiguous caches)
  bool unaligned;              ///< addresses 64 B past a 2 MiB boundary (§4: HCCS needs 2 MiB)
  bool host;
  explicit RegisterCache(const Model& m)
      : process(*rc::gen::weightedElement<int>({{2, 0}, {1, 1}, {1, 2}})),
        blocks(*rc::gen::arbitrary<bool>()),
        key(blocks && *rc::gen::arbitrary<bool>() ? std::optional<int>(*rc::gen::inRange(0, 2))
                                                  : std::nullopt),
        keys(blocks ? std::vector<ModelKey>{} : gen_row_keys(m, process)),
        unaligned(*rc::gen::weightedElement<bool>({{7, false}, {1, true}})),
        host(gen_host()) {
    RC_PRE(!m.v1);  // v1 caches come from the pool only
  }
  void checkPreconditions(const Model& m) const override { RC_PRE(!m.v1); }
  Expect effect(Model& m) const override {
    std::vector<std::optional<ModelKey>> rows;
    if (const auto failed = row_keys_of(m, process, keys, rows)) return {*failed};
    if (key) {
      for (const ModelCache& c : m.caches) {
        if (c.live && c.process == process && c.blocks_key == key) {
          return {llm_outcome(LLMStatusCode::LLM_FAILED)};  // LLM_CACHE_KEY_ALREADY_EXIST
        }
      }
    }
    if (unaligned && m.strict && !host) return {param_invalid()};  // kUnalignedRegistration
    ModelCache c = m.fresh(process, blocks, false, host);
    c.blocks_key = key;
    c.row_keys = std::move(rows);
    m.caches.push_back(std::move(c));
    return {};
  }
  void call(const Model& m, Sut& s, Results&) const override {
    const int handle = static_cast<int>(m.caches.size());
    const impl::CacheDesc desc = desc_of(m, host);
    const std::uint64_t skew = unaligned ? 64 : 0;
    std::vector<std::uint64_t> addrs;
    for (int t = 0; t < m.tensors(); ++t) {
      const std::uint64_t base = alloc(s, process, host, m.tensor_bytes() + skew);
      s.h.write(base + skew, pattern(m.tensor_bytes(), Model::seed(handle, t)));
      addrs.push_back(base + skew);
    }
    impl::CacheView v = blocks
                            ? s.cm(process).register_blocks_cache(
                                  desc, addrs,
                                  key ? std::optional<impl::BlocksCacheKey>(impl::BlocksCacheKey{
                                            cluster_of(process), static_cast<std::uint64_t>(*key)})
                                      : std::nullopt)
                            : s.cm(process).register_cache(desc, addrs, real_keys(keys));
    s.views.push_back(std::move(v));
  }
  void show(std::ostream& os) const override {
    os << "#new = c" << cluster_of(process) << "."
       << (blocks ? "register_blocks_cache" : "register_cache") << "(";
    if (key) os << "BlocksCacheKey(" << cluster_of(process) << ", " << *key << ")";
    if (!keys.empty()) show_keys(keys, os);
    os << (unaligned ? ", addrs 2 MiB + 64" : "") << (host ? ", HOST" : "") << ")";
  }
};

struct AllocateCache : ApiCommand {
  int process;
  bool blocks;
  std::vector<ModelKey> keys;
  std::optional<int> key;  ///< blocks: model_id of its BlocksCacheKey(own cluster, model_id)
  bool host;
  explicit AllocateCache(const Model& m)
      : process(*rc::gen::weightedElement<int>({{m.v1 ? 1 : 2, 0}, {1, 1}, {1, 2}})),
        blocks(*rc::gen::arbitrary<bool>()),
        // v1 refuses cache_keys on other roles than PROMPT: ask for them there 1 time in 4.
        keys(blocks || (m.v1 && m.role[process] != LLMRole::PROMPT &&
                        *rc::gen::weightedElement<bool>({{1, false}, {1, true}}))
                 ? std::vector<ModelKey>{}
                 : gen_row_keys(m, process)),
        key(blocks && *rc::gen::weightedElement<bool>({{1, true}, {3, false}})
                ? std::optional<int>(*rc::gen::inRange(0, 2))
                : std::nullopt),
        host(gen_host()) {}
  Expect effect(Model& m) const override {
    if (m.v1) {
      // hicann/ge kv_cache_manager.py allocate_cache: cache_keys only on a PROMPT;
      // allocate_blocks_cache: no blocks_cache_key on a DECODER (checked before anything).
      if (!keys.empty() && m.role[process] != LLMRole::PROMPT) return {param_invalid()};
      if (key && m.role[process] == LLMRole::DECODER) return {param_invalid()};
    }
    if (!m.has_pool(process)) return {llm_outcome(LLMStatusCode::LLM_FEATURE_NOT_ENABLED)};
    std::vector<std::optional<ModelKey>> rows;
    if (const auto failed = row_keys_of(m, process, keys, rows)) return {*failed};
    if (key) {
      for (const ModelCache& c : m.caches) {
        if ((c.live || c.pending) && c.process == process && c.blocks_key == key) {
          return {llm_outcome(LLMStatusCode::LLM_FAILED)};  // LLM_CACHE_KEY_ALREADY_EXIST
        }
      }
    }
    ModelCache c = m.fresh(process, blocks, true, host);
    c.row_keys = std::move(rows);
    c.blocks_key = key;
    m.caches.push_back(std::move(c));
    return {};
  }
  void call(const Model& m, Sut& s, Results&) const override {
    const int handle = static_cast<int>(m.caches.size());
    const impl::CacheDesc desc = desc_of(m, host);
    impl::CacheView v = s.allocate(process, desc, blocks, real_keys(keys),
                                   key ? std::optional<impl::BlocksCacheKey>(impl::BlocksCacheKey{
                                             cluster_of(process), static_cast<std::uint64_t>(*key)})
                                       : std::nullopt);
    for (int t = 0; t < m.tensors(); ++t) {
      s.h.write(v.tensor_addrs[static_cast<std::size_t>(t)],
                pattern(m.tensor_bytes(), Model::seed(handle, t)));
    }
    s.views.push_back(std::move(v));
  }
  void show(std::ostream& os) const override {
    os << "#new = c" << cluster_of(process) << "."
       << (blocks ? "allocate_blocks_cache" : "allocate_cache") << "(";
    if (key) os << "BlocksCacheKey(" << cluster_of(process) << ", " << *key << ")";
    if (!keys.empty()) show_keys(keys, os);
    os << (host ? ", HOST" : "") << ")";
  }
};

/// Whether `handle` names a cache of the prompt (`prompt`) or of a decoder: re-checked when a
/// shrunk sequence has renumbered the caches.
bool on(const Model& m, int handle, bool prompt) {
  return m.has(handle) && (m.caches[static_cast<std::size_t>(handle)].process == 0) == prompt;
}

/// Whether `handle` names a cache of `process` (a function: RC_PRE's expression capture does not
/// short-circuit a top-level &&).
bool owned_by(const Model& m, int handle, int process) {
  return m.has(handle) && m.caches[static_cast<std::size_t>(handle)].process == process;
}

/// Picks the handle of a cache made so far (live or not) satisfying `ok`, if any.
int pick_cache(const Model& m, const std::function<bool(const ModelCache&)>& ok) {
  std::vector<int> handles;
  for (std::size_t i = 0; i < m.caches.size(); ++i) {
    if (ok(m.caches[i])) handles.push_back(static_cast<int>(i));
  }
  RC_PRE(!handles.empty());
  return *rc::gen::elementOf(handles);
}

/// Mostly (4 in 5) a cache satisfying `preferred` too, when there is one.
int pick_cache(const Model& m, const std::function<bool(const ModelCache&)>& ok,
               const std::function<bool(const ModelCache&)>& preferred) {
  const bool any = std::any_of(m.caches.begin(), m.caches.end(),
                               [&](const ModelCache& c) { return ok(c) && preferred(c); });
  if (any && *rc::gen::weightedElement<bool>({{4, true}, {1, false}})) {
    return pick_cache(m, [&](const ModelCache& c) { return ok(c) && preferred(c); });
  }
  return pick_cache(m, ok);
}

/// A cache of another process for `puller` to pull from by id: mostly a live contiguous one of a
/// process it is linked to.
int pick_pull_source(const Model& m, int puller) {
  return pick_cache(
      m, [puller](const ModelCache& c) { return c.process != puller; },
      [&m, puller](const ModelCache& c) {
        return c.live && !c.blocks && m.linked[puller][c.process];
      });
}

/// Keeps 1 pull or push in 4 while `process` holds no link (they would all be LLM_NOT_YET_LINK).
void mostly_linked(const Model& m, int process) {
  RC_PRE(m.any_link(process) || *rc::gen::weightedElement<bool>({{1, true}, {3, false}}));
}

/// Keeps 1 pull in 4 while `puller` has no live cache of the kind (contiguous or blocks) the pull
/// lands in (they would all be refused before anything moves).
void mostly_has_local(const Model& m, int puller, bool blocks) {
  const bool has = std::any_of(m.caches.begin(), m.caches.end(), [&](const ModelCache& c) {
    return c.process == puller && c.live && c.blocks == blocks;
  });
  RC_PRE(has || *rc::gen::weightedElement<bool>({{1, true}, {3, false}}));
}

/// The process that pulls: the prompt in v2 (whose decoders have no pool to reuse in
/// remote-accessible mode, so every cache the prompt reads stays where the model has it); in v1,
/// where only a DECODER may pull, mostly (6 in 7) a process whose role is DECODER.
int gen_puller(const Model& m) {
  if (!m.v1) return 0;
  std::vector<int> decoders;
  for (int p = 0; p < kProcesses; ++p) {
    if (m.role[p] == LLMRole::DECODER) decoders.push_back(p);
  }
  if (!decoders.empty() && *rc::gen::weightedElement<bool>({{6, true}, {1, false}})) {
    return *rc::gen::elementOf(decoders);
  }
  return *rc::gen::inRange(0, kProcesses);
}

/// A row or block index, past the end in 1 case of 10.
int gen_index(const Model& m) {
  return *rc::gen::weightedOneOf<int>(
      {{9, rc::gen::inRange(0, m.rows)}, {1, rc::gen::just(m.rows)}});
}

struct UnregisterCache : ApiCommand {
  int handle;
  explicit UnregisterCache(const Model& m)
      : handle(pick_cache(m, [](const ModelCache&) { return true; })) {
    RC_PRE(!m.v1);
  }
  void checkPreconditions(const Model& m) const override { RC_PRE(m.has(handle)); }
  Expect effect(Model& m) const override {
    ModelCache& c = m.caches[static_cast<std::size_t>(handle)];
    // hixl data_cache_engine.cc DataCacheEngine::Unregister: an unknown id (never registered, or
    // unregistered already) only logs a warning (kUnregisterUnknownCache; strict: the error).
    if (!c.live || c.allocated) {
      if (m.strict) return {llm_outcome(LLMStatusCode::LLM_KV_CACHE_NOT_EXIST)};
      return {};
    }
    // Nothing checks links; the docs require unlink first (kUnregisterWhileLinked; strict: the
    // LLM_FAILED HCCL gives on hardware, and the cache stays).
    if (c.remote_accessible && m.any_link(c.process) && m.strict) {
      return {llm_outcome(LLMStatusCode::LLM_FAILED)};
    }
    c.live = false;
    return {};
  }
  void call(const Model& m, Sut& s, Results&) const override {
    s.cm(m.caches[static_cast<std::size_t>(handle)].process)
        .unregister_cache(s.views[static_cast<std::size_t>(handle)].cache_id);
  }
  void show(std::ostream& os) const override { os << "unregister_cache(#" << handle << ")"; }
};

struct DeallocateCache : ApiCommand {
  int handle;
  explicit DeallocateCache(const Model& m)
      : handle(pick_cache(
            m, [](const ModelCache&) { return true; },
            [](const ModelCache& c) { return c.allocated; })) {}
  void checkPreconditions(const Model& m) const override {
    RC_PRE(m.has(handle));
    for (const ModelTask& t : m.tasks) {
      for (const ModelConfig& c : t.configs) RC_PRE(t.done || c.dst != handle);
    }
  }
  Expect effect(Model& m) const override {
    ModelCache& c = m.caches[static_cast<std::size_t>(handle)];
    if (!c.live) return {};  // a missing (or pending) cache is a no-op (§4)
    if (!c.allocated) return {param_invalid()};
    c.live = false;
    c.pending = !c.blocks && c.has_keys();  // §4: release deferred until the keys go
    return {};
  }
  void call(const Model& m, Sut& s, Results&) const override {
    const impl::CacheView& v = s.views[static_cast<std::size_t>(handle)];
    const ModelCache& c = m.caches[static_cast<std::size_t>(handle)];
    s.deallocate(c.process, v, c.blocks);
  }
  void show(std::ostream& os) const override { os << "deallocate(#" << handle << ")"; }
};

/// remove_cache_key on any process: a missing key is a no-op; a pending cache goes with its last.
struct RemoveCacheKey : ApiCommand {
  int process;
  ModelKey key;
  explicit RemoveCacheKey(const Model& m)
      : process(*rc::gen::inRange(0, kProcesses)), key(pick_key(m, process)) {}
  Expect effect(Model& m) const override {
    // hicann/ge kv_cache_manager.py remove_cache_key: _check_role(PROMPT).
    if (m.v1 && m.role[process] != LLMRole::PROMPT) return {param_invalid()};
    m.remove_key(process, key);
    return {};
  }
  void call(const Model&, Sut& s, Results&) const override {
    s.remove_cache_key(process, key.real());
  }
  void show(std::ostream& os) const override {
    os << "c" << cluster_of(process) << ".remove_cache_key(";
    showValue(key, os);
    os << ")";
  }
};

/// The port `process` listens on at `a`: 26000 + device at init (sim::listen_port), 27000 + device
/// once moved.
int port_of(int process, api_model::Address a) {
  return a == api_model::Address::kInit ? sim::listen_port(device_of(process))
                                        : 27000 + device_of(process);
}

/// `process`'s host address with the port of `a`, as llm.listenIpInfo takes it.
std::string listen_text(Sut& s, int process, api_model::Address a) {
  const impl::Platform& p = s.h.platform();
  return p.host_ip(p.node_of(device_of(process))) + ":" + std::to_string(port_of(process, a));
}

/// The LLMClusterInfo `client` names `server` by: its cluster id, the client's host as
/// local_ip_info, and the server's address `a` as remote_ip_info.
impl::LLMClusterInfo info_to(Sut& s, int client, int server, api_model::Address a) {
  const impl::Platform& p = s.h.platform();
  impl::LLMClusterInfo info;
  info.set_remote_cluster_id(cluster_of(server));
  info.append_local_ip_info(p.host_ip(p.node_of(device_of(client))), 0);
  info.append_remote_ip_info(p.host_ip(p.node_of(device_of(server))), port_of(server, a));
  return info;
}

const char* address_name(api_model::Address a) {
  return a == api_model::Address::kInit ? "init address" : "moved address";
}

/// A caller and a peer for link_clusters / unlink_clusters: mostly the prompt and a decoder (the
/// caller mostly the one the generation lets link: a decoder in v1, the prompt in v2), in 1 case
/// of 6 two decoders; and the peer's address it names: the one it listens at, mostly.
struct LinkEnds {
  int client = 0;
  int server = 1;
  api_model::Address address = api_model::Address::kInit;
};

LinkEnds gen_link_ends(const Model& m) {
  LinkEnds e;
  const int decoder = *rc::gen::inRange(1, kProcesses);
  const int shape = *rc::gen::weightedElement<int>({{5, 0}, {1, 1}});
  if (shape == 1) {
    e.client = decoder;
    e.server = 3 - decoder;
  } else if (*rc::gen::weightedElement<bool>({{m.v1 ? 1 : 2, true}, {m.v1 ? 2 : 1, false}})) {
    e.client = 0;
    e.server = decoder;
  } else {
    e.client = decoder;
    e.server = 0;
  }
  const auto& now = m.listening[e.server];
  const api_model::Address other =
      now == api_model::Address::kMoved ? api_model::Address::kInit : api_model::Address::kMoved;
  e.address = *rc::gen::weightedElement<api_model::Address>(
      {{5, now.value_or(api_model::Address::kInit)}, {1, other}});
  return e;
}

/// link_clusters(from client to server at one of its addresses, timeout 200 ms).
struct Link : ApiCommand {
  LinkEnds ends;
  explicit Link(const Model& m) : ends(gen_link_ends(m)) {
    // Mostly register first (§4: register before linking, or caches are not remote accessible).
    RC_PRE(m.caches.size() >= 4 || *rc::gen::weightedElement<bool>({{1, true}, {3, false}}));
  }
  Expect effect(Model& m) const override {
    // hicann/ge v1 llm_datadist.cc Impl::LinkClusters: only a DECODER links.
    if (m.v1 && m.role[ends.client] != LLMRole::DECODER) return {param_invalid()};
    // The caller's own entity: LinkMsgHandler::ExchangeInfoProcess refuses a second one.
    if (m.linked[ends.client][ends.server]) {
      return {llm_outcome(LLMStatusCode::LLM_ALREADY_LINK)};
    }
    // MsgHandlerPlugin::Connect finds nobody listening there: LLM_LINK_FAILED.
    if (m.listening[ends.server] != ends.address) {
      return {llm_outcome(LLMStatusCode::LLM_LINK_FAILED)};
    }
    m.connect(ends.client, ends.server);
    return {};
  }
  void call(const Model&, Sut& s, Results&) const override {
    const LLMStatusCode code =
        s.dists[static_cast<std::size_t>(ends.client)]
            ->link_clusters({info_to(s, ends.client, ends.server, ends.address)}, 200)
            .first;
    if (code != LLMStatusCode::LLM_SUCCESS) throw impl::LLMException(code, "link", "");
  }
  std::string tag(const Model& m, const Expect& e) const override {
    if (e.outcome.code == LLMStatusCode::LLM_LINK_FAILED && m.listening[ends.server]) {
      return "link to an address its server left failed";
    }
    if (e.outcome.kind == CallOutcome::Kind::kOk && m.hixl && m.linked[ends.server][ends.client]) {
      return "hixl: both directions linked";
    }
    return "";
  }
  void show(std::ostream& os) const override {
    os << "c" << cluster_of(ends.client) << ".link_clusters([c" << cluster_of(ends.server) << " at "
       << address_name(ends.address) << "])";
  }
};

/// unlink_clusters(client's link to server named at one of its addresses, force or not).
struct Unlink : ApiCommand {
  LinkEnds ends;
  bool force;
  explicit Unlink(const Model& m)
      : ends(gen_link_ends(m)), force(*rc::gen::weightedElement<bool>({{3, false}, {1, true}})) {
    RC_PRE(*rc::gen::weightedElement<bool>(
        {{1, true}, {m.linked[ends.client][ends.server] ? 1 : 3, false}}));
  }
  Expect effect(Model& m) const override {
    const int a = ends.client;
    const int b = ends.server;
    if (m.v1) {
      // hicann/ge v1: NOT_YET_LINK without a link; without force the peer is told and drops its
      // side.
      if (!m.linked[a][b]) return {llm_outcome(LLMStatusCode::LLM_NOT_YET_LINK)};
      m.linked[a][b] = false;
      if (!force) m.linked[b][a] = false;
      return {};
    }
    // hixl link_msg_handler.cc LinkMsgHandler::UnlinkCluster: without force, connect to the
    // server at remote_ip_info first (LLM_UNLINK_FAILED if nobody listens there: this side stays)
    // and send kDisconnect (it destroys its entity for us); then destroy our entity, which
    // succeeds if there is none. HixlTransferEngine::UnlinkClusters ignores force and only
    // destroys the caller's entity.
    if (!force && !m.hixl) {
      if (m.listening[b] != ends.address) {
        return {llm_outcome(LLMStatusCode::LLM_UNLINK_FAILED)};
      }
      m.linked[b][a] = false;
    }
    m.linked[a][b] = false;
    return {};
  }
  void call(const Model&, Sut& s, Results&) const override {
    const LLMStatusCode code =
        s.dists[static_cast<std::size_t>(ends.client)]
            ->unlink_clusters({info_to(s, ends.client, ends.server, ends.address)}, 3000, force)
            .first;
    if (code != LLMStatusCode::LLM_SUCCESS) throw impl::LLMException(code, "unlink", "");
  }
  std::string tag(const Model&, const Expect& e) const override {
    return e.outcome.code == LLMStatusCode::LLM_UNLINK_FAILED ? "unlink found no server listening"
                                                              : "";
  }
  void show(std::ostream& os) const override {
    os << "c" << cluster_of(ends.client) << ".unlink_clusters([c" << cluster_of(ends.server)
       << " at " << address_name(ends.address) << "]" << (force ? ", force=True" : "") << ")";
  }
};

/// switch_role(role, {} or {llm.listenIpInfo: one of its own addresses}).
struct SwitchRole : ApiCommand {
  int process;
  LLMRole role;
  std::optional<api_model::Address> listen;
  explicit SwitchRole(const Model& m)
      : process(*rc::gen::inRange(0, kProcesses)),
        // Half the time the process's first role (so that roles come back as often as they go).
        role(*rc::gen::weightedOneOf<LLMRole>(
            {{1, rc::gen::just(process == 0 ? LLMRole::PROMPT : LLMRole::DECODER)},
             {1, rc::gen::element(LLMRole::PROMPT, LLMRole::DECODER, LLMRole::MIX)}})),
        listen(*rc::gen::weightedElement<std::optional<api_model::Address>>(
            {{2, std::nullopt}, {1, api_model::Address::kInit}, {1, api_model::Address::kMoved}})) {
    // v1's roles decide who may link, transfer and pull: keep 1 switch in 3 there.
    RC_PRE(!m.v1 || *rc::gen::weightedElement<bool>({{1, true}, {2, false}}));
  }
  Expect effect(Model& m) const override {
    if (m.v1) {
      // hicann/ge llm_datadist_v1/llm_datadist.py switch_role: the same role, or PROMPT without
      // llm.listenIpInfo, is refused; v1 llm_datadist.cc Impl::SwitchRole needs
      // llm.EnableSwitchRole.
      if (role == m.role[process]) return {param_invalid()};
      if (role == LLMRole::PROMPT && !listen) return {param_invalid()};
      if (!m.switch_role_option) return {llm_outcome(LLMStatusCode::LLM_FEATURE_NOT_ENABLED)};
    } else if (m.hixl) {
      // hixl_transfer_engine.cc HixlTransferEngine::SwitchRole: a listen address other than
      // init's is LLM_FEATURE_NOT_ENABLED; no link check; the listener stays.
      if (listen && *listen != api_model::Address::kInit) {
        return {llm_outcome(LLMStatusCode::LLM_FEATURE_NOT_ENABLED)};
      }
      m.role[process] = role;
      return {};
    }
    // llm_link_manager.cc LLMLinkManager::SwitchRole (llm.EnableSwitchRole is not read in v2):
    // LLM_EXIST_LINK while the process holds any entity, its own link or a server side; then
    // it listens at the given address (a daemon on the same port stays), or stops listening.
    if (m.any_link(process)) return {llm_outcome(LLMStatusCode::LLM_EXIST_LINK)};
    m.listening[process] = listen;
    m.role[process] = role;
    return {};
  }
  void call(const Model&, Sut& s, Results&) const override {
    std::map<std::string, std::string> options;
    if (listen) options[impl::kOptionListenIpInfo] = listen_text(s, process, *listen);
    s.dists[static_cast<std::size_t>(process)]->switch_role(role, options);
  }
  std::string tag(const Model& m, const Expect& e) const override {
    if (e.outcome.code != LLMStatusCode::LLM_EXIST_LINK) return "";
    for (int q = 0; q < kProcesses; ++q) {
      if (m.linked[process][q] && !m.linked[q][process]) return "switch_role refused: a stale side";
    }
    return "";
  }
  void show(std::ostream& os) const override {
    os << "c" << cluster_of(process) << ".switch_role(" << role_name(role);
    if (listen) os << ", {llm.listenIpInfo: its " << address_name(*listen) << "}";
    os << ")";
  }
};

/// Whether `handle` may be a transfer_cache_async destination: a decoder cache, registered in v2
/// (pool memory may be reused once freed), live allocated in v1 (no other caches there; none is
/// deallocated while a task may write it).
bool transfer_dst(const Model& m, int handle) {
  if (!on(m, handle, false)) return false;
  const ModelCache& c = m.caches[static_cast<std::size_t>(handle)];
  return m.v1 ? c.allocated && c.live : !c.allocated;
}

struct TransferLayerwise : ApiCommand {
  int src;
  std::vector<ModelConfig> configs;
  explicit TransferLayerwise(const Model& m)
      : src(pick_cache(m, [](const ModelCache& c) { return c.process == 0 && !c.blocks; })) {
    std::vector<int> dsts;
    for (std::size_t i = 0; i < m.caches.size(); ++i) {
      if (transfer_dst(m, static_cast<int>(i))) dsts.push_back(static_cast<int>(i));
    }
    RC_PRE(!dsts.empty());
    const int n = *rc::gen::inRange(1, 3);
    for (int i = 0; i < n; ++i) {
      ModelConfig c;
      c.dst = *rc::gen::elementOf(dsts);
      c.start = *rc::gen::inRange(0, m.layers);
      c.stop = *rc::gen::inRange(c.start + 1, m.layers + 1);
      c.src_row = *rc::gen::inRange(0, m.rows);
      c.dst_row = *rc::gen::inRange(0, m.rows);
      configs.push_back(c);
    }
  }
  void checkPreconditions(const Model& m) const override {
    bool ok = m.has(src) && m.caches[static_cast<std::size_t>(src)].process == 0 &&
              !m.caches[static_cast<std::size_t>(src)].blocks;
    for (const ModelConfig& c : configs) {
      ok = ok && transfer_dst(m, c.dst) && c.stop <= m.layers && c.src_row < m.rows &&
           c.dst_row < m.rows;
    }
    RC_PRE(ok);
  }
  Expect effect(Model& m) const override {
    // hicann/ge v1 llm_datadist.cc Impl::TransferCache: role PROMPT (§3.1 item 1).
    if (m.v1 && m.role[0] != LLMRole::PROMPT) return {param_invalid()};
    if (!m.v1 && m.caches[static_cast<std::size_t>(src)].host) return {param_invalid()};
    // §3.1 item 4: remote-accessible mode takes TransferWithCacheKeyConfig only.
    if (m.remote) return {CallOutcome{CallOutcome::Kind::kTypeError}};
    if (m.strict) {
      std::set<int> clusters;
      for (const ModelConfig& c : configs) {
        if (!clusters.insert(m.caches[static_cast<std::size_t>(c.dst)].process).second) {
          return {param_invalid()};  // kResultAliased
        }
      }
      for (const ModelTask& other : m.tasks) {
        if (!other.done) return {llm_outcome(LLMStatusCode::LLM_LINK_BUSY)};  // kConcurrentTransfer
      }
    }
    ModelTask t;
    t.src = src;
    t.configs = configs;
    if (m.v1) {
      for (const ModelConfig& c : configs) {
        const int p = m.caches[static_cast<std::size_t>(c.dst)].process;
        if (m.linked[0][p]) t.v1_links.emplace_back(p, m.link_generation[0][p]);
      }
    }
    t.next_layer = next_covered(t, 0, m.layers);
    m.tasks.push_back(t);
    return {};
  }
  void call(const Model& m, Sut& s, Results&) const override {
    const auto stride = static_cast<std::uint64_t>(m.width);
    std::vector<impl::AnyTransferConfig> list;
    for (const ModelConfig& c : configs) {
      const impl::CacheView& dst = s.views[static_cast<std::size_t>(c.dst)];
      std::vector<std::uint64_t> addrs;
      for (int layer = c.start; layer < c.stop; ++layer) {
        for (int k = 0; k < 2; ++k) {
          addrs.push_back(dst.tensor_addrs[static_cast<std::size_t>(2 * layer + k)] +
                          static_cast<std::uint64_t>(c.dst_row) * stride);
        }
      }
      list.emplace_back(
          impl::TransferConfig(cluster_of(m.caches[static_cast<std::size_t>(c.dst)].process), addrs,
                               impl::LayerRange{c.start, c.stop}, c.src_row));
    }
    auto gate = std::make_shared<GateSync>(s.h.platform());
    s.tasks.push_back(s.transfer(s.views[static_cast<std::size_t>(src)], gate, list));
    s.gates.push_back(gate);
  }
  void show(std::ostream& os) const override {
    os << "task(new) = c1.transfer_cache_async(#" << src << ", gated, [";
    for (std::size_t i = 0; i < configs.size(); ++i) {
      const ModelConfig& c = configs[i];
      os << (i ? ", " : "") << "{dst #" << c.dst << " row " << c.dst_row << ", range(" << c.start
         << ", " << c.stop << "), src row " << c.src_row << "}";
    }
    os << "])";
  }
};

/// Picks an in-flight task (precondition: one exists).
int pick_task(const Model& m, bool in_flight) {
  std::vector<int> ids;
  for (std::size_t i = 0; i < m.tasks.size(); ++i) {
    if (!in_flight || !m.tasks[i].done) ids.push_back(static_cast<int>(i));
  }
  RC_PRE(!ids.empty());
  return *rc::gen::elementOf(ids);
}

/// Opens the waiting layer of one in-flight task: True sends it (§3.2), False aborts the task.
struct OpenLayer : ApiCommand {
  int task;
  bool answer;
  OpenLayer(const Model& m, bool a) : task(pick_task(m, true)), answer(a) {}
  void checkPreconditions(const Model& m) const override {
    const bool ok =
        task < static_cast<int>(m.tasks.size()) && !m.tasks[static_cast<std::size_t>(task)].done;
    RC_PRE(ok);
  }
  Expect effect(Model& m) const override {
    ModelTask& t = m.tasks[static_cast<std::size_t>(task)];
    const int layer = t.next_layer;
    auto finish = [&](std::uint64_t cluster, LLMStatusCode code) {
      t.slots[cluster] = code;
      t.done = true;
    };
    for (const ModelConfig& c : t.configs) {
      if (!(c.start <= layer && layer < c.stop)) continue;
      const std::uint64_t cluster = cluster_of(m.caches[static_cast<std::size_t>(c.dst)].process);
      if (!answer) {
        t.slots[cluster] = LLMStatusCode::LLM_PARAM_INVALID;
        t.done = true;
        continue;
      }
      if (!m.caches[static_cast<std::size_t>(t.src)].live) {
        finish(cluster, LLMStatusCode::LLM_KV_CACHE_NOT_EXIST);
        break;
      }
      // Each layer looks up the prompt's own side (a server side counts too).
      if (!m.linked[0][m.caches[static_cast<std::size_t>(c.dst)].process]) {
        finish(cluster, LLMStatusCode::LLM_NOT_YET_LINK);
        break;
      }
      // §3.5: a HOST dst must come from allocate_cache (kDstOutsidePeer, "error unknown").
      if (m.caches[static_cast<std::size_t>(c.dst)].host &&
          !m.caches[static_cast<std::size_t>(c.dst)].allocated) {
        finish(cluster, LLMStatusCode::LLM_FAILED);
        break;
      }
      m.copy_rows(t.src, c.src_row, c.dst, c.dst_row, 2 * layer, 2);
      if (layer == c.stop - 1) t.slots[cluster] = LLMStatusCode::LLM_SUCCESS;
    }
    if (!t.done) {
      t.next_layer = next_covered(t, layer + 1, m.layers);
      t.done = t.next_layer < 0;
    }
    return {};
  }
  void call(const Model&, Sut& s, Results&) const override {
    s.gates[static_cast<std::size_t>(task)]->open(answer);
  }
  void show(std::ostream& os) const override {
    os << "task" << task << ": synchronize_layer(next) -> " << (answer ? "True" : "False");
  }
};
struct ReleaseLayer : OpenLayer {
  explicit ReleaseLayer(const Model& m) : OpenLayer(m, true) {}
};
struct FailLayer : OpenLayer {
  explicit FailLayer(const Model& m) : OpenLayer(m, false) {}
};

/// synchronize() or get_results() with a timeout (None only once the task is done).
struct WaitTask : ApiCommand {
  int task;
  bool results;
  std::optional<std::int64_t> timeout;
  explicit WaitTask(const Model& m)
      : task(pick_task(m, false)),
        results(*rc::gen::arbitrary<bool>()),
        timeout(m.tasks[static_cast<std::size_t>(task)].done && *rc::gen::arbitrary<bool>()
                    ? std::nullopt
                    : std::optional<std::int64_t>(*rc::gen::element<std::int64_t>(0, 5))) {}
  void checkPreconditions(const Model& m) const override {
    const bool ok = task < static_cast<int>(m.tasks.size()) &&
                    (timeout || m.tasks[static_cast<std::size_t>(task)].done);
    RC_PRE(ok);
  }
  Expect effect(Model& m) const override {
    const ModelTask& t = m.tasks[static_cast<std::size_t>(task)];
    Results r;
    for (const ModelConfig& c : t.configs) {
      const auto it = t.slots.find(cluster_of(m.caches[static_cast<std::size_t>(c.dst)].process));
      if (!t.done) {
        r.emplace_back(m.v1 ? LLMStatusCode::LLM_WAIT_PROCESS_TIMEOUT : LLMStatusCode::LLM_TIMEOUT);
      } else {
        r.push_back(it == t.slots.end() ? std::nullopt : std::optional<LLMStatusCode>(it->second));
      }
    }
    if (results) return {{}, r};
    LLMStatusCode code = LLMStatusCode::LLM_SUCCESS;
    for (const auto& x : r) {
      if (x && *x != LLMStatusCode::LLM_SUCCESS) {
        code = *x;
        break;
      }
    }
    return {{}, Results{code}};
  }
  void call(const Model&, Sut& s, Results& out) const override {
    impl::CacheTask& t = s.tasks[static_cast<std::size_t>(task)];
    out = results ? t.get_results(timeout) : Results{t.synchronize(timeout)};
  }
  void show(std::ostream& os) const override {
    os << "task" << task << "." << (results ? "get_results(" : "synchronize(")
       << (timeout ? std::to_string(*timeout) : "None") << ")";
  }
};

/// The handle of the first cache of `owner`'s (remote-accessible) table of `peer` matching `ok`,
/// or -1. Reads the table if this is the first access of the side.
int table_find(Model& m, int owner, int peer, const std::function<bool(const ModelCache&)>& ok) {
  for (int h : m.table_of(owner, peer)) {
    if (ok(m.caches[static_cast<std::size_t>(h)])) return h;
  }
  return -1;
}

/// Whether `owner`'s table of `peer` holds `handle` (reading the table if not yet).
bool in_table(Model& m, int owner, int peer, int handle) {
  const std::vector<int>& table = m.table_of(owner, peer);
  return std::find(table.begin(), table.end(), handle) != table.end();
}

/// pull_cache by CacheKeyByIdAndIndex (a remote cache's row) or by CacheKey (a keyed row, which the
/// pull uses up on the remote side), called by `puller` over its own side of the link.
struct PullCache : ApiCommand {
  int puller;
  int local;
  std::optional<ModelKey> key;  ///< by CacheKey, else by id
  int remote = -1;              ///< by id
  int remote_row = 0;           ///< by id
  int local_row;
  explicit PullCache(const Model& m)
      : puller(gen_puller(m)),
        local(pick_cache(
            m, [this](const ModelCache& c) { return c.process == puller; },
            [](const ModelCache& c) { return c.live && !c.blocks; })),
        local_row(gen_index(m)) {
    mostly_linked(m, puller);
    mostly_has_local(m, puller, false);
    // And 1 in 4 while no process it is linked to has a live contiguous cache to read.
    RC_PRE(std::any_of(m.caches.begin(), m.caches.end(),
                       [&](const ModelCache& c) {
                         return c.process != puller && c.live && !c.blocks &&
                                m.linked[puller][c.process];
                       }) ||
           *rc::gen::weightedElement<bool>({{1, true}, {3, false}}));
    if (*rc::gen::weightedElement<bool>({{m.remote ? 1 : m.v1 ? 4 : 6, true}, {4, false}})) {
      key = pick_pull_key(m, puller);
    } else {
      remote = pick_pull_source(m, puller);
      remote_row = gen_index(m);
    }
  }
  void checkPreconditions(const Model& m) const override {
    RC_PRE(owned_by(m, local, puller));
    RC_PRE(key || (m.has(remote) && !owned_by(m, remote, puller)));
  }
  Expect effect(Model& m) const override {
    // hicann/ge v1 llm_datadist.cc Impl::PullCache: kDecoder only (kv_cache_manager.py checks it
    // first).
    if (m.v1 && m.role[puller] != LLMRole::DECODER) return {param_invalid()};
    const ModelCache& l = m.caches[static_cast<std::size_t>(local)];
    if (key && m.remote) return {CallOutcome{CallOutcome::Kind::kTypeError}};
    if (l.blocks) return {param_invalid()};
    // Exactly one of req_id / prefix_id must be valid (§2.2).
    if (key && (key->req >= 0) == (key->prefix >= 0)) return {param_invalid()};
    if (!l.live) return {llm_outcome(LLMStatusCode::LLM_KV_CACHE_NOT_EXIST)};
    const int peer =
        key ? key->cluster_process : m.caches[static_cast<std::size_t>(remote)].process;
    // The caller's own side: a link the peer made counts under the comm backend, not under hixl.
    if (!m.linked[puller][peer]) return {llm_outcome(LLMStatusCode::LLM_NOT_YET_LINK)};
    if (m.v1 && m.strict && m.v1_transfer_on_link(puller, peer)) {
      return {llm_outcome(LLMStatusCode::LLM_LINK_BUSY)};  // kLinkCallOverlap (§3.5 v1)
    }
    int src = remote;
    int row = remote_row;
    if (key) {
      const auto found = m.find_key(peer, *key);
      if (!found) return {llm_outcome(LLMStatusCode::LLM_KV_CACHE_NOT_EXIST)};
      src = found->first;
      row = found->second;
    } else if (m.remote) {
      if (!in_table(m, puller, peer, remote)) {
        return {llm_outcome(LLMStatusCode::LLM_KV_CACHE_NOT_EXIST)};
      }
    } else if (!m.caches[static_cast<std::size_t>(src)].live) {
      return {llm_outcome(LLMStatusCode::LLM_KV_CACHE_NOT_EXIST)};
    }
    if (m.caches[static_cast<std::size_t>(src)].blocks || row >= m.rows || local_row >= m.rows) {
      return {param_invalid()};
    }
    if (l.host != m.caches[static_cast<std::size_t>(src)].host && !m.can_stage(puller)) {
      return {llm_outcome(LLMStatusCode::LLM_FEATURE_NOT_ENABLED)};  // §4: D2H/H2D need the pool
    }
    m.copy_rows(src, row, local, local_row, 0, m.tensors());
    if (key) m.remove_key(peer, *key);
    return {};
  }
  void call(const Model& m, Sut& s, Results&) const override {
    const impl::CacheView& l = s.views[static_cast<std::size_t>(local)];
    if (key) {
      s.pull_cache(puller, key->real(), l, local_row);
      return;
    }
    s.pull_cache(
        puller,
        impl::CacheKeyByIdAndIndex(cluster_of(m.caches[static_cast<std::size_t>(remote)].process),
                                   s.views[static_cast<std::size_t>(remote)].cache_id, remote_row),
        l, local_row);
  }
  std::string tag(const Model& m, const Expect& e) const override {
    if (e.outcome.kind == CallOutcome::Kind::kOk && puller != 0) return "a decoder pulled (v1)";
    const int peer =
        key ? key->cluster_process : m.caches[static_cast<std::size_t>(remote)].process;
    if (e.outcome.code == LLMStatusCode::LLM_NOT_YET_LINK && m.linked[peer][puller]) {
      return "a pull found only the peer's link";
    }
    return "";
  }
  void show(std::ostream& os) const override {
    os << "c" << cluster_of(puller) << ".pull_cache(";
    if (key) {
      showValue(*key, os);
    } else {
      os << "CacheKeyByIdAndIndex(#" << remote << ", " << remote_row << ")";
    }
    os << ", #" << local << ", batch_index " << local_row << ")";
  }
};

/// (process, model_id) of a BlocksCacheKey for `caller`: mostly (4 in 5) that of a keyed blocks
/// cache satisfying `ok` on a process `caller` is linked to, when there is one.
std::pair<int, int> pick_blocks_key(const Model& m, int caller,
                                    const std::function<bool(const ModelCache&)>& ok) {
  std::vector<std::pair<int, int>> targets;
  for (const ModelCache& c : m.caches) {
    if (c.process != caller && m.linked[caller][c.process] && c.blocks && c.blocks_key && ok(c)) {
      targets.emplace_back(c.process, *c.blocks_key);
    }
  }
  if (!targets.empty() && *rc::gen::weightedElement<bool>({{4, true}, {1, false}})) {
    return *rc::gen::elementOf(targets);
  }
  return {(caller + *rc::gen::inRange(1, kProcesses)) % kProcesses, *rc::gen::inRange(0, 2)};
}

/// pull_blocks by CacheKeyByIdAndIndex (a remote row into local blocks) or BlocksCacheKey (B2B),
/// called by `puller` over its own side of the link.
struct PullBlocks : ApiCommand {
  int puller;
  int local;
  bool by_blocks_key;
  int remote = -1;                ///< by id: the remote cache
  int peer = 1;                   ///< by key: the remote process
  int model_id = 0;               ///< by key
  int remote_row = 0;             ///< by id
  std::optional<ModelKey> key{};  ///< by CacheKey (C2B from a keyed row, which the pull uses up)
  std::vector<int> src_blocks;
  std::vector<int> dst_blocks;
  explicit PullBlocks(const Model& m)
      : puller(gen_puller(m)),
        local(pick_cache(
            m, [this](const ModelCache& c) { return c.process == puller; },
            [](const ModelCache& c) { return c.live && c.blocks; })),
        by_blocks_key(*rc::gen::arbitrary<bool>()) {
    const int n = *rc::gen::inRange(1, 3);
    mostly_linked(m, puller);
    mostly_has_local(m, puller, true);
    // Distinct destination blocks in [0, rows]: destinations of one batch never overlap.
    dst_blocks.push_back(gen_index(m));
    if (n == 2) {
      const int other = *rc::gen::inRange(0, m.rows);
      dst_blocks.push_back(other >= dst_blocks[0] ? other + 1 : other);
    }
    if (by_blocks_key) {
      std::tie(peer, model_id) =
          pick_blocks_key(m, puller, [](const ModelCache& c) { return c.live; });
      for (int i = 0; i < n; ++i) src_blocks.push_back(gen_index(m));
    } else if (*rc::gen::weightedElement<bool>({{m.remote ? 1 : 3, true}, {4, false}})) {
      key = pick_pull_key(m, puller);
    } else {
      remote = pick_pull_source(m, puller);
      remote_row = gen_index(m);
    }
  }
  void checkPreconditions(const Model& m) const override {
    RC_PRE(owned_by(m, local, puller));
    RC_PRE(by_blocks_key || key || (m.has(remote) && !owned_by(m, remote, puller)));
  }
  Expect effect(Model& m) const override {
    // hicann/ge v1 llm_datadist.cc Impl::PullBlocks: kDecoder only, checked first.
    if (m.v1 && m.role[puller] != LLMRole::DECODER) return {param_invalid()};
    const ModelCache& l = m.caches[static_cast<std::size_t>(local)];
    if (!l.blocks) return {param_invalid()};
    if (key && (key->req >= 0) == (key->prefix >= 0)) return {param_invalid()};
    if (!l.live) return {llm_outcome(LLMStatusCode::LLM_KV_CACHE_NOT_EXIST)};
    const int process = by_blocks_key ? peer
                        : key         ? key->cluster_process
                                      : m.caches[static_cast<std::size_t>(remote)].process;
    if (!m.linked[puller][process]) return {llm_outcome(LLMStatusCode::LLM_NOT_YET_LINK)};
    if (m.v1 && m.strict && m.v1_transfer_on_link(puller, process)) {
      return {llm_outcome(LLMStatusCode::LLM_LINK_BUSY)};  // kLinkCallOverlap (§3.5 v1)
    }
    int src = remote;
    int row = remote_row;
    if (key) {
      // Remote-accessible mode reads the table (the side's first access counts) but finds no
      // CacheKey there.
      if (m.remote) (void)m.table_of(puller, process);
      const auto found = m.remote ? std::nullopt : m.find_key(process, *key);
      if (!found) return {llm_outcome(LLMStatusCode::LLM_KV_CACHE_NOT_EXIST)};
      std::tie(src, row) = *found;
    } else if (m.remote) {
      // The table as read at the side's first access: a BlocksCacheKey names the first blocks
      // cache with its model_id (§3.4); caches unregistered since still answer.
      src = by_blocks_key ? table_find(m, puller, process,
                                       [&](const ModelCache& c) {
                                         return c.blocks && c.blocks_key == model_id;
                                       })
                          : (in_table(m, puller, process, remote) ? remote : -1);
      if (src < 0) return {llm_outcome(LLMStatusCode::LLM_KV_CACHE_NOT_EXIST)};
    } else if (by_blocks_key) {
      src = -1;
      for (std::size_t i = 0; i < m.caches.size(); ++i) {
        const ModelCache& c = m.caches[i];
        if (c.live && c.process == peer && c.blocks_key == std::optional<int>(model_id)) {
          src = static_cast<int>(i);
        }
      }
      if (src < 0) return {llm_outcome(LLMStatusCode::LLM_KV_CACHE_NOT_EXIST)};
    } else if (!m.caches[static_cast<std::size_t>(src)].live) {
      return {llm_outcome(LLMStatusCode::LLM_KV_CACHE_NOT_EXIST)};
    }
    if (m.caches[static_cast<std::size_t>(src)].blocks != by_blocks_key) return {param_invalid()};
    for (int d : dst_blocks) {
      if (d >= m.rows) return {param_invalid()};
    }
    const ModelCache& from = m.caches[static_cast<std::size_t>(src)];
    if (from.host && !l.host && !(from.blocks && l.blocks)) return {param_invalid()};  // §4
    if (from.host != l.host && !m.can_stage(puller)) {
      return {llm_outcome(LLMStatusCode::LLM_FEATURE_NOT_ENABLED)};
    }
    if (by_blocks_key) {
      for (int b : src_blocks) {
        if (b >= m.rows) return {param_invalid()};
      }
      for (std::size_t j = 0; j < dst_blocks.size(); ++j) {
        m.copy_rows(src, src_blocks[j], local, dst_blocks[j], 0, m.tensors());
      }
      return {};
    }
    // A remote row of `width` bytes is one block of the local cache (same shape).
    if (row >= m.rows || dst_blocks.size() > 1) return {param_invalid()};
    m.copy_rows(src, row, local, dst_blocks[0], 0, m.tensors());
    if (key) m.remove_key(process, *key);
    return {};
  }
  void call(const Model& m, Sut& s, Results&) const override {
    const std::vector<std::int64_t> dst(dst_blocks.begin(), dst_blocks.end());
    if (by_blocks_key) {
      const std::vector<std::int64_t> src(src_blocks.begin(), src_blocks.end());
      s.pull_blocks(puller,
                    impl::BlocksCacheKey{cluster_of(peer), static_cast<std::uint64_t>(model_id)},
                    s.views[static_cast<std::size_t>(local)], src, dst);
    } else if (key) {
      s.pull_blocks(puller, key->real(), s.views[static_cast<std::size_t>(local)], {}, dst);
    } else {
      s.pull_blocks(puller,
                    impl::CacheKeyByIdAndIndex(
                        cluster_of(m.caches[static_cast<std::size_t>(remote)].process),
                        s.views[static_cast<std::size_t>(remote)].cache_id, remote_row),
                    s.views[static_cast<std::size_t>(local)], {}, dst);
    }
  }
  void show(std::ostream& os) const override {
    os << "c" << cluster_of(puller) << ".pull_blocks(";
    if (by_blocks_key) {
      os << "BlocksCacheKey(" << cluster_of(peer) << ", " << model_id << "), #" << local
         << ", src_blocks [";
      for (std::size_t i = 0; i < src_blocks.size(); ++i) os << (i ? " " : "") << src_blocks[i];
      os << "]";
    } else if (key) {
      showValue(*key, os);
      os << ", #" << local;
    } else {
      os << "CacheKeyByIdAndIndex(#" << remote << ", " << remote_row << "), #" << local;
    }
    os << ", dst_blocks [";
    for (std::size_t i = 0; i < dst_blocks.size(); ++i) os << (i ? " " : "") << dst_blocks[i];
    os << "])";
  }
};

/// The layers of a push: None for both ranges (every layer), or a src range and a dst range of
/// mostly equal length whose dst part lies one layer past the end in 1 case of 8.
struct PushLayers {
  std::optional<std::pair<int, int>> src{};  ///< [start, stop)
  std::optional<std::pair<int, int>> dst{};
};

PushLayers gen_push_layers(const Model& m) {
  PushLayers p;
  if (*rc::gen::weightedElement<bool>({{1, true}, {3, false}})) return p;
  const int start = *rc::gen::inRange(0, m.layers);
  const int stop = *rc::gen::inRange(start + 1, m.layers + 1);
  const int len = *rc::gen::weightedOneOf<int>(
      {{7, rc::gen::just(stop - start)}, {1, rc::gen::inRange(1, m.layers + 1)}});
  // Mostly a dst range that starts elsewhere (a push that mixes up the ranges shows), when one
  // fits.
  std::vector<int> starts;
  for (int d = 0; d <= m.layers - len; ++d) {
    if (d != start) starts.push_back(d);
  }
  const int dst = *rc::gen::weightedOneOf<int>(
      {{starts.empty() ? 0 : 4, rc::gen::elementOf(starts.empty() ? std::vector<int>{0} : starts)},
       {3, rc::gen::inRange(0, m.layers - len + 1)},
       {1, rc::gen::just(m.layers - len + 1)}});
  p.src = {start, stop};
  p.dst = {dst, dst + len};
  return p;
}

/// (src layer, dst layer) pairs of a push, or nullopt if the range lengths differ.
std::optional<std::vector<std::pair<int, int>>> push_pairs(const Model& m, const PushLayers& p) {
  std::vector<std::pair<int, int>> out;
  if (!p.src) {
    for (int l = 0; l < m.layers; ++l) out.emplace_back(l, l);
    return out;
  }
  if (p.src->second - p.src->first != p.dst->second - p.dst->first) return std::nullopt;
  for (int i = 0; i < p.src->second - p.src->first; ++i) {
    out.emplace_back(p.src->first + i, p.dst->first + i);
  }
  return out;
}

std::optional<impl::LayerRange> real_range(const std::optional<std::pair<int, int>>& r) {
  if (!r) return std::nullopt;
  return impl::LayerRange{r->first, r->second};
}

void show_push_layers(const PushLayers& p, std::ostream& os) {
  if (!p.src) return;
  os << ", range(" << p.src->first << ", " << p.src->second << ") -> range(" << p.dst->first << ", "
     << p.dst->second << ")";
}

/// The checks push_* makes before sending anything (§4; remote-accessible geometry §3.4, all
/// layers up front so that a rejected push changes nothing): the expected failure, if any.
/// `dst` is found in the link's table afterwards by `find_dst`.
std::optional<CallOutcome> push_preamble(Model& m, const ModelCache& src, int peer,
                                         const std::function<int(Model&)>& find_dst, int& dst) {
  if (!src.live) return llm_outcome(LLMStatusCode::LLM_KV_CACHE_NOT_EXIST);
  if (src.host) return param_invalid();  // push requires a DEVICE source (§4 C++ notes)
  if (!m.linked[0][peer]) return llm_outcome(LLMStatusCode::LLM_NOT_YET_LINK);  // its own side
  dst = find_dst(m);
  if (dst < 0) return llm_outcome(LLMStatusCode::LLM_KV_CACHE_NOT_EXIST);
  if (!src.remote_accessible || !m.caches[static_cast<std::size_t>(dst)].remote_accessible) {
    return param_invalid();
  }
  return std::nullopt;
}

/// Caches a push can use: live, remote accessible, blocks or not.
std::function<bool(const ModelCache&)> pushable(bool blocks) {
  return
      [blocks](const ModelCache& c) { return c.live && c.remote_accessible && c.blocks == blocks; };
}

/// Outside remote-accessible mode a push only checks the option: keep 1 push in 8 there, and 1
/// in 4 while the prompt has no link.
void mostly_remote(const Model& m) {
  RC_PRE(!m.v1);
  RC_PRE(m.remote || *rc::gen::weightedElement<bool>({{1, true}, {7, false}}));
  mostly_linked(m, 0);
}

/// push_cache(CacheKeyByIdAndIndex(decoder cache, row), prompt cache, src row, ranges): one
/// synchronous C2C transfer per layer.
struct PushCache : ApiCommand {
  int src;
  int dst;
  int src_row;
  int dst_row;
  PushLayers layers;
  bool bad_size;  ///< size 64 instead of -1
  explicit PushCache(const Model& m)
      : src(pick_cache(
            m, [](const ModelCache& c) { return c.process == 0; }, pushable(false))),
        dst(pick_cache(
            m, [](const ModelCache& c) { return c.process != 0; },
            [&m](const ModelCache& c) { return pushable(false)(c) && m.linked[0][c.process]; })),
        src_row(gen_index(m)),
        dst_row(gen_index(m)),
        layers(gen_push_layers(m)),
        bad_size(*rc::gen::weightedElement<bool>({{15, false}, {1, true}})) {
    mostly_remote(m);
  }
  void checkPreconditions(const Model& m) const override {
    RC_PRE(on(m, src, true) && on(m, dst, false));
  }
  Expect effect(Model& m) const override {
    const ModelCache& s = m.caches[static_cast<std::size_t>(src)];
    if (!m.remote || s.blocks) return {param_invalid()};
    const auto pairs = push_pairs(m, layers);
    if (!pairs || bad_size) return {param_invalid()};
    int to = -1;
    const int peer = m.caches[static_cast<std::size_t>(dst)].process;
    if (const auto failed = push_preamble(
            m, s, peer, [&](Model& mm) { return in_table(mm, 0, peer, dst) ? dst : -1; }, to)) {
      return {*failed};
    }
    const int dst_rows = m.caches[static_cast<std::size_t>(dst)].blocks ? 1 : m.rows;
    for (const auto& [sl, dl] : *pairs) {
      if (dl >= m.layers || dst_row >= dst_rows || src_row >= m.rows) return {param_invalid()};
    }
    for (const auto& [sl, dl] : *pairs) {
      m.copy_rows(src, src_row, dst, dst_row, 2 * sl, 2, 2 * dl);
    }
    return {};
  }
  void call(const Model& m, Sut& s, Results&) const override {
    s.cm(0).push_cache(
        impl::CacheKeyByIdAndIndex(cluster_of(m.caches[static_cast<std::size_t>(dst)].process),
                                   s.views[static_cast<std::size_t>(dst)].cache_id, dst_row),
        s.views[static_cast<std::size_t>(src)], src_row, real_range(layers.src),
        real_range(layers.dst), bad_size ? 64 : -1);
  }
  void show(std::ostream& os) const override {
    os << "c1.push_cache(CacheKeyByIdAndIndex(#" << dst << ", " << dst_row << "), #" << src
       << ", src row " << src_row;
    show_push_layers(layers, os);
    os << (bad_size ? ", size 64" : "") << ")";
  }
};

/// push_blocks(BlocksCacheKey(decoder, model_id), prompt blocks cache, src_blocks, dst_blocks,
/// ranges): one synchronous B2B transfer per layer.
struct PushBlocks : ApiCommand {
  int src;
  int peer = 1;
  int model_id = 0;
  std::vector<int> src_blocks;
  std::vector<int> dst_blocks;
  PushLayers layers;
  explicit PushBlocks(const Model& m)
      : src(pick_cache(
            m, [](const ModelCache& c) { return c.process == 0; }, pushable(true))),
        layers(gen_push_layers(m)) {
    mostly_remote(m);
    std::tie(peer, model_id) = pick_blocks_key(m, 0, pushable(true));
    const int n = *rc::gen::inRange(1, 3);
    dst_blocks.push_back(gen_index(m));
    if (n == 2) {
      const int other = *rc::gen::inRange(0, m.rows);
      dst_blocks.push_back(other >= dst_blocks[0] ? other + 1 : other);
    }
    const int n_src = *rc::gen::weightedElement<int>({{14, n}, {1, 0}, {1, n == 1 ? 2 : 1}});
    for (int i = 0; i < n_src; ++i) src_blocks.push_back(gen_index(m));
  }
  void checkPreconditions(const Model& m) const override { RC_PRE(on(m, src, true)); }
  Expect effect(Model& m) const override {
    const ModelCache& s = m.caches[static_cast<std::size_t>(src)];
    if (!m.remote || !s.blocks) return {param_invalid()};
    const auto pairs = push_pairs(m, layers);
    if (!pairs) return {param_invalid()};
    int dst = -1;
    if (const auto failed = push_preamble(
            m, s, peer,
            [&](Model& mm) {
              return table_find(mm, 0, peer, [&](const ModelCache& c) {
                return c.blocks && c.blocks_key == model_id;
              });
            },
            dst)) {
      return {*failed};
    }
    // dst_block_memory_size is 0 for a push: src_blocks empty is C2B, which needs it (§3.4).
    if (src_blocks.size() != dst_blocks.size()) return {param_invalid()};
    for (const auto& [sl, dl] : *pairs) {
      if (dl >= m.layers) return {param_invalid()};
    }
    for (std::size_t j = 0; j < dst_blocks.size(); ++j) {
      if (dst_blocks[j] >= m.rows || src_blocks[j] >= m.rows) return {param_invalid()};
    }
    for (const auto& [sl, dl] : *pairs) {
      for (std::size_t j = 0; j < dst_blocks.size(); ++j) {
        m.copy_rows(src, src_blocks[j], dst, dst_blocks[j], 2 * sl, 2, 2 * dl);
      }
    }
    return {};
  }
  void call(const Model&, Sut& s, Results&) const override {
    s.cm(0).push_blocks(
        impl::BlocksCacheKey{cluster_of(peer), static_cast<std::uint64_t>(model_id)},
        s.views[static_cast<std::size_t>(src)],
        std::vector<std::int64_t>(src_blocks.begin(), src_blocks.end()),
        std::vector<std::int64_t>(dst_blocks.begin(), dst_blocks.end()), real_range(layers.src),
        real_range(layers.dst));
  }
  void show(std::ostream& os) const override {
    os << "c1.push_blocks(BlocksCacheKey(" << cluster_of(peer) << ", " << model_id << "), #" << src
       << ", src_blocks [";
    for (std::size_t i = 0; i < src_blocks.size(); ++i) os << (i ? " " : "") << src_blocks[i];
    os << "], dst_blocks [";
    for (std::size_t i = 0; i < dst_blocks.size(); ++i) os << (i ? " " : "") << dst_blocks[i];
    os << "]";
    show_push_layers(layers, os);
    os << ")";
  }
};

/// cache_manager and kv_cache_manager of one process: the case's generation answers, the other
/// raises LLM_PARAM_INVALID (hixl v2/llm_datadist.py _check_is_cache_mgr_mode /
/// _check_is_not_cache_mgr_mode).
struct Managers : ApiCommand {
  int process;
  explicit Managers(const Model&) : process(*rc::gen::inRange(0, kProcesses)) {}
  Expect effect(Model& m) const override {
    engine_rules::Engine e;
    e.v2 = !m.v1;
    return {{},
            Results{engine_rules::manager_error(e, true).value_or(LLMStatusCode::LLM_SUCCESS),
                    engine_rules::manager_error(e, false).value_or(LLMStatusCode::LLM_SUCCESS)}};
  }
  void call(const Model&, Sut& s, Results& out) const override {
    impl::LLMDataDist& d = *s.dists[static_cast<std::size_t>(process)];
    out = {status_of([&] { (void)d.cache_manager(); }),
           status_of([&] { (void)d.kv_cache_manager(); })};
  }
  void show(std::ostream& os) const override {
    os << "c" << cluster_of(process) << ".cache_manager, .kv_cache_manager";
  }
};

/// Generation options of every kind, accepted or not by init.
rc::Gen<engine_rules::InitOptions> gen_any_init() {
  return rc::gen::build<engine_rules::InitOptions>(
      rc::gen::set(&engine_rules::InitOptions::enable_cache_manager,
                   rc::gen::weightedElement<std::optional<bool>>(
                       {{1, std::nullopt}, {1, false}, {2, true}})),
      rc::gen::set(&engine_rules::InitOptions::local_comm_res,
                   rc::gen::weightedElement<bool>({{2, false}, {1, true}})),
      rc::gen::set(&engine_rules::InitOptions::remote_accessible,
                   rc::gen::weightedElement<std::optional<bool>>(
                       {{2, std::nullopt}, {1, false}, {1, true}})),
      rc::gen::set(&engine_rules::InitOptions::transfer_backend,
                   rc::gen::weightedElement<std::optional<std::string>>(
                       {{4, std::nullopt}, {2, std::string("hixl")}, {1, std::string("adxl")}})),
      rc::gen::set(&engine_rules::InitOptions::listen, rc::gen::arbitrary<bool>()),
      rc::gen::set(&engine_rules::InitOptions::prompt, rc::gen::arbitrary<bool>()));
}

/// A fifth engine (cluster 9 on device 4) initialized with generated generation options in a host
/// process of its own, or in 1 case of 6 in the prompt's: init's outcome as the rules give it
/// (a second LLMDataDist in a launched process: LLM_FAILED "Cannot init multiple LLMDataDists",
/// hixl v2/llm_datadist.py LLMDataDist.init), then which manager answers. Finalized again.
struct InitEngine : ApiCommand {
  engine_rules::InitOptions options;
  bool in_prompt_process;
  explicit InitEngine(const Model&)
      : options(*gen_any_init()),
        in_prompt_process(*rc::gen::weightedElement<bool>({{5, false}, {1, true}})) {}
  Expect effect(Model&) const override {
    if (in_prompt_process) return {llm_outcome(LLMStatusCode::LLM_FAILED)};
    const engine_rules::Engine e = engine_rules::init(options);
    if (e.error) return {llm_outcome(*e.error)};
    return {{},
            Results{engine_rules::manager_error(e, true).value_or(LLMStatusCode::LLM_SUCCESS),
                    engine_rules::manager_error(e, false).value_or(LLMStatusCode::LLM_SUCCESS)}};
  }
  void call(const Model&, Sut& s, Results& out) const override {
    constexpr int kDevice = 4;
    std::map<std::string, std::string> map = options.to_map();
    if (options.listen) map[impl::kOptionListenIpInfo] = s.h.listen_address(kDevice);
    const LLMRole role = options.prompt ? LLMRole::PROMPT : LLMRole::DECODER;
    std::unique_ptr<impl::LLMDataDist> dist;
    if (in_prompt_process) {
      dist = std::make_unique<impl::LLMDataDist>(s.h.platform(), s.h.world().directory(), role, 9);
      map[impl::kOptionDeviceId] = "0";
      s.h.world().platform().run_as(s.h.process_of(cluster_of(0)), [&] { dist->init(map); });
    } else {
      dist = s.h.make_dist_with(role, 9, kDevice, map);
    }
    out = {status_of([&] { (void)dist->cache_manager(); }),
           status_of([&] { (void)dist->kv_cache_manager(); })};
    dist->finalize();
  }
  void show(std::ostream& os) const override {
    os << "c9 = LLMDataDist(" << (options.prompt ? "PROMPT" : "DECODER") << ").init(";
    engine_rules::showValue(options, os);
    os << (in_prompt_process ? ") in c1's process" : ")") << ", .cache_manager, .kv_cache_manager";
  }
};

/// The generation options of a case: any that init accepts for a listening PROMPT, except v1 with
/// llm.EnableRemoteCacheAccessible=1 (v1 has no such mode).
rc::Gen<engine_rules::InitOptions> gen_case_init() {
  return rc::gen::suchThat(gen_any_init(), [](engine_rules::InitOptions o) {
    if (o.transfer_backend == std::optional<std::string>("adxl")) return false;
    o.listen = true;
    o.prompt = true;
    const engine_rules::Engine e = engine_rules::init(o);
    return !e.error && (e.v2 || o.remote_accessible != std::optional<bool>(true));
  });
}

RC_GTEST_PROP(ApiState, EveryStatusAndEveryByteAgreesWithTheModel, ()) {
  // One generated value, so that a counterexample shows the case's shape and modes in one line.
  const Model initial = *rc::gen::exec([] {
    Model m;
    m.layers = *rc::gen::weightedElement<int>({{1, 1}, {2, 2}, {2, 3}});
    m.rows = *rc::gen::inRange(1, 4);
    m.width = 64 * *rc::gen::inRange(1, 9);
    m.init = *gen_case_init();
    m.init.listen = true;
    m.init.prompt = true;
    const engine_rules::Engine e = engine_rules::init(m.init);
    m.v1 = !e.v2;
    m.remote = e.remote;
    m.hixl = e.hixl;
    m.strict = *rc::gen::weightedElement<bool>({{3, false}, {1, true}});
    m.staging = *rc::gen::arbitrary<bool>();
    m.switch_role_option = *rc::gen::arbitrary<bool>();
    return m;
  });
  // Up to 71 commands per case; each command's arguments are drawn at full size, so that choices
  // among processes, caches and rows are not biased to the first ones.
  const auto one = rc::state::gen::execOneOfWithArgs<
      RegisterCache, RegisterCache, RegisterCache, RegisterCache, UnregisterCache, AllocateCache,
      AllocateCache, DeallocateCache, DeallocateCache, RemoveCacheKey, PullCache, PullCache, Link,
      Link, Link, Unlink, Unlink, TransferLayerwise, TransferLayerwise, ReleaseLayer, ReleaseLayer,
      ReleaseLayer, FailLayer, WaitTask, WaitTask, PullCache, PullCache, PullBlocks, PullBlocks,
      PushCache, PushCache, PushCache, PushBlocks, PushBlocks, PushBlocks, SwitchRole, SwitchRole,
      Managers, InitEngine>();
  const auto commands = *rc::gen::resize(
      70, rc::state::gen::commands(initial,
                                   [one](const Model& m) { return rc::gen::resize(100, one(m)); }));
  Sut sut;
  sut.v1 = initial.v1;
  for (int p = 0; p < kProcesses; ++p) {
    // Exactly the case's generation options: no sim default may choose the generation.
    std::map<std::string, std::string> options = initial.init.to_map();
    options[impl::kOptionListenIpInfo] = sut.h.listen_address(device_of(p));
    if (initial.switch_role_option) options[impl::kOptionEnableSwitchRole] = "1";
    if (initial.has_pool(p)) {
      const bool big = p == 0 && initial.staging;
      options[impl::kOptionMemPoolConfig] = big ? R"({"memory_size": 134217728, "page_shift": 10})"
                                                : R"({"memory_size": 4194304, "page_shift": 10})";
      options[impl::kOptionHostMemPoolConfig] = R"({"memory_size": 4194304, "page_shift": 10})";
    }
    if (initial.strict) options[impl::kOptionKvsimStrict] = "1";
    sut.dists.push_back(sut.h.make_dist_with(p == 0 ? LLMRole::PROMPT : LLMRole::DECODER,
                                             cluster_of(p), device_of(p), options));
  }
  RC_CLASSIFY(!initial.init.enable_cache_manager && !initial.init.local_comm_res,
              "v1 for want of llm.EnableCacheManager");
  RC_CLASSIFY(initial.init.local_comm_res && !initial.init.enable_cache_manager,
              "v2 by llm.LocalCommRes alone");
  RC_CLASSIFY(initial.hixl, "hixl backend");
  RC_CLASSIFY(initial.v1, "v1");
  rc::state::runAll(commands, initial, sut);
}

}  // namespace
}  // namespace kvsim::properties
