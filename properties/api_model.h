// The pure reference model of property 4 (api_state_prop.cpp): what the prompt process and the two
// decoders hold (caches, keys, roles, listen addresses, the sides of links each holds, the remote
// cache tables of remote-accessible mode, tasks) and the bookkeeping rules that several commands
// share. The per-call rules live in the commands.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <utility>
#include <vector>

#include "impl/status.h"
#include "impl/types.h"
#include "properties/engine_rules.h"

namespace kvsim::properties::api_model {

using impl::LLMStatusCode;
using Bytes = std::vector<std::uint8_t>;

inline constexpr int kProcesses = 3;  ///< index 0: prompt cluster 1; 1, 2: decoders 2, 3

/// The cluster id of process 0, 1, 2: 1, 2, 3.
inline std::uint64_t cluster_of(int process) {
  return static_cast<std::uint64_t>(process + 1);
}
/// The device of process 0, 1, 2: 0 (node 0), 8 (node 1, RoCE), 1 (node 0, HCCS).
inline int device_of(int process) {
  return process == 0 ? 0 : process == 1 ? 8 : 1;
}

/// A CacheKey(cluster, req_id, model_id 0, prefix_id); -1 stands for the invalid id 2**64-1.
struct ModelKey {
  int cluster_process = 0;
  int req = -1;
  int prefix = -1;
  bool placeholder() const { return req < 0 && prefix < 0; }
  impl::CacheKey real() const {
    const auto id = [](int v) { return v < 0 ? impl::kInvalidId : static_cast<std::uint64_t>(v); };
    return impl::CacheKey{cluster_of(cluster_process), id(req), 0, id(prefix)};
  }
  friend bool operator==(const ModelKey& a, const ModelKey& b) {
    return a.cluster_process == b.cluster_process && a.req == b.req && a.prefix == b.prefix;
  }
};

/// Readable keys and model in counterexamples.
void showValue(const ModelKey& k, std::ostream& os);

/// A cache as the model sees it; its index is the handle commands name it by.
struct ModelCache {
  int process = 0;
  bool blocks = false;     ///< a blocks cache: `rows` blocks of `width` bytes
  bool allocated = false;  ///< from the pool (allocate_*) rather than register_*
  bool live = true;        ///< not yet unregistered / deallocated
  /// Deallocated while some row kept a key: invisible locally, still pulled by key, freed with
  /// the last key (§4 deferred release).
  bool pending = false;
  bool remote_accessible = false;
  bool host = false;                ///< placement HOST (else DEVICE)
  std::optional<int> blocks_key{};  ///< model_id of its BlocksCacheKey(own cluster, model_id)
  std::vector<std::optional<ModelKey>> row_keys{};  ///< by row; placeholders are nullopt
  std::vector<Bytes> tensors{};
  /// Whether some row still carries a key.
  bool has_keys() const {
    return std::any_of(row_keys.begin(), row_keys.end(),
                       [](const auto& k) { return k.has_value(); });
  }
};

/// One TransferConfig of a task: layers [start, stop) of a prompt cache's row to a decoder row.
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
  /// v1: (decoder, generation) of each side of the prompt its configs named when it started.
  std::vector<std::pair<int, int>> v1_links{};
};

/// Where a process listens: at the address it was initialized with, or at the other one a
/// switch_role may move it to (both on its node's host, ports 26000 + device and 27000 + device).
enum class Address { kInit, kMoved };

/// Everything the commands' rules read and write; copied per command, so plain values only.
struct Model {
  int layers = 1;
  int rows = 1;
  int width = 64;
  /// The generation options every process passes to init (each listens at its init address).
  engine_rules::InitOptions init{};
  /// What the rules make of `init` (engine_rules::init): the generation, remote-accessible caches
  /// (llm.EnableRemoteCacheAccessible in force), the hixl backend.
  bool v1 = false;
  bool remote = false;
  bool hixl = false;
  bool strict = false;  ///< kvsim.Strict=1 on every process
  /// The prompt's device pool is 128 MiB rather than 4 MiB: enough to stage D2H / H2D pulls (§4).
  bool staging = false;
  bool switch_role_option = false;  ///< llm.EnableSwitchRole=1 on every process (v1 needs it)
  impl::LLMRole role[kProcesses] = {impl::LLMRole::PROMPT, impl::LLMRole::DECODER,
                                    impl::LLMRole::DECODER};
  /// Where each process listens, if it does.
  std::optional<Address> listening[kProcesses] = {Address::kInit, Address::kInit, Address::kInit};
  /// linked[a][b]: process a holds a side (a Link) to process b. The comm backend gives both
  /// sides of a link_clusters a side; hixl the client only.
  bool linked[kProcesses][kProcesses] = {};
  /// Sides made so far from a to b: a v1 task counts on the side it started on (§3.5).
  int link_generation[kProcesses][kProcesses] = {};
  std::vector<ModelCache> caches{};
  std::vector<ModelTask> tasks{};
  /// Remote-accessible mode: a's table of b's caches (handles), read at the first access of a's
  /// side and never refreshed (§5).
  std::optional<std::vector<int>> table[kProcesses][kProcesses]{};
  /// Keys pulled or removed so far (generation reuses them: a used-up key must stay gone).
  std::vector<ModelKey> used_keys{};

  /// Whether `process` has a device pool: the prompt always, decoders outside remote-accessible
  /// mode (so that no push can write into pool memory that a later allocation reuses).
  bool has_pool(int process) const { return process == 0 || !remote; }
  /// Whether `process` can stage a D2H / H2D pull: a device pool of 100 MiB or more (§4).
  bool can_stage(int process) const { return process == 0 && staging; }
  /// a's table of b, read now if not yet.
  const std::vector<int>& table_of(int a, int b);
  /// Handle and row of the cache of `process` (live or pending) whose row carries `key`.
  std::optional<std::pair<int, int>> find_key(int process, const ModelKey& key) const;
  /// remove_cache_key on `process`: the key goes; a pending cache goes with its last key.
  void remove_key(int process, const ModelKey& key);
  /// A link_clusters from `client` to `server` succeeded: the sides it leaves (a new side
  /// replaces one the server still held for the client).
  void connect(int client, int server);
  /// v1: whether a task in flight counts on a's current side to b or on b's current side to a
  /// (a pull there overlaps it whichever end pulls, §3.5).
  bool v1_transfer_on_link(int a, int b) const;

  int tensors() const { return 2 * layers; }
  std::uint64_t tensor_bytes() const { return static_cast<std::uint64_t>(rows * width); }
  /// Whether `process` holds any side (its own link, or the server side of another's).
  bool any_link(int process) const {
    for (int q = 0; q < kProcesses; ++q) {
      if (linked[process][q]) return true;
    }
    return false;
  }
  bool has(int handle) const {
    return handle >= 0 && static_cast<std::size_t>(handle) < caches.size();
  }
  /// Pattern seed of tensor t of the cache with this handle.
  static std::uint64_t seed(int handle, int t) {
    return 1000 + 16 * static_cast<std::uint64_t>(handle) + static_cast<std::uint64_t>(t);
  }
  /// A new cache of `process` holding its creation pattern, remote accessible by the §4 default.
  ModelCache fresh(int process, bool blocks, bool allocated, bool host) const;
  /// Copies `width` bytes of `count` tensors from (src, row s, tensor st..) to (dst, row d,
  /// tensor dt..). A dead dst still takes them: registered memory outlives its cache, and a stale
  /// remote table may read it back.
  void copy_rows(int src, int s, int dst, int d, int st, int count, int dt);
  void copy_rows(int src, int s, int dst, int d, int first_tensor, int count) {
    copy_rows(src, s, dst, d, first_tensor, count, first_tensor);
  }
};

void showValue(const Model& m, std::ostream& os);

/// The first layer at or after `from` that some config of `t` covers, or -1.
int next_covered(const ModelTask& t, int from, int layers);

}  // namespace kvsim::properties::api_model
