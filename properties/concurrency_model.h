// The reference model of property 2: the concurrency rules of spec §3.4, §3.5 and §9 (one FIFO
// mutex per side of a link shared by per-layer transfers, pulls and unlink; one process-wide
// transfer mutex taken by every per-layer transfer, push layers included; transfer_cache_async's
// concurrent-call diagnostic and v1's pull-while-transfer diagnostic, LLM_LINK_BUSY in strict
// mode; v1's lock between link_clusters and unlink_clusters of a process, LLM_PROCESSING_LINK) and
// the link rules of the library (who holds which side of a link under the comm and the hixl
// backend, unlink with and without force, v1's roles) as a small discrete-event program over the
// operations of the prompt process and of its decoders (each process has its own transfer mutex,
// task count and link-operation lock; each side of a link its own mutex). Pure: no SystemC, no
// impl internals, only the public status codes and diagnostic kinds.
//
// What the rules do not decide comes in as input: how long the hardware takes to serve each
// posted batch and the round trip of a link handshake. Everything else (who waits for whom, the
// FIFO hand-over order, which link state each operation sees, every status and diagnostic) is
// the model's own. Simultaneous events are not ordered by the rules (the simulator runs them in
// delta cycles of its choosing), so the model takes such orders as choices and search() tries
// every one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "impl/diagnostics.h"
#include "impl/status.h"

namespace kvsim::properties::concurrency {

using impl::DiagnosticKind;
using impl::LLMStatusCode;
/// Simulated time in picoseconds (impl::Time).
using Time = std::uint64_t;

/// The operations of a program (each called by the prompt or by a decoder).
enum class OpKind { kTransfer, kPullCache, kPullBlocks, kPushCache, kPushBlocks, kLink, kUnlink };
/// "transfer_cache_async", "pull_cache", ...
const char* to_string(OpKind kind);

/// One call of the program.
struct OpSpec {
  OpKind kind = OpKind::kTransfer;
  /// The peer as the issuer names it (a decoder names the prompt): transfer_cache_async the dst
  /// cluster of each config, in config order; others one cluster.
  std::vector<int> clusters{};
  Time call = 0;        ///< when it is called
  Time sync_delay = 0;  ///< transfer_cache_async: duration of every synchronize_layer
  bool force = false;   ///< unlink_clusters(force=True): the server is not told
  /// 0 when the prompt calls it; a decoder's cluster when that decoder calls it toward the prompt,
  /// over its own side of the link (its own link mutex, transfer mutex, task count and v1
  /// link-operation lock).
  int issuer = 0;
};

/// A program and the settings the rules depend on. Every process listens at its own address, so
/// link_clusters and unlink_clusters always reach their server.
struct ProgramSpec {
  int prompt_cluster = 1;
  int layers = 1;  ///< every transfer and push sends layers [0, layers)
  bool strict = false;
  bool remote_accessible = false;  ///< llm.EnableRemoteCacheAccessible (push_* need it, §4)
  /// v1 KvCacheManager (§1): no push_*; the prompt (role PROMPT) transfers, decoders (role
  /// DECODER) link and pull; a pull and a task on one link are a forbidden overlap (§3.5); the
  /// wait-timeout code is LLM_WAIT_PROCESS_TIMEOUT.
  bool v1 = false;
  /// llm.TransferBackend "hixl" (v2): a link belongs to the client that made it, so A→B and B→A
  /// are separate links, and unlink never tells the server.
  bool hixl = false;
  Time sync_timeout = 0;  ///< llm.SyncKvCacheWaitTime
  /// v1: how long link_clusters / unlink_clusters wait for the one in progress before raising
  /// LLM_PROCESSING_LINK (their timeout, which v1 reads as microseconds).
  Time link_op_wait = 0;
  /// Links made before the program, as (client, server) clusters.
  std::vector<std::pair<int, int>> linked_at_start{};
  std::vector<OpSpec> ops{};
};

/// How the hardware served one posted batch.
struct BatchService {
  Time duration = 0;  ///< post → completion
  bool ok = true;
};

/// The durations the rules do not determine.
struct Durations {
  /// The k-th batch that operation `op` posts; nullopt when the run posted no such batch.
  std::function<std::optional<BatchService>(std::size_t op, std::size_t k)> batch;
  /// Round trip of one small message between the devices of two clusters.
  std::function<Time(int a, int b)> round_trip;
};

/// What one operation does.
struct OpOutcome {
  Time called = 0;
  Time ended = 0;
  /// The status the call raised as LLMException (LLM_SUCCESS: it returned); link_clusters and
  /// unlink_clusters: their overall code.
  LLMStatusCode raised = LLMStatusCode::LLM_SUCCESS;
  /// transfer_cache_async that started a task: get_results() (None as nullopt).
  std::vector<std::optional<LLMStatusCode>> results{};
};

/// One hold of a mutex ("transfer c1", "link c1->c2").
struct LockHold {
  std::string lock;
  std::size_t op = 0;
  Time requested = 0;
  Time acquired = 0;
  Time released = 0;
};

/// One posted batch.
struct BatchPost {
  std::size_t op = 0;
  std::size_t index = 0;  ///< k-th batch of the operation
  int layer = -1;         ///< transfer and push: the layer; pulls: -1 (all layers at once)
  int config = 0;         ///< transfer: the config
  int cluster = 0;
  Time posted = 0;
  Time finished = 0;       ///< when the hardware completes it
  bool ok = true;          ///< the hardware served it
  bool timed_out = false;  ///< its caller gave up at the deadline (the copy still lands)
};

/// One recorded diagnostic.
struct DiagnosticEvent {
  DiagnosticKind kind = DiagnosticKind::kConcurrentTransfer;
  Time time = 0;
  std::optional<std::uint64_t> peer{};
  std::size_t op = 0;
};

/// Everything the model predicts for one order of simultaneous events.
struct Prediction {
  std::vector<OpOutcome> ops{};
  std::vector<LockHold> holds{};
  std::vector<BatchPost> batches{};
  std::vector<DiagnosticEvent> diagnostics{};
  /// Batches the model posts that the run did not (their duration was taken as 0).
  std::size_t unobserved_batches = 0;
  /// Ops by end time (ties in index order).
  std::vector<std::size_t> completion_order() const;
};

/// The outcome of search().
struct SearchResult {
  std::optional<Prediction> match{};  ///< the first prediction `accept` took
  Prediction first{};                 ///< the prediction of the default order (FIFO)
  std::size_t runs = 0;
  bool exhausted = true;  ///< false: `limit` runs were reached before trying every order
};

/// Runs the model once per order of simultaneous events (default order first) until `accept`
/// takes a prediction or `limit` runs.
SearchResult search(const ProgramSpec& program, const Durations& durations,
                    const std::function<bool(const Prediction&)>& accept, std::size_t limit);

}  // namespace kvsim::properties::concurrency
