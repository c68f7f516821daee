#include "properties/concurrency_model.h"

#include <algorithm>
#include <deque>
#include <map>
#include <numeric>

namespace kvsim::properties::concurrency {

const char* to_string(OpKind kind) {
  switch (kind) {
    case OpKind::kTransfer:
      return "transfer_cache_async";
    case OpKind::kPullCache:
      return "pull_cache";
    case OpKind::kPullBlocks:
      return "pull_blocks";
    case OpKind::kPushCache:
      return "push_cache";
    case OpKind::kPushBlocks:
      return "push_blocks";
    case OpKind::kLink:
      return "link_clusters";
    case OpKind::kUnlink:
      return "unlink_clusters";
  }
  return "?";
}

std::vector<std::size_t> Prediction::completion_order() const {
  std::vector<std::size_t> order(ops.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return ops[a].ended < ops[b].ended; });
  return order;
}

namespace {

// Picks among simultaneous runnable threads: the recorded prefix first, then the oldest.
class Chooser {
 public:
  explicit Chooser(std::vector<std::size_t> prefix) : prefix_(std::move(prefix)) {}
  std::size_t choose(std::size_t n) {
    const std::size_t c = taken_.size() < prefix_.size() ? prefix_[taken_.size()] : 0;
    taken_.push_back(c);
    widths_.push_back(n);
    return c;
  }
  /// The next prefix in depth-first order, or nullopt after the last.
  std::optional<std::vector<std::size_t>> next() const {
    for (std::size_t j = taken_.size(); j-- > 0;) {
      if (taken_[j] + 1 < widths_[j]) {
        std::vector<std::size_t> p(taken_.begin(), taken_.begin() + static_cast<std::ptrdiff_t>(j));
        p.push_back(taken_[j] + 1);
        return p;
      }
    }
    return std::nullopt;
  }

 private:
  std::vector<std::size_t> prefix_;
  std::vector<std::size_t> taken_;
  std::vector<std::size_t> widths_;
};

// A FIFO mutex (platform.h: unlock hands ownership to the oldest waiter).
struct Mutex {
  std::string name;
  std::optional<std::size_t> owner{};
  std::deque<std::size_t> waiters{};
};

// One side of a link: the Link object a process holds for its peer (a relink makes a new one,
// with a new mutex). Under the comm backend both processes hold a side; under hixl only the
// client.
struct Link {
  int owner = 0;
  int peer = 0;
  std::size_t mutex = 0;
  bool up = true;
  int active_pulls = 0;      // v1: pulls between their overlap check and their return
  int active_transfers = 0;  // v1: tasks in flight that named this side at their call
};

// A simulated thread: an operation's caller, or the background job of a transfer_cache_async.
// `pc` is where it resumes; the rest are its locals.
struct Thread {
  std::size_t op = 0;
  bool job = false;
  int pc = 0;
  std::map<std::size_t, std::size_t> hold_of{};  // mutex → its open hold
  // Per-layer transfer (§3.4), shared by the transfer job and push_*.
  int layer = 0;
  std::size_t config = 0;
  Time layer_start = 0;
  std::optional<std::size_t> link{};
  LLMStatusCode status = LLMStatusCode::LLM_SUCCESS;
  std::size_t batches = 0;
  // link_clusters: whether this call may create the link after its handshake.
  bool candidate = false;
  std::size_t caller = 0;               // the job's caller thread
  std::vector<std::size_t> v1_links{};  // v1 job: the sides it counts as in flight on
  bool owns_link_op = false;            // v1 link/unlink: holds its process's link-operation lock
  bool waiting_link_op = false;         // v1 link/unlink: waits for it
  Time link_op_deadline = 0;
  bool counted_pull = false;  // v1 pull: counted in its side's active_pulls
};

constexpr int kDone = -1;

class Run {
 public:
  Run(const ProgramSpec& program, const Durations& durations, Chooser& chooser)
      : p_(program), d_(durations), chooser_(chooser) {
    transfer_mutex(p_.prompt_cluster);
    for (const auto& [client, server] : p_.linked_at_start) connect(client, server);
    out_.ops.resize(p_.ops.size());
    for (std::size_t i = 0; i < p_.ops.size(); ++i) {
      threads_.push_back(Thread{});
      threads_.back().op = i;
      timers_.emplace(p_.ops[i].call, i);
      out_.ops[i].called = p_.ops[i].call;
    }
  }

  Prediction run() {
    while (true) {
      if (ready_.empty()) {
        if (timers_.empty()) break;
        now_ = timers_.begin()->first;
        while (!timers_.empty() && timers_.begin()->first == now_) {
          ready_.push_back(timers_.begin()->second);
          timers_.erase(timers_.begin());
        }
        continue;
      }
      const std::size_t pick = ready_.size() > 1 ? chooser_.choose(ready_.size()) : 0;
      const std::size_t t = ready_[pick];
      ready_.erase(ready_.begin() + static_cast<std::ptrdiff_t>(pick));
      step(t);
    }
    return std::move(out_);
  }

 private:
  // The cluster of the process that calls `op`.
  int self(const OpSpec& op) const { return op.issuer == 0 ? p_.prompt_cluster : op.issuer; }
  int self_of(std::size_t t) const { return self(p_.ops[threads_[t].op]); }
  // v1 roles: the prompt is PROMPT, every decoder DECODER (the property never switches them).
  bool is_decoder(int cluster) const { return cluster != p_.prompt_cluster; }

  // A new side: `owner`'s Link to `peer`, with its own mutex.
  std::size_t new_side(int owner, int peer) {
    mutexes_.push_back({"link c" + std::to_string(owner) + "->c" + std::to_string(peer)});
    links_.push_back({owner, peer, mutexes_.size() - 1, true});
    sides_[{owner, peer}] = links_.size() - 1;
    return links_.size() - 1;
  }

  // Takes `owner`'s side to `peer` down, if it has one, without its mutex: the message that drops
  // it arrives while calls on that side may be under way (CommEntityManager::DestroyEntity).
  void drop_side(int owner, int peer) {
    const auto it = sides_.find({owner, peer});
    if (it == sides_.end()) return;
    links_[it->second].up = false;
    sides_.erase(it);
  }

  // The sides a successful link_clusters from `client` to `server` leaves. The comm backend
  // (hixl link_msg_handler.cc, LinkMsgHandler::LinkCluster → the server's ExchangeInfoProcess
  // with force_link set because the client holds no entity) gives the server a side too,
  // replacing one it still held for the client; the hixl backend
  // (hixl_transfer_engine.cc, HixlTransferEngine::LinkCluster) gives the client's only.
  void connect(int client, int server) {
    new_side(client, server);
    if (p_.hixl) return;
    drop_side(server, client);
    new_side(server, client);
  }

  // `owner`'s live side to `peer` (links exist between the prompt and its decoders only).
  std::optional<std::size_t> find_link(int owner, int peer) const {
    const auto it = sides_.find({owner, peer});
    if (it == sides_.end()) return std::nullopt;
    return it->second;
  }

  // The process-wide transfer mutex of a process.
  std::size_t transfer_mutex(int cluster) {
    const auto it = transfer_mutexes_.find(cluster);
    if (it != transfer_mutexes_.end()) return it->second;
    mutexes_.push_back({"transfer c" + std::to_string(cluster)});
    transfer_mutexes_[cluster] = mutexes_.size() - 1;
    return mutexes_.size() - 1;
  }

  // Takes `m` for thread `t`: true if it got it now, false if it queued (resumed when granted).
  bool lock(std::size_t t, std::size_t m) {
    Thread& th = threads_[t];
    out_.holds.push_back({mutexes_[m].name, th.op, now_, now_, 0});
    th.hold_of[m] = out_.holds.size() - 1;
    if (!mutexes_[m].owner) {
      mutexes_[m].owner = t;
      return true;
    }
    mutexes_[m].waiters.push_back(t);
    return false;
  }

  void unlock(std::size_t t, std::size_t m) {
    Thread& th = threads_[t];
    out_.holds[th.hold_of.at(m)].released = now_;
    th.hold_of.erase(m);
    Mutex& mx = mutexes_[m];
    if (mx.waiters.empty()) {
      mx.owner.reset();
      return;
    }
    const std::size_t w = mx.waiters.front();
    mx.waiters.pop_front();
    mx.owner = w;
    out_.holds[threads_[w].hold_of.at(m)].acquired = now_;
    ready_.push_back(w);
  }

  void sleep(std::size_t t, Time d) { timers_.emplace(now_ + d, t); }

  void finish(std::size_t t, LLMStatusCode raised) {
    Thread& th = threads_[t];
    if (th.counted_pull) --links_[*th.link].active_pulls;
    if (th.owns_link_op) {
      // The lock's end wakes every waiter of the process; the first to run takes it.
      const int me = self_of(t);
      th.owns_link_op = false;
      link_op_owner_.erase(me);
      for (std::size_t w : link_op_waiters_[me]) ready_.push_back(w);
      link_op_waiters_[me].clear();
    }
    th.pc = kDone;
    out_.ops[th.op].raised = raised;
    out_.ops[th.op].ended = now_;
  }

  void diagnose(std::size_t op, DiagnosticKind kind, std::optional<std::uint64_t> peer) {
    out_.diagnostics.push_back({kind, now_, peer, op});
  }

  // Posts the thread's next batch and sleeps until the hardware completes it or the deadline.
  void post(std::size_t t, int layer, int config, int cluster, Time deadline) {
    Thread& th = threads_[t];
    std::optional<BatchService> s = d_.batch(th.op, th.batches);
    if (!s) {
      ++out_.unobserved_batches;
      s = BatchService{};
    }
    BatchPost b{th.op, th.batches++,       layer, config, cluster,
                now_,  now_ + s->duration, s->ok, false};
    if (b.finished > deadline) {
      b.timed_out = true;
      th.status = p_.v1 ? LLMStatusCode::LLM_WAIT_PROCESS_TIMEOUT : LLMStatusCode::LLM_TIMEOUT;
      timers_.emplace(deadline, t);
    } else {
      th.status = b.ok ? LLMStatusCode::LLM_SUCCESS : LLMStatusCode::LLM_SUSPECT_REMOTE_ERROR;
      timers_.emplace(b.finished, t);
    }
    out_.batches.push_back(b);
  }

  // transfer_layer (§3.4) as states 100-103 over the caller's own side; on return, th.status
  // holds its status and the thread continues at `after`. Returns false when the thread blocked.
  bool transfer_layer(std::size_t t, int cluster, int config, int after) {
    Thread& th = threads_[t];
    const int me = self_of(t);
    const std::size_t process = transfer_mutex(me);
    switch (th.pc) {
      case 100:
        th.layer_start = now_;
        th.pc = 101;
        if (!lock(t, process)) return false;
        [[fallthrough]];
      case 101: {
        const std::optional<std::size_t> found = find_link(me, cluster);
        if (!found) {
          unlock(t, process);
          th.status = LLMStatusCode::LLM_NOT_YET_LINK;
          th.pc = after;
          return true;
        }
        th.link = found;
        th.pc = 102;
        if (!lock(t, links_[*th.link].mutex)) return false;
        [[fallthrough]];
      }
      case 102:
        if (!links_[*th.link].up) {
          unlock(t, links_[*th.link].mutex);
          unlock(t, process);
          th.status = LLMStatusCode::LLM_NOT_YET_LINK;
          th.pc = after;
          return true;
        }
        post(t, th.layer, config, cluster, th.layer_start + p_.sync_timeout);
        th.pc = 103;
        return false;
      case 103:
        unlock(t, links_[*th.link].mutex);
        unlock(t, process);
        th.pc = after;
        return true;
    }
    return true;
  }

  void step(std::size_t t) {
    const OpSpec& op = p_.ops[threads_[t].op];
    if (threads_[t].job) {
      transfer_job(t, op);
      return;
    }
    switch (op.kind) {
      case OpKind::kTransfer:
        transfer_call(t, op);
        return;
      case OpKind::kPullCache:
      case OpKind::kPullBlocks:
        pull(t, op);
        return;
      case OpKind::kPushCache:
      case OpKind::kPushBlocks:
        push(t, op);
        return;
      case OpKind::kLink:
        link(t, op);
        return;
      case OpKind::kUnlink:
        if (p_.v1) {
          unlink_v1(t, op);
        } else {
          unlink_v2(t, op);
        }
        return;
    }
  }

  // v1: whether a side or its peer's end (the peer's current side to its owner) has `count` > 0;
  // v1 forbids a pull and a transfer_cache_async on one link whichever end calls them (§3.5).
  bool either_end(std::size_t side, int Link::*count) const {
    const Link& l = links_[side];
    const std::optional<std::size_t> other = find_link(l.peer, l.owner);
    return l.*count > 0 || (other && links_[*other].*count > 0);
  }

  // transfer_cache_async's synchronous part (§3.1, §3.5), then get_results() waits for the job.
  // Each process counts its own tasks in flight.
  void transfer_call(std::size_t t, const OpSpec& op) {
    Thread& th = threads_[t];
    if (th.pc == 1) {
      finish(t, LLMStatusCode::LLM_SUCCESS);
      return;
    }
    const int me = self(op);
    if (p_.v1 && is_decoder(me)) {
      // v1 checks the role first (hicann/ge v1 llm_datadist.cc Impl::TransferCache: kPrompt).
      finish(t, LLMStatusCode::LLM_PARAM_INVALID);
      return;
    }
    std::set<int> seen;
    for (int cluster : op.clusters) {
      if (!seen.insert(cluster).second) {
        diagnose(th.op, DiagnosticKind::kResultAliased, static_cast<std::uint64_t>(cluster));
        if (p_.strict) {
          finish(t, impl::strict_status(DiagnosticKind::kResultAliased));
          return;
        }
      }
    }
    if (tasks_in_flight_[me] > 0) {
      diagnose(th.op, DiagnosticKind::kConcurrentTransfer, std::nullopt);
      if (p_.strict) {
        finish(t, impl::strict_status(DiagnosticKind::kConcurrentTransfer));
        return;
      }
    }
    std::vector<std::size_t> v1_links;
    if (p_.v1) {
      for (int cluster : seen) {
        const std::optional<std::size_t> found = find_link(me, cluster);
        if (!found) continue;
        if (either_end(*found, &Link::active_pulls)) {
          diagnose(th.op, DiagnosticKind::kLinkCallOverlap, static_cast<std::uint64_t>(cluster));
          if (p_.strict) {
            finish(t, impl::strict_status(DiagnosticKind::kLinkCallOverlap));
            return;
          }
        }
        v1_links.push_back(*found);
      }
    }
    for (std::size_t l : v1_links) ++links_[l].active_transfers;
    ++tasks_in_flight_[me];
    out_.ops[th.op].results.assign(op.clusters.size(), std::nullopt);
    Thread job;
    job.op = th.op;
    job.job = true;
    job.caller = t;
    job.v1_links = v1_links;
    threads_.push_back(job);
    ready_.push_back(threads_.size() - 1);
    threads_[t].pc = 1;
  }

  // Sets the result slot of `cluster` (configs with one dst_cluster_id share it, §3.3).
  void set_result(const OpSpec& op, std::size_t op_index, int cluster, LLMStatusCode code) {
    for (std::size_t c = 0; c < op.clusters.size(); ++c) {
      if (op.clusters[c] == cluster) out_.ops[op_index].results[c] = code;
    }
  }

  void end_job(std::size_t t) {
    Thread& th = threads_[t];
    th.pc = kDone;
    --tasks_in_flight_[self_of(t)];
    for (std::size_t l : th.v1_links) --links_[l].active_transfers;
    ready_.push_back(th.caller);
  }

  // The background loop (§3.2): per layer, synchronize_layer, then one transfer_layer per config.
  void transfer_job(std::size_t t, const OpSpec& op) {
    while (true) {
      Thread& th = threads_[t];
      switch (th.pc) {
        case 0:
          if (th.layer == p_.layers) {
            end_job(t);
            return;
          }
          th.config = 0;
          th.pc = 1;
          if (op.sync_delay > 0) {
            sleep(t, op.sync_delay);
            return;
          }
          break;
        case 1:
          if (th.config == op.clusters.size()) {
            ++th.layer;
            th.pc = 0;
            break;
          }
          th.pc = 100;
          break;
        case 2: {
          const int cluster = op.clusters[th.config];
          if (th.status != LLMStatusCode::LLM_SUCCESS) {
            set_result(op, th.op, cluster, th.status);
            end_job(t);
            return;
          }
          if (th.layer == p_.layers - 1) {
            set_result(op, th.op, cluster, LLMStatusCode::LLM_SUCCESS);
          }
          ++th.config;
          th.pc = 1;
          break;
        }
        default:
          if (!transfer_layer(t, op.clusters[th.config], static_cast<int>(th.config), 2)) return;
          break;
      }
    }
  }

  // push_cache / push_blocks (§4): v2 remote-accessible mode only; one transfer_layer per layer
  // over the issuer's side, the first failure raised.
  void push(std::size_t t, const OpSpec& op) {
    while (true) {
      Thread& th = threads_[t];
      switch (th.pc) {
        case 0:
          if (p_.v1 || !p_.remote_accessible) {
            // v1 has no cache_manager (hixl v2/llm_datadist.py _check_is_cache_mgr_mode); v2
            // push_* needs remote-accessible mode. Both LLM_PARAM_INVALID.
            finish(t, LLMStatusCode::LLM_PARAM_INVALID);
            return;
          }
          th.pc = 1;
          break;
        case 1:
          if (th.layer == p_.layers) {
            finish(t, LLMStatusCode::LLM_SUCCESS);
            return;
          }
          th.pc = 100;
          break;
        case 2:
          if (th.status != LLMStatusCode::LLM_SUCCESS) {
            finish(t, th.status);
            return;
          }
          ++th.layer;
          th.pc = 1;
          break;
        default:
          if (!transfer_layer(t, op.clusters.front(), 0, 2)) return;
          break;
      }
    }
  }

  // pull_cache / pull_blocks (§3.4, §4): the caller's side of the link as found at the call, its
  // mutex for the copy; the deadline counts from when the copy starts.
  void pull(std::size_t t, const OpSpec& op) {
    Thread& th = threads_[t];
    const int me = self(op);
    const int cluster = op.clusters.front();
    switch (th.pc) {
      case 0: {
        if (p_.v1 && !is_decoder(me)) {
          // hicann/ge v1 llm_datadist.cc Impl::PullCache / PullBlocks: kDecoder only, checked
          // first (kv_cache_manager.py _check_role).
          finish(t, LLMStatusCode::LLM_PARAM_INVALID);
          return;
        }
        th.link = find_link(me, cluster);
        if (!th.link) {
          finish(t, LLMStatusCode::LLM_NOT_YET_LINK);
          return;
        }
        if (p_.v1 && either_end(*th.link, &Link::active_transfers)) {
          diagnose(th.op, DiagnosticKind::kLinkCallOverlap, static_cast<std::uint64_t>(cluster));
          if (p_.strict) {
            finish(t, impl::strict_status(DiagnosticKind::kLinkCallOverlap));
            return;
          }
        }
        ++links_[*th.link].active_pulls;
        th.counted_pull = true;
        th.pc = 1;
        if (!lock(t, links_[*th.link].mutex)) return;
        [[fallthrough]];
      }
      case 1:
        if (!links_[*th.link].up) {
          unlock(t, links_[*th.link].mutex);
          finish(t, LLMStatusCode::LLM_NOT_YET_LINK);
          return;
        }
        post(t, -1, 0, cluster, now_ + p_.sync_timeout);
        th.pc = 2;
        return;
      case 2:
        unlock(t, links_[*th.link].mutex);
        finish(t, th.status);
        return;
    }
  }

  // v1: link_clusters and unlink_clusters of one process exclude each other, whatever the cluster
  // (hicann/ge LinkManager::link_mtx_); a call waits at most link_op_wait for the one in progress,
  // then raises LLM_PROCESSING_LINK. Returns 1 when held, 0 when waiting (the thread resumes at
  // the same pc), -1 when the thread finished.
  int link_op(std::size_t t) {
    Thread& th = threads_[t];
    if (!p_.v1 || th.owns_link_op) return 1;
    const int me = self_of(t);
    std::vector<std::size_t>& waiters = link_op_waiters_[me];
    if (th.waiting_link_op) {
      // Woken by the release or by the deadline: the other wake-up is void.
      th.waiting_link_op = false;
      for (auto [it, end] = timers_.equal_range(th.link_op_deadline); it != end; ++it) {
        if (it->second == t) {
          timers_.erase(it);
          break;
        }
      }
      waiters.erase(std::remove(waiters.begin(), waiters.end(), t), waiters.end());
      ready_.erase(std::remove(ready_.begin(), ready_.end(), t), ready_.end());
    } else {
      th.link_op_deadline = now_ + p_.link_op_wait;
    }
    if (link_op_owner_.count(me) == 0) {
      link_op_owner_[me] = t;
      th.owns_link_op = true;
      return 1;
    }
    if (now_ >= th.link_op_deadline) {
      finish(t, LLMStatusCode::LLM_PROCESSING_LINK);
      return -1;
    }
    th.waiting_link_op = true;
    waiters.push_back(t);
    timers_.emplace(th.link_op_deadline, t);
    return 0;
  }

  // link_clusters (§4): v1 lets only a DECODER link (hicann/ge v1 llm_datadist.cc
  // Impl::LinkClusters), refused before anything else. ALREADY_LINK at once if the caller holds a
  // side to the server (LinkMsgHandler::ExchangeInfoProcess finds its own entity); otherwise the
  // two round trips of the handshake, after which the link exists (connect) unless the caller
  // made one meanwhile.
  void link(std::size_t t, const OpSpec& op) {
    Thread& th = threads_[t];
    const int me = self(op);
    const int cluster = op.clusters.front();
    switch (th.pc) {
      case 0:
        if (p_.v1 && !is_decoder(me)) {
          finish(t, LLMStatusCode::LLM_PARAM_INVALID);
          return;
        }
        if (link_op(t) != 1) return;
        if (find_link(me, cluster)) {
          th.status = LLMStatusCode::LLM_ALREADY_LINK;
          th.pc = 1;
          sleep(t, 0);
          return;
        }
        th.candidate = true;
        th.status = LLMStatusCode::LLM_SUCCESS;
        th.pc = 1;
        sleep(t, 2 * d_.round_trip(me, cluster));
        return;
      case 1:
        if (th.candidate) {
          if (find_link(me, cluster)) {
            th.status = LLMStatusCode::LLM_ALREADY_LINK;
          } else {
            connect(me, cluster);
          }
        }
        finish(t, th.status);
        return;
    }
  }

  // v1 unlink_clusters (hicann/ge v1 link manager, unchanged from kvsim's §3.4 reading):
  // NOT_YET_LINK without a side; otherwise waits for the side's mutex, takes it down, and unless
  // `force` holds the mutex through the round trip that tells the peer, which drops its side.
  void unlink_v1(std::size_t t, const OpSpec& op) {
    Thread& th = threads_[t];
    const int me = self(op);
    const int cluster = op.clusters.front();
    switch (th.pc) {
      case 0:
        if (link_op(t) != 1) return;
        th.link = find_link(me, cluster);
        if (!th.link) {
          finish(t, LLMStatusCode::LLM_NOT_YET_LINK);
          return;
        }
        th.pc = 1;
        if (!lock(t, links_[*th.link].mutex)) return;
        [[fallthrough]];
      case 1:
        if (!links_[*th.link].up) {
          unlock(t, links_[*th.link].mutex);
          finish(t, LLMStatusCode::LLM_NOT_YET_LINK);
          return;
        }
        links_[*th.link].up = false;
        sides_.erase({me, cluster});
        if (op.force) {
          unlock(t, links_[*th.link].mutex);
          finish(t, LLMStatusCode::LLM_SUCCESS);
          return;
        }
        th.pc = 2;
        sleep(t, d_.round_trip(me, cluster));
        return;
      case 2:
        drop_side(cluster, me);  // without the peer's mutex: its calls under way go on
        unlock(t, links_[*th.link].mutex);
        finish(t, LLMStatusCode::LLM_SUCCESS);
        return;
    }
  }

  // v2 unlink_clusters (hixl link_msg_handler.cc LinkMsgHandler::UnlinkCluster): waits for the
  // mutex of the caller's side, if it has one; without force (comm backend) first tells the
  // server listening at the cluster's address, holding the mutex through the round trip, and the
  // server drops its side; then the caller's side goes if it is still up. SUCCESS even with no
  // side at all (DestroyEntity of an unknown entity succeeds). The hixl backend
  // (HixlTransferEngine::UnlinkClusters) ignores force and never tells the server.
  void unlink_v2(std::size_t t, const OpSpec& op) {
    Thread& th = threads_[t];
    const int me = self(op);
    const int cluster = op.clusters.front();
    switch (th.pc) {
      case 0:
        th.link = find_link(me, cluster);
        th.pc = 1;
        if (th.link && !lock(t, links_[*th.link].mutex)) return;
        [[fallthrough]];
      case 1:
        if (!op.force && !p_.hixl) {
          th.pc = 2;
          sleep(t, d_.round_trip(me, cluster));
          return;
        }
        break;
      case 2:
        drop_side(cluster, me);
        break;
    }
    if (th.link) {
      if (links_[*th.link].up) {
        links_[*th.link].up = false;
        sides_.erase({me, cluster});
      }
      unlock(t, links_[*th.link].mutex);
    }
    finish(t, LLMStatusCode::LLM_SUCCESS);
  }

  const ProgramSpec& p_;
  const Durations& d_;
  Chooser& chooser_;
  Time now_ = 0;
  std::vector<Thread> threads_;
  std::deque<std::size_t> ready_;
  std::multimap<Time, std::size_t> timers_;
  std::vector<Mutex> mutexes_;
  std::vector<Link> links_;
  std::map<std::pair<int, int>, std::size_t> sides_;  // (owner, peer) → its live side
  std::map<int, std::size_t> transfer_mutexes_;       // cluster → its process-wide transfer mutex
  std::map<int, int> tasks_in_flight_;                // cluster → its tasks in flight
  std::map<int, std::size_t> link_op_owner_;          // v1: cluster → the thread holding its lock
  std::map<int, std::vector<std::size_t>> link_op_waiters_;  // v1: cluster → threads waiting
  Prediction out_;
};

}  // namespace

SearchResult search(const ProgramSpec& program, const Durations& durations,
                    const std::function<bool(const Prediction&)>& accept, std::size_t limit) {
  SearchResult result;
  std::vector<std::size_t> prefix;
  while (result.runs < limit) {
    Chooser chooser(prefix);
    Prediction p = Run(program, durations, chooser).run();
    ++result.runs;
    const bool ok = accept(p);
    if (result.runs == 1) result.first = p;
    if (ok) {
      result.match = std::move(p);
      return result;
    }
    const std::optional<std::vector<std::size_t>> next = chooser.next();
    if (!next) return result;
    prefix = *next;
  }
  result.exhausted = false;
  return result;
}

}  // namespace kvsim::properties::concurrency
