// Property 4, the whole API as a state machine (spec §3, §4): rc::state commands over one prompt
// process (cluster 1, device 0, with a device pool) and two decoders (cluster 2 on device 8 over
// RoCE, cluster 3 on device 1 over HCCS): register/unregister, allocate/deallocate, link/unlink,
// transfer_cache_async with a gated synchronizer whose layers the commands release or fail one at
// a time (the interleavings), synchronize/get_results with timeouts, pull_cache, pull_blocks and
// switch_role. A pure reference model predicts every call's status or exception and the bytes of
// every live cache; both are checked after each command.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>
#include <rapidcheck/state.h>

#include <algorithm>
#include <sstream>

#include "properties/prop_support.h"
#include "sim/engine_setup.h"

namespace kvsim::properties {
namespace {

using impl::LLMRole;
using Results = std::vector<std::optional<LLMStatusCode>>;
using Bytes = std::vector<std::uint8_t>;

constexpr int kProcesses = 3;  ///< index 0: prompt cluster 1; 1, 2: decoders 2, 3

std::uint64_t cluster_of(int process) {
  return static_cast<std::uint64_t>(process + 1);
}
int device_of(int process) {
  return process == 0 ? 0 : process == 1 ? 8 : 1;
}
const char* role_name(LLMRole r) {
  return r == LLMRole::PROMPT ? "PROMPT" : r == LLMRole::DECODER ? "DECODER" : "MIX";
}

/// A cache as the model sees it; its index is the handle commands name it by.
struct ModelCache {
  int process = 0;
  bool blocks = false;     ///< a blocks cache: `rows` blocks of `width` bytes
  bool allocated = false;  ///< from the pool (allocate_*) rather than register_*
  bool live = true;        ///< not yet unregistered / deallocated
  bool remote_accessible = false;
  std::optional<int> blocks_key{};  ///< model_id of its BlocksCacheKey(own cluster, model_id)
  std::vector<Bytes> tensors{};
};

struct ModelConfig {
  int dst = 0;  ///< handle of a decoder cache; its process gives dst_cluster_id
  int start = 0;
  int stop = 1;
  int src_row = 0;
  int dst_row = 0;
};

/// An in-flight or finished transfer_cache_async task.
struct ModelTask {
  int src = 0;
  std::vector<ModelConfig> configs{};
  int next_layer = 0;  ///< the layer whose synchronize_layer is waiting (when !done)
  bool done = false;
  std::map<std::uint64_t, LLMStatusCode> slots{};
};

struct Model {
  int layers = 1;
  int rows = 1;
  int width = 64;
  std::vector<ModelCache> caches{};
  std::vector<ModelTask> tasks{};
  bool linked[kProcesses] = {false, false, false};  ///< prompt <-> decoder (index 1, 2)
  bool listening[kProcesses] = {false, true, true};

  int tensors() const { return 2 * layers; }
  std::uint64_t tensor_bytes() const { return static_cast<std::uint64_t>(rows * width); }
  bool any_link(int process) const {
    return process == 0 ? linked[1] || linked[2] : linked[process];
  }
  bool has(int handle) const {
    return handle >= 0 && static_cast<std::size_t>(handle) < caches.size();
  }
  /// Pattern seed of tensor t of the cache with this handle.
  static std::uint64_t seed(int handle, int t) {
    return 1000 + 16 * static_cast<std::uint64_t>(handle) + static_cast<std::uint64_t>(t);
  }
  ModelCache fresh(int process, bool blocks, bool allocated) const {
    ModelCache c;
    c.process = process;
    c.blocks = blocks;
    c.allocated = allocated;
    c.remote_accessible = !any_link(process);
    const int handle = static_cast<int>(caches.size());
    for (int t = 0; t < tensors(); ++t)
      c.tensors.push_back(pattern(tensor_bytes(), seed(handle, t)));
    return c;
  }
  /// Copies `width` bytes of every tensor from (src, row s) to (dst, row d), if dst is live.
  void copy_rows(int src, int s, int dst, int d, int first_tensor, int count) {
    if (!caches[static_cast<std::size_t>(dst)].live) return;
    for (int t = first_tensor; t < first_tensor + count; ++t) {
      const Bytes& from =
          caches[static_cast<std::size_t>(src)].tensors[static_cast<std::size_t>(t)];
      Bytes& to = caches[static_cast<std::size_t>(dst)].tensors[static_cast<std::size_t>(t)];
      std::copy_n(from.begin() + s * width, width, to.begin() + d * width);
    }
  }
};

void showValue(const Model& m, std::ostream& os) {
  os << "caches of " << m.tensors() << " tensors, shape [" << m.rows << ", " << m.width << "] INT8";
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
  impl::CacheManager& cm(int process) {
    return dists[static_cast<std::size_t>(process)]->cache_manager();
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

struct RegisterCache : ApiCommand {
  int process;
  bool blocks;
  std::optional<int> key;
  explicit RegisterCache(const Model&)
      : process(*rc::gen::inRange(0, kProcesses)),
        blocks(*rc::gen::arbitrary<bool>()),
        key(blocks && *rc::gen::arbitrary<bool>() ? std::optional<int>(*rc::gen::inRange(0, 2))
                                                  : std::nullopt) {}
  Expect effect(Model& m) const override {
    if (key) {
      for (const ModelCache& c : m.caches) {
        if (c.live && c.process == process && c.blocks_key == key) {
          return {llm_outcome(LLMStatusCode::LLM_FAILED)};  // LLM_CACHE_KEY_ALREADY_EXIST
        }
      }
    }
    ModelCache c = m.fresh(process, blocks, false);
    c.blocks_key = key;
    m.caches.push_back(std::move(c));
    return {};
  }
  void call(const Model& m, Sut& s, Results&) const override {
    const int handle = static_cast<int>(m.caches.size());
    const impl::CacheDesc desc(m.tensors(), {m.rows, m.width}, impl::DataType::DT_INT8);
    std::vector<std::uint64_t> addrs;
    for (int t = 0; t < m.tensors(); ++t) {
      addrs.push_back(s.h.alloc(device_of(process), m.tensor_bytes(), Model::seed(handle, t)));
    }
    impl::CacheView v = blocks
                            ? s.cm(process).register_blocks_cache(
                                  desc, addrs,
                                  key ? std::optional<impl::BlocksCacheKey>(impl::BlocksCacheKey{
                                            cluster_of(process), static_cast<std::uint64_t>(*key)})
                                      : std::nullopt)
                            : s.cm(process).register_cache(desc, addrs);
    s.views.push_back(std::move(v));
  }
  void show(std::ostream& os) const override {
    os << "#new = c" << cluster_of(process) << "."
       << (blocks ? "register_blocks_cache" : "register_cache") << "(";
    if (key) os << "BlocksCacheKey(" << cluster_of(process) << ", " << *key << ")";
    os << ")";
  }
};

struct AllocateCache : ApiCommand {
  bool blocks;
  explicit AllocateCache(const Model&) : blocks(*rc::gen::arbitrary<bool>()) {}
  Expect effect(Model& m) const override {
    m.caches.push_back(m.fresh(0, blocks, true));
    return {};
  }
  void call(const Model& m, Sut& s, Results&) const override {
    const int handle = static_cast<int>(m.caches.size());
    const impl::CacheDesc desc(m.tensors(), {m.rows, m.width}, impl::DataType::DT_INT8);
    impl::CacheView v = blocks ? s.cm(0).allocate_blocks_cache(desc) : s.cm(0).allocate_cache(desc);
    for (int t = 0; t < m.tensors(); ++t) {
      s.h.write(v.tensor_addrs[static_cast<std::size_t>(t)],
                pattern(m.tensor_bytes(), Model::seed(handle, t)));
    }
    s.views.push_back(std::move(v));
  }
  void show(std::ostream& os) const override {
    os << "#new = c1." << (blocks ? "allocate_blocks_cache" : "allocate_cache") << "()";
  }
};

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

/// A row or block index, past the end in 1 case of 10.
int gen_index(const Model& m) {
  return *rc::gen::weightedOneOf<int>(
      {{9, rc::gen::inRange(0, m.rows)}, {1, rc::gen::just(m.rows)}});
}

struct UnregisterCache : ApiCommand {
  int handle;
  explicit UnregisterCache(const Model& m)
      : handle(pick_cache(m, [](const ModelCache&) { return true; })) {}
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
      : handle(pick_cache(m, [](const ModelCache& c) { return c.process == 0; })) {}
  void checkPreconditions(const Model& m) const override {
    const bool ok = m.has(handle) && m.caches[static_cast<std::size_t>(handle)].process == 0;
    RC_PRE(ok);
  }
  Expect effect(Model& m) const override {
    ModelCache& c = m.caches[static_cast<std::size_t>(handle)];
    if (!c.live) return {};  // a missing cache is a no-op (§4)
    if (!c.allocated) return {param_invalid()};
    c.live = false;
    return {};
  }
  void call(const Model& m, Sut& s, Results&) const override {
    const impl::CacheView& v = s.views[static_cast<std::size_t>(handle)];
    if (m.caches[static_cast<std::size_t>(handle)].blocks) {
      s.cm(0).deallocate_blocks_cache(v);
    } else {
      s.cm(0).deallocate_cache(v);
    }
  }
  void show(std::ostream& os) const override { os << "deallocate(#" << handle << ")"; }
};

struct Link : ApiCommand {
  int peer;
  explicit Link(const Model&) : peer(*rc::gen::inRange(1, kProcesses)) {}
  Expect effect(Model& m) const override {
    if (m.linked[peer]) return {llm_outcome(LLMStatusCode::LLM_ALREADY_LINK)};
    if (!m.listening[peer]) return {llm_outcome(LLMStatusCode::LLM_LINK_FAILED)};
    m.linked[peer] = true;
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
  explicit Unlink(const Model&) : peer(*rc::gen::inRange(1, kProcesses)) {}
  Expect effect(Model& m) const override {
    if (!m.linked[peer]) return {llm_outcome(LLMStatusCode::LLM_NOT_YET_LINK)};
    m.linked[peer] = false;
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

/// The first layer at or after `from` that some config of `t` covers, or -1.
int next_covered(const ModelTask& t, int from, int layers) {
  for (int layer = from; layer < layers; ++layer) {
    for (const ModelConfig& c : t.configs) {
      if (c.start <= layer && layer < c.stop) return layer;
    }
  }
  return -1;
}

struct TransferLayerwise : ApiCommand {
  int src;
  std::vector<ModelConfig> configs;
  explicit TransferLayerwise(const Model& m)
      : src(pick_cache(m, [](const ModelCache& c) { return c.process == 0 && !c.blocks; })) {
    std::vector<int> dsts;
    for (std::size_t i = 0; i < m.caches.size(); ++i) {
      if (m.caches[i].process != 0) dsts.push_back(static_cast<int>(i));
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
      ok = ok && m.has(c.dst) && m.caches[static_cast<std::size_t>(c.dst)].process != 0;
    }
    RC_PRE(ok);
  }
  Expect effect(Model& m) const override {
    ModelTask t;
    t.src = src;
    t.configs = configs;
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
    s.gates.push_back(gate);
    s.tasks.push_back(
        s.cm(0).transfer_cache_async(s.views[static_cast<std::size_t>(src)], gate, list));
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
        r.emplace_back(LLMStatusCode::LLM_TIMEOUT);
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

struct PullCache : ApiCommand {
  int local;
  int remote;
  int remote_row;
  int local_row;
  explicit PullCache(const Model& m)
      : local(pick_cache(
            m, [](const ModelCache& c) { return c.process == 0; },
            [](const ModelCache& c) { return c.live && !c.blocks; })),
        remote(pick_cache(
            m, [](const ModelCache& c) { return c.process != 0; },
            [](const ModelCache& c) { return c.live && !c.blocks; })),
        remote_row(gen_index(m)),
        local_row(gen_index(m)) {}
  void checkPreconditions(const Model& m) const override {
    const bool ok = m.has(local) && m.has(remote);
    RC_PRE(ok);
  }
  Expect effect(Model& m) const override {
    const ModelCache& l = m.caches[static_cast<std::size_t>(local)];
    const ModelCache& r = m.caches[static_cast<std::size_t>(remote)];
    if (l.blocks) return {param_invalid()};
    if (!l.live) return {llm_outcome(LLMStatusCode::LLM_KV_CACHE_NOT_EXIST)};
    if (!m.linked[r.process]) return {llm_outcome(LLMStatusCode::LLM_NOT_YET_LINK)};
    if (!r.live) return {llm_outcome(LLMStatusCode::LLM_KV_CACHE_NOT_EXIST)};
    if (r.blocks || remote_row >= m.rows || local_row >= m.rows) return {param_invalid()};
    m.copy_rows(remote, remote_row, local, local_row, 0, m.tensors());
    return {};
  }
  void call(const Model& m, Sut& s, Results&) const override {
    s.cm(0).pull_cache(
        impl::CacheKeyByIdAndIndex(cluster_of(m.caches[static_cast<std::size_t>(remote)].process),
                                   s.views[static_cast<std::size_t>(remote)].cache_id, remote_row),
        s.views[static_cast<std::size_t>(local)], local_row);
  }
  void show(std::ostream& os) const override {
    os << "c1.pull_cache(CacheKeyByIdAndIndex(#" << remote << ", " << remote_row << "), #" << local
       << ", batch_index " << local_row << ")";
  }
};

/// pull_blocks by CacheKeyByIdAndIndex (a remote row into local blocks) or BlocksCacheKey (B2B).
struct PullBlocks : ApiCommand {
  int local;
  bool by_blocks_key;
  int remote = -1;     ///< by id: the remote cache
  int peer = 1;        ///< by key: the remote process
  int model_id = 0;    ///< by key
  int remote_row = 0;  ///< by id
  std::vector<int> src_blocks;
  std::vector<int> dst_blocks;
  explicit PullBlocks(const Model& m)
      : local(pick_cache(
            m, [](const ModelCache& c) { return c.process == 0; },
            [](const ModelCache& c) { return c.live && c.blocks; })),
        by_blocks_key(*rc::gen::arbitrary<bool>()) {
    const int n = *rc::gen::inRange(1, 3);
    // Distinct destination blocks in [0, rows]: destinations of one batch never overlap.
    dst_blocks.push_back(gen_index(m));
    if (n == 2) {
      const int other = *rc::gen::inRange(0, m.rows);
      dst_blocks.push_back(other >= dst_blocks[0] ? other + 1 : other);
    }
    if (by_blocks_key) {
      peer = *rc::gen::inRange(1, kProcesses);
      model_id = *rc::gen::inRange(0, 2);
      for (int i = 0; i < n; ++i) src_blocks.push_back(gen_index(m));
    } else {
      remote = pick_cache(
          m, [](const ModelCache& c) { return c.process != 0; },
          [](const ModelCache& c) { return c.live && !c.blocks; });
      remote_row = gen_index(m);
    }
  }
  void checkPreconditions(const Model& m) const override {
    const bool ok = m.has(local) && (by_blocks_key || m.has(remote));
    RC_PRE(ok);
  }
  Expect effect(Model& m) const override {
    const ModelCache& l = m.caches[static_cast<std::size_t>(local)];
    if (!l.blocks) return {param_invalid()};
    if (!l.live) return {llm_outcome(LLMStatusCode::LLM_KV_CACHE_NOT_EXIST)};
    const int process = by_blocks_key ? peer : m.caches[static_cast<std::size_t>(remote)].process;
    if (!m.linked[process]) return {llm_outcome(LLMStatusCode::LLM_NOT_YET_LINK)};
    int src = remote;
    if (by_blocks_key) {
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
    if (remote_row >= m.rows || dst_blocks.size() > 1) return {param_invalid()};
    m.copy_rows(src, remote_row, local, dst_blocks[0], 0, m.tensors());
    return {};
  }
  void call(const Model& m, Sut& s, Results&) const override {
    const std::vector<std::int64_t> dst(dst_blocks.begin(), dst_blocks.end());
    if (by_blocks_key) {
      const std::vector<std::int64_t> src(src_blocks.begin(), src_blocks.end());
      s.cm(0).pull_blocks(
          impl::BlocksCacheKey{cluster_of(peer), static_cast<std::uint64_t>(model_id)},
          s.views[static_cast<std::size_t>(local)], src, dst);
    } else {
      s.cm(0).pull_blocks(impl::CacheKeyByIdAndIndex(
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
    } else {
      os << "CacheKeyByIdAndIndex(#" << remote << ", " << remote_row << "), #" << local;
    }
    os << ", dst_blocks [";
    for (std::size_t i = 0; i < dst_blocks.size(); ++i) os << (i ? " " : "") << dst_blocks[i];
    os << "])";
  }
};

RC_GTEST_PROP(ApiState, EveryStatusAndEveryByteAgreesWithTheModel, ()) {
  Model initial;
  initial.layers = *rc::gen::inRange(1, 4);
  initial.rows = *rc::gen::inRange(1, 4);
  initial.width = 64 * *rc::gen::inRange(1, 9);
  // Up to 31 commands per case; each command's arguments are drawn at full size, so that choices
  // among processes, caches and rows are not biased to the first ones.
  const auto one = rc::state::gen::execOneOfWithArgs<
      RegisterCache, RegisterCache, UnregisterCache, AllocateCache, DeallocateCache, Link, Link,
      Unlink, TransferLayerwise, TransferLayerwise, ReleaseLayer, ReleaseLayer, ReleaseLayer,
      FailLayer, WaitTask, WaitTask, PullCache, PullCache, PullBlocks, PullBlocks, SwitchRole>();
  const auto commands = *rc::gen::resize(
      30, rc::state::gen::commands(initial,
                                   [one](const Model& m) { return rc::gen::resize(100, one(m)); }));
  RC_LOG() << rc::toString(initial) << "\n";
  Sut sut;
  const std::map<std::string, std::string> switchable = {{impl::kOptionEnableSwitchRole, "1"}};
  std::map<std::string, std::string> prompt = switchable;
  prompt[impl::kOptionMemPoolConfig] = R"({"memory_size": 4194304, "page_shift": 10})";
  sut.dists.push_back(sut.h.make_dist(LLMRole::PROMPT, 1, device_of(0), false, prompt));
  for (int p = 1; p < kProcesses; ++p) {
    sut.dists.push_back(
        sut.h.make_dist(LLMRole::DECODER, cluster_of(p), device_of(p), true, switchable));
  }
  rc::state::runAll(commands, initial, sut);
}

}  // namespace
}  // namespace kvsim::properties
