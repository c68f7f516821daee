// Property 4, the whole API as a state machine (spec §3, §4): rc::state commands over one prompt
// process (cluster 1, device 0) and two decoders (cluster 2 on device 8 over RoCE, cluster 3 on
// device 1 over HCCS): register/unregister (with CacheKeys and BlocksCacheKeys), allocate/
// deallocate with the deferred release of keyed caches, remove_cache_key, link/unlink,
// transfer_cache_async with a gated synchronizer whose layers the commands release or fail one at
// a time (the interleavings), synchronize/get_results with timeouts, pull_cache (by id or by
// CacheKey, which a pull uses up), pull_blocks, push_cache/push_blocks and switch_role, on DEVICE
// and HOST caches. Each case runs v2 plain, v2 remote-accessible
// (llm.EnableRemoteCacheAccessible=1: pushes, a remote cache table read at the first access of a
// link, TransferConfig refused) or v1 (kvsim.ApiVersion=1: KvCacheManager), and either faithful or
// strict (kvsim.Strict=1: diagnostics are errors). The pure reference model (api_model.h) and the
// commands' rules predict every call's status or exception and the bytes of every live cache; both
// are checked after each command.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>
#include <rapidcheck/state.h>

#include <algorithm>
#include <set>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include "properties/api_model.h"
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
  bool v1 = false;  ///< kvsim.ApiVersion=1: the calls below go to KvCacheManager
  impl::CacheManager& cm(int process) {
    return dists[static_cast<std::size_t>(process)]->cache_manager();
  }
  impl::KvCacheManager& kv(int process) {
    return dists[static_cast<std::size_t>(process)]->kv_cache_manager();
  }
  /// The calls both cache managers have, on the case's one.
  impl::CacheView allocate(int process, const impl::CacheDesc& desc, bool blocks,
                           const std::vector<impl::CacheKey>& keys) {
    if (!v1) {
      return blocks ? cm(process).allocate_blocks_cache(desc)
                    : cm(process).allocate_cache(desc, keys);
    }
    return (blocks ? kv(process).allocate_blocks_cache(desc)
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
  void pull_cache(const impl::PullCacheKey& key, const impl::CacheView& local, std::int64_t row) {
    v1 ? kv(0).pull_cache(key, impl::KvCache(local), row) : cm(0).pull_cache(key, local, row);
  }
  void pull_blocks(const impl::PullBlocksKey& key, const impl::CacheView& local,
                   const std::vector<std::int64_t>& src, const std::vector<std::int64_t>& dst) {
    v1 ? kv(0).pull_blocks(key, impl::KvCache(local), src, dst)
       : cm(0).pull_blocks(key, local, src, dst);
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

/// A key to pull: mostly (4 in 5) one that a row of a linked decoder carries or carried.
ModelKey pick_pull_key(const Model& m) {
  std::vector<ModelKey> known = m.used_keys;
  for (const ModelCache& c : m.caches) {
    if (!(c.live || c.pending)) continue;
    for (const auto& k : c.row_keys) {
      if (k) known.push_back(*k);
    }
  }
  const auto unlinked = [&](const ModelKey& k) {
    return k.cluster_process == 0 || !m.linked[k.cluster_process];
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
  return pick_key(m, *rc::gen::inRange(1, kProcesses));
}

/// cache_keys of a new contiguous cache of `process`: none, or one per row (one too many in 1 case
/// of 10); placeholders (both ids invalid) keep a row keyless.
std::vector<ModelKey> gen_row_keys(const Model& m, int process) {
  if (*rc::gen::arbitrary<bool>()) return {};
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
  bool host;
  explicit AllocateCache(const Model& m)
      : process(*rc::gen::weightedElement<int>({{2, 0}, {1, 1}, {1, 2}})),
        blocks(*rc::gen::arbitrary<bool>()),
        keys(blocks ? std::vector<ModelKey>{} : gen_row_keys(m, process)),
        host(gen_host()) {}
  Expect effect(Model& m) const override {
    if (!m.has_pool(process)) return {llm_outcome(LLMStatusCode::LLM_FEATURE_NOT_ENABLED)};
    std::vector<std::optional<ModelKey>> rows;
    if (const auto failed = row_keys_of(m, process, keys, rows)) return {*failed};
    ModelCache c = m.fresh(process, blocks, true, host);
    c.row_keys = std::move(rows);
    m.caches.push_back(std::move(c));
    return {};
  }
  void call(const Model& m, Sut& s, Results&) const override {
    const int handle = static_cast<int>(m.caches.size());
    const impl::CacheDesc desc = desc_of(m, host);
    impl::CacheView v = s.allocate(process, desc, blocks, real_keys(keys));
    for (int t = 0; t < m.tensors(); ++t) {
      s.h.write(v.tensor_addrs[static_cast<std::size_t>(t)],
                pattern(m.tensor_bytes(), Model::seed(handle, t)));
    }
    s.views.push_back(std::move(v));
  }
  void show(std::ostream& os) const override {
    os << "#new = c" << cluster_of(process) << "."
       << (blocks ? "allocate_blocks_cache" : "allocate_cache") << "(";
    if (!keys.empty()) show_keys(keys, os);
    os << (host ? ", HOST" : "") << ")";
  }
};

/// Whether `handle` names a cache of the prompt (`prompt`) or of a decoder: re-checked when a
/// shrunk sequence has renumbered the caches.
bool on(const Model& m, int handle, bool prompt) {
  return m.has(handle) && (m.caches[static_cast<std::size_t>(handle)].process == 0) == prompt;
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

/// A decoder cache to pull from by id: mostly a live contiguous one on a linked decoder.
int pick_pull_source(const Model& m) {
  return pick_cache(
      m, [](const ModelCache& c) { return c.process != 0; },
      [&m](const ModelCache& c) { return c.live && !c.blocks && m.linked[c.process]; });
}

/// Keeps 1 pull or push in 4 while the prompt has no link (they would all be LLM_NOT_YET_LINK).
void mostly_linked(const Model& m) {
  RC_PRE(m.any_link(0) || *rc::gen::weightedElement<bool>({{1, true}, {3, false}}));
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
    if (!c.live || c.allocated) return {llm_outcome(LLMStatusCode::LLM_KV_CACHE_NOT_EXIST)};
    if (c.remote_accessible && m.any_link(c.process)) {
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

struct Link : ApiCommand {
  int peer;
  explicit Link(const Model& m) : peer(*rc::gen::inRange(1, kProcesses)) {
    // Mostly register first (§4: register before linking, or caches are not remote accessible).
    RC_PRE(m.caches.size() >= 4 || *rc::gen::weightedElement<bool>({{1, true}, {3, false}}));
  }
  Expect effect(Model& m) const override {
    if (m.linked[peer]) return {llm_outcome(LLMStatusCode::LLM_ALREADY_LINK)};
    if (!m.listening[peer]) return {llm_outcome(LLMStatusCode::LLM_LINK_FAILED)};
    m.linked[peer] = true;
    ++m.link_generation[peer];
    m.table[peer].reset();
    return {};
  }
  void call(const Model&, Sut& s, Results&) const override {
    const LLMStatusCode code = s.h.link(*s.dists[0], cluster_of(peer), device_of(peer));
    if (code != LLMStatusCode::LLM_SUCCESS) throw impl::LLMException(code, "link", "");
  }
  void show(std::ostream& os) const override {
    os << "c1.link_clusters([c" << cluster_of(peer) << "])";
  }
};

struct Unlink : ApiCommand {
  int peer;
  explicit Unlink(const Model& m) : peer(*rc::gen::inRange(1, kProcesses)) {
    RC_PRE(*rc::gen::weightedElement<bool>({{1, true}, {m.linked[peer] ? 1 : 3, false}}));
  }
  Expect effect(Model& m) const override {
    if (!m.linked[peer]) return {llm_outcome(LLMStatusCode::LLM_NOT_YET_LINK)};
    m.linked[peer] = false;
    m.table[peer].reset();
    return {};
  }
  void call(const Model&, Sut& s, Results&) const override {
    const LLMStatusCode code =
        s.dists[0]->unlink_clusters({s.h.cluster_info(cluster_of(peer), device_of(peer))}).first;
    if (code != LLMStatusCode::LLM_SUCCESS) throw impl::LLMException(code, "unlink", "");
  }
  void show(std::ostream& os) const override {
    os << "c1.unlink_clusters([c" << cluster_of(peer) << "])";
  }
};

struct SwitchRole : ApiCommand {
  int process;
  LLMRole role;
  bool listen;
  explicit SwitchRole(const Model&)
      : process(*rc::gen::inRange(0, kProcesses)),
        role(*rc::gen::element(LLMRole::PROMPT, LLMRole::DECODER, LLMRole::MIX)),
        listen(role == LLMRole::PROMPT && *rc::gen::arbitrary<bool>()) {}
  Expect effect(Model& m) const override {
    if (m.any_link(process)) return {llm_outcome(LLMStatusCode::LLM_EXIST_LINK)};
    m.listening[process] = role == LLMRole::PROMPT && (listen || m.listening[process]);
    if (process == 0) m.prompt_role = role == LLMRole::PROMPT;
    return {};
  }
  void call(const Model&, Sut& s, Results&) const override {
    std::map<std::string, std::string> options;
    if (listen) {
      options[impl::kOptionListenIpInfo] =
          s.h.platform().device_ip(device_of(process)) + ":" + std::to_string(sim::kListenPort);
    }
    s.dists[static_cast<std::size_t>(process)]->switch_role(role, options);
  }
  void show(std::ostream& os) const override {
    os << "c" << cluster_of(process) << ".switch_role(" << role_name(role)
       << (listen ? ", {listenIpInfo: own device}" : "") << ")";
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
    if (m.v1 && !m.prompt_role) return {param_invalid()};  // §3.1 item 1: v1 needs PROMPT
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
        if (m.linked[p]) t.v1_links.emplace_back(p, m.link_generation[p]);
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
      if (!m.linked[m.caches[static_cast<std::size_t>(c.dst)].process]) {
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

/// The handle of the first cache of the prompt's (remote-accessible) table of `peer` matching
/// `ok`, or -1. Reads the table if this is the link's first access.
int table_find(Model& m, int peer, const std::function<bool(const ModelCache&)>& ok) {
  for (int h : m.table_of(peer)) {
    if (ok(m.caches[static_cast<std::size_t>(h)])) return h;
  }
  return -1;
}

/// Whether the prompt's table of `peer` holds `handle` (reading the table if not yet).
bool in_table(Model& m, int peer, int handle) {
  const std::vector<int>& table = m.table_of(peer);
  return std::find(table.begin(), table.end(), handle) != table.end();
}

/// pull_cache by CacheKeyByIdAndIndex (a remote cache's row) or by CacheKey (a keyed row, which the
/// pull uses up on the remote side).
struct PullCache : ApiCommand {
  int local;
  std::optional<ModelKey> key;  ///< by CacheKey, else by id
  int remote = -1;              ///< by id
  int remote_row = 0;           ///< by id
  int local_row;
  explicit PullCache(const Model& m)
      : local(pick_cache(
            m, [](const ModelCache& c) { return c.process == 0; },
            [](const ModelCache& c) { return c.live && !c.blocks; })),
        local_row(gen_index(m)) {
    mostly_linked(m);
    if (*rc::gen::weightedElement<bool>({{m.remote ? 1 : 6, true}, {4, false}})) {
      key = pick_pull_key(m);
    } else {
      remote = pick_pull_source(m);
      remote_row = gen_index(m);
    }
  }
  void checkPreconditions(const Model& m) const override {
    RC_PRE(on(m, local, true) && (key || on(m, remote, false)));
  }
  Expect effect(Model& m) const override {
    const ModelCache& l = m.caches[static_cast<std::size_t>(local)];
    if (key && m.remote) return {CallOutcome{CallOutcome::Kind::kTypeError}};
    if (l.blocks) return {param_invalid()};
    // Exactly one of req_id / prefix_id must be valid (§2.2).
    if (key && (key->req >= 0) == (key->prefix >= 0)) return {param_invalid()};
    if (!l.live) return {llm_outcome(LLMStatusCode::LLM_KV_CACHE_NOT_EXIST)};
    const int peer =
        key ? key->cluster_process : m.caches[static_cast<std::size_t>(remote)].process;
    if (!m.linked[peer]) return {llm_outcome(LLMStatusCode::LLM_NOT_YET_LINK)};
    if (m.v1 && m.strict && m.v1_transfer_on_link(peer)) {
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
      if (!in_table(m, peer, remote)) return {llm_outcome(LLMStatusCode::LLM_KV_CACHE_NOT_EXIST)};
    } else if (!m.caches[static_cast<std::size_t>(src)].live) {
      return {llm_outcome(LLMStatusCode::LLM_KV_CACHE_NOT_EXIST)};
    }
    if (m.caches[static_cast<std::size_t>(src)].blocks || row >= m.rows || local_row >= m.rows) {
      return {param_invalid()};
    }
    if (l.host != m.caches[static_cast<std::size_t>(src)].host && !m.staging) {
      return {llm_outcome(LLMStatusCode::LLM_FEATURE_NOT_ENABLED)};  // §4: D2H/H2D need the pool
    }
    m.copy_rows(src, row, local, local_row, 0, m.tensors());
    if (key) m.remove_key(peer, *key);
    return {};
  }
  void call(const Model& m, Sut& s, Results&) const override {
    const impl::CacheView& l = s.views[static_cast<std::size_t>(local)];
    if (key) {
      s.pull_cache(key->real(), l, local_row);
      return;
    }
    s.pull_cache(
        impl::CacheKeyByIdAndIndex(cluster_of(m.caches[static_cast<std::size_t>(remote)].process),
                                   s.views[static_cast<std::size_t>(remote)].cache_id, remote_row),
        l, local_row);
  }
  void show(std::ostream& os) const override {
    os << "c1.pull_cache(";
    if (key) {
      showValue(*key, os);
    } else {
      os << "CacheKeyByIdAndIndex(#" << remote << ", " << remote_row << ")";
    }
    os << ", #" << local << ", batch_index " << local_row << ")";
  }
};

/// (decoder, model_id) of a BlocksCacheKey: mostly (4 in 5) that of a keyed blocks cache
/// satisfying `ok` on a linked decoder, when there is one.
std::pair<int, int> pick_blocks_key(const Model& m,
                                    const std::function<bool(const ModelCache&)>& ok) {
  std::vector<std::pair<int, int>> targets;
  for (const ModelCache& c : m.caches) {
    if (c.process != 0 && m.linked[c.process] && c.blocks && c.blocks_key && ok(c)) {
      targets.emplace_back(c.process, *c.blocks_key);
    }
  }
  if (!targets.empty() && *rc::gen::weightedElement<bool>({{4, true}, {1, false}})) {
    return *rc::gen::elementOf(targets);
  }
  return {*rc::gen::inRange(1, kProcesses), *rc::gen::inRange(0, 2)};
}

/// pull_blocks by CacheKeyByIdAndIndex (a remote row into local blocks) or BlocksCacheKey (B2B).
struct PullBlocks : ApiCommand {
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
      : local(pick_cache(
            m, [](const ModelCache& c) { return c.process == 0; },
            [](const ModelCache& c) { return c.live && c.blocks; })),
        by_blocks_key(*rc::gen::arbitrary<bool>()) {
    const int n = *rc::gen::inRange(1, 3);
    mostly_linked(m);
    // Distinct destination blocks in [0, rows]: destinations of one batch never overlap.
    dst_blocks.push_back(gen_index(m));
    if (n == 2) {
      const int other = *rc::gen::inRange(0, m.rows);
      dst_blocks.push_back(other >= dst_blocks[0] ? other + 1 : other);
    }
    if (by_blocks_key) {
      std::tie(peer, model_id) = pick_blocks_key(m, [](const ModelCache& c) { return c.live; });
      for (int i = 0; i < n; ++i) src_blocks.push_back(gen_index(m));
    } else if (*rc::gen::weightedElement<bool>({{m.remote ? 1 : 3, true}, {4, false}})) {
      key = pick_pull_key(m);
    } else {
      remote = pick_pull_source(m);
      remote_row = gen_index(m);
    }
  }
  void checkPreconditions(const Model& m) const override {
    RC_PRE(on(m, local, true) && (by_blocks_key || key || on(m, remote, false)));
  }
  Expect effect(Model& m) const override {
    const ModelCache& l = m.caches[static_cast<std::size_t>(local)];
    if (!l.blocks) return {param_invalid()};
    if (key && (key->req >= 0) == (key->prefix >= 0)) return {param_invalid()};
    if (!l.live) return {llm_outcome(LLMStatusCode::LLM_KV_CACHE_NOT_EXIST)};
    const int process = by_blocks_key ? peer
                        : key         ? key->cluster_process
                                      : m.caches[static_cast<std::size_t>(remote)].process;
    if (!m.linked[process]) return {llm_outcome(LLMStatusCode::LLM_NOT_YET_LINK)};
    if (m.v1 && m.strict && m.v1_transfer_on_link(process)) {
      return {llm_outcome(LLMStatusCode::LLM_LINK_BUSY)};  // kLinkCallOverlap (§3.5 v1)
    }
    int src = remote;
    int row = remote_row;
    if (key) {
      // Remote-accessible mode reads the table (the link's first access counts) but finds no
      // CacheKey there.
      if (m.remote) (void)m.table_of(process);
      const auto found = m.remote ? std::nullopt : m.find_key(process, *key);
      if (!found) return {llm_outcome(LLMStatusCode::LLM_KV_CACHE_NOT_EXIST)};
      std::tie(src, row) = *found;
    } else if (m.remote) {
      // The table as read at the link's first access: a BlocksCacheKey names the first blocks
      // cache with its model_id (§3.4); caches unregistered since still answer.
      src = by_blocks_key ? table_find(m, process,
                                       [&](const ModelCache& c) {
                                         return c.blocks && c.blocks_key == model_id;
                                       })
                          : (in_table(m, process, remote) ? remote : -1);
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
    if (from.host != l.host && !m.staging) {
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
      s.pull_blocks(impl::BlocksCacheKey{cluster_of(peer), static_cast<std::uint64_t>(model_id)},
                    s.views[static_cast<std::size_t>(local)], src, dst);
    } else if (key) {
      s.pull_blocks(key->real(), s.views[static_cast<std::size_t>(local)], {}, dst);
    } else {
      s.pull_blocks(impl::CacheKeyByIdAndIndex(
                        cluster_of(m.caches[static_cast<std::size_t>(remote)].process),
                        s.views[static_cast<std::size_t>(remote)].cache_id, remote_row),
                    s.views[static_cast<std::size_t>(local)], {}, dst);
    }
  }
  void show(std::ostream& os) const override {
    os << "c1.pull_blocks(";
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
  if (!m.linked[peer]) return llm_outcome(LLMStatusCode::LLM_NOT_YET_LINK);
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
  mostly_linked(m);
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
            [&m](const ModelCache& c) { return pushable(false)(c) && m.linked[c.process]; })),
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
            m, s, peer, [&](Model& mm) { return in_table(mm, peer, dst) ? dst : -1; }, to)) {
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
    std::tie(peer, model_id) = pick_blocks_key(m, pushable(true));
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
              return table_find(mm, peer, [&](const ModelCache& c) {
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

RC_GTEST_PROP(ApiState, EveryStatusAndEveryByteAgreesWithTheModel, ()) {
  // One generated value, so that a counterexample shows the case's shape and modes in one line.
  const Model initial = *rc::gen::exec([] {
    Model m;
    m.layers = *rc::gen::weightedElement<int>({{1, 1}, {2, 2}, {2, 3}});
    m.rows = *rc::gen::inRange(1, 4);
    m.width = 64 * *rc::gen::inRange(1, 9);
    m.remote = *rc::gen::arbitrary<bool>();
    m.strict = *rc::gen::weightedElement<bool>({{3, false}, {1, true}});
    m.staging = *rc::gen::arbitrary<bool>();
    m.v1 = *rc::gen::weightedElement<bool>({{4, false}, {1, true}});
    if (m.v1) m.remote = false;
    return m;
  });
  // Up to 71 commands per case; each command's arguments are drawn at full size, so that choices
  // among processes, caches and rows are not biased to the first ones.
  const auto one = rc::state::gen::execOneOfWithArgs<
      RegisterCache, RegisterCache, RegisterCache, RegisterCache, UnregisterCache, AllocateCache,
      AllocateCache, DeallocateCache, DeallocateCache, RemoveCacheKey, PullCache, PullCache, Link,
      Link, Unlink, TransferLayerwise, TransferLayerwise, ReleaseLayer, ReleaseLayer, ReleaseLayer,
      FailLayer, WaitTask, WaitTask, PullCache, PullCache, PullBlocks, PullBlocks, PushCache,
      PushCache, PushCache, PushBlocks, PushBlocks, PushBlocks, SwitchRole>();
  const auto commands = *rc::gen::resize(
      70, rc::state::gen::commands(initial,
                                   [one](const Model& m) { return rc::gen::resize(100, one(m)); }));
  Sut sut;
  sut.v1 = initial.v1;
  for (int p = 0; p < kProcesses; ++p) {
    std::map<std::string, std::string> options = {{impl::kOptionEnableSwitchRole, "1"}};
    if (initial.has_pool(p)) {
      const bool big = p == 0 && initial.staging;
      options[impl::kOptionMemPoolConfig] = big ? R"({"memory_size": 134217728, "page_shift": 10})"
                                                : R"({"memory_size": 4194304, "page_shift": 10})";
      options[impl::kOptionHostMemPoolConfig] = R"({"memory_size": 4194304, "page_shift": 10})";
    }
    if (initial.remote) options[impl::kOptionEnableRemoteCacheAccessible] = "1";
    if (initial.strict) options[impl::kOptionKvsimStrict] = "1";
    if (initial.v1) options[impl::kOptionEnableCacheManager] = "0";
    sut.dists.push_back(sut.h.make_dist(p == 0 ? LLMRole::PROMPT : LLMRole::DECODER, cluster_of(p),
                                        device_of(p), p != 0, options));
  }
  rc::state::runAll(commands, initial, sut);
}

}  // namespace
}  // namespace kvsim::properties
