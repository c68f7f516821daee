// Property 2, concurrency constraints (spec §3.4, §3.5, §9): random programs of
// transfer_cache_async, pull_cache, link_clusters and unlink_clusters from one prompt process to
// 1-3 decoders (RoCE and HCCS links), each operation starting on its own simulated job at a random
// time, in faithful or strict mode. The observed schedule must obey the reference rules: one
// per-link lock shared by per-layer transfers, pulls and unlink (batches on a link never overlap;
// unlink waits for the batch in flight); the process-wide transfer mutex (transfer batches never
// overlap); statuses follow the link state (SUCCESS while linked, NOT_YET_LINK while not, either
// only while a link/unlink of that cluster runs); kConcurrentTransfer (strict: LLM_LINK_BUSY
// raised) exactly when another task is in flight; no destination byte is corrupted.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <sstream>

#include "impl/diagnostics.h"
#include "properties/prop_support.h"

namespace kvsim::properties {
namespace {

using impl::LLMRole;

/// One operation of a program.
struct Op {
  enum class Kind { kTransfer, kPull, kUnlink, kLink };
  Kind kind = Kind::kTransfer;
  int cluster = 2;
  int start_us = 0;       ///< when it is called
  int sync_delay_us = 0;  ///< transfer: time each synchronize_layer takes
};

struct Program {
  int decoders = 1;  ///< clusters 2.. (devices 8, 1, 9)
  int layers = 1;
  int row_bytes = 64;
  bool strict = false;
  std::vector<Op> ops;
};

const char* name(Op::Kind k) {
  switch (k) {
    case Op::Kind::kTransfer:
      return "transfer_cache_async";
    case Op::Kind::kPull:
      return "pull_cache";
    case Op::Kind::kUnlink:
      return "unlink_clusters";
    case Op::Kind::kLink:
      return "link_clusters";
  }
  return "?";
}

void showValue(const Program& p, std::ostream& os) {
  os << p.decoders << " decoder(s), " << p.layers << " layer(s) of " << p.row_bytes << " B rows, "
     << (p.strict ? "strict" : "faithful") << "; program:";
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    const Op& o = p.ops[i];
    os << " [" << i << "] t=" << o.start_us << "us " << name(o.kind) << "(cluster " << o.cluster;
    if (o.kind == Op::Kind::kTransfer) os << ", sync " << o.sync_delay_us << "us/layer";
    os << ");";
  }
}

rc::Gen<Program> gen_program() {
  return rc::gen::mapcat(rc::gen::inRange(1, 4), [](int decoders) {
    const auto op = rc::gen::build<Op>(
        rc::gen::set(&Op::kind, rc::gen::weightedElement<Op::Kind>({{5, Op::Kind::kTransfer},
                                                                    {3, Op::Kind::kPull},
                                                                    {1, Op::Kind::kUnlink},
                                                                    {1, Op::Kind::kLink}})),
        rc::gen::set(&Op::cluster, rc::gen::inRange(2, 2 + decoders)),
        rc::gen::set(&Op::start_us, rc::gen::inRange(0, 40)),
        rc::gen::set(&Op::sync_delay_us, rc::gen::inRange(0, 10)));
    return rc::gen::build<Program>(
        rc::gen::set(&Program::decoders, rc::gen::just(decoders)),
        rc::gen::set(&Program::layers, rc::gen::inRange(1, 5)),
        rc::gen::set(&Program::row_bytes,
                     rc::gen::map(rc::gen::inRange(1, 33), [](int n) { return 64 * n; })),
        rc::gen::set(&Program::strict, rc::gen::weightedElement<bool>({{3, false}, {1, true}})),
        rc::gen::set(&Program::ops, rc::gen::mapcat(rc::gen::inRange(1, 7), [op](int n) {
          return rc::gen::container<std::vector<Op>>(static_cast<std::size_t>(n), op);
        })));
  });
}

int device_of(int cluster) {
  return cluster == 2 ? 8 : cluster == 3 ? 1 : 9;
}

/// What one operation did.
struct Observed {
  Time called = 0;
  Time ended = 0;
  CallOutcome outcome{};                   ///< raised by the call (or link codes)
  std::optional<LLMStatusCode> result{};   ///< transfer: the config's result
  std::size_t concurrent_diagnostics = 0;  ///< transfer: kConcurrentTransfer entries
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

bool overlap(Time a0, Time a1, Time b0, Time b1) {
  return a0 < b1 && b0 < a1;
}

RC_GTEST_PROP(Concurrency, ScheduleObeysTheLockRulesAndBytesStayIntact, ()) {
  const Program prog = *gen_program();
  const auto n_ops = prog.ops.size();
  Harness h;
  std::map<std::string, std::string> mode;
  if (prog.strict) mode[impl::kOptionKvsimStrict] = "1";
  auto p = h.make_dist(LLMRole::PROMPT, 1, 0, false, mode);
  std::vector<std::unique_ptr<impl::LLMDataDist>> decoders;
  // Row i of every cache belongs to operation i, so that operations never share bytes.
  const auto rows = static_cast<std::int64_t>(n_ops);
  const impl::CacheDesc desc(2 * prog.layers, {rows, prog.row_bytes}, impl::DataType::DT_INT8);
  const std::uint64_t tensor = desc.size();
  const auto stride = static_cast<std::uint64_t>(prog.row_bytes);
  auto make_cache = [&](impl::LLMDataDist& dist, int device, std::uint64_t seed) {
    std::vector<std::uint64_t> addrs;
    for (int t = 0; t < 2 * prog.layers; ++t) {
      addrs.push_back(h.alloc(device, tensor, seed + static_cast<std::uint64_t>(t)));
    }
    return dist.cache_manager().register_cache(desc, addrs);
  };
  const impl::CacheView src = make_cache(*p, 0, 100);
  const impl::CacheView local = make_cache(*p, 0, 200);
  std::vector<impl::CacheView> remote;
  for (int k = 0; k < prog.decoders; ++k) {
    const int cluster = 2 + k;
    decoders.push_back(h.make_dist(LLMRole::DECODER, static_cast<std::uint64_t>(cluster),
                                   device_of(cluster), true, mode));
    remote.push_back(make_cache(*decoders.back(), device_of(cluster), 300 + 100 * k));
    RC_ASSERT(h.link(*p, static_cast<std::uint64_t>(cluster), device_of(cluster)) ==
              LLMStatusCode::LLM_SUCCESS);
  }
  h.recorder().batches.clear();
  const Time t0 = h.platform().now();

  std::vector<Observed> seen(n_ops);
  std::vector<bool> finished(n_ops, false);
  for (std::size_t i = 0; i < n_ops; ++i) {
    h.platform().spawn("op", [&, i] {
      const Op& op = prog.ops[i];
      const auto cluster = static_cast<std::uint64_t>(op.cluster);
      const auto row = static_cast<std::uint64_t>(i);
      Observed& o = seen[i];
      h.platform().sleep(static_cast<Time>(op.start_us) * kUs);
      o.called = h.platform().now();
      switch (op.kind) {
        case Op::Kind::kTransfer: {
          std::vector<std::uint64_t> addrs;
          for (std::uint64_t a : remote[static_cast<std::size_t>(op.cluster - 2)].tensor_addrs) {
            addrs.push_back(a + row * stride);
          }
          std::vector<impl::AnyTransferConfig> configs = {impl::TransferConfig(
              cluster, addrs, impl::LayerRange{0, prog.layers}, static_cast<std::int64_t>(row))};
          auto sync = std::make_shared<DelayedSync>(h.platform(),
                                                    static_cast<Time>(op.sync_delay_us) * kUs);
          o.outcome = outcome_of([&] {
            auto task = p->cache_manager().transfer_cache_async(src, sync, configs);
            for (const impl::Diagnostic& d : task.diagnostics()) {
              if (d.kind == impl::DiagnosticKind::kConcurrentTransfer) ++o.concurrent_diagnostics;
            }
            o.result = task.get_results().front();
          });
          break;
        }
        case Op::Kind::kPull:
          o.outcome = outcome_of([&] {
            p->cache_manager().pull_cache(
                impl::CacheKeyByIdAndIndex(
                    cluster, remote[static_cast<std::size_t>(op.cluster - 2)].cache_id,
                    static_cast<std::int64_t>(row)),
                local, static_cast<std::int64_t>(row));
          });
          break;
        case Op::Kind::kUnlink:
          o.outcome = llm_outcome(
              p->unlink_clusters({h.cluster_info(cluster, device_of(op.cluster))}).first);
          break;
        case Op::Kind::kLink:
          o.outcome = llm_outcome(h.link(*p, cluster, device_of(op.cluster)));
          break;
      }
      o.ended = h.platform().now();
      finished[i] = true;
    });
  }
  h.systemc().run_until_idle();

  std::ostringstream events;
  for (std::size_t i = 0; i < n_ops; ++i) {
    events << "  [" << i << "] " << name(prog.ops[i].kind) << " " << (seen[i].called - t0) / kUs
           << "-" << (seen[i].ended - t0) / kUs << "us: " << rc::toString(seen[i].outcome)
           << (seen[i].result ? " result " + show_result(seen[i].result) : std::string()) << "\n";
  }
  RC_LOG() << "operations:\n" << events.str() << "batches:\n" << show_batches(h.recorder().batches);
  for (std::size_t i = 0; i < n_ops; ++i) RC_ASSERT(finished[i]);
  RC_ASSERT(h.job_failures().empty());

  // Which decoder a batch talks to, and whether it is a transfer (source on device 0).
  auto peer_of = [&](const Batch& b, bool* transfer) {
    const auto where = h.recorder().locate(b.descriptors.front().dst_addr, 1);
    *transfer = where && where->device != 0;
    const auto far = *transfer ? where : h.recorder().locate(b.descriptors.front().src_addr, 1);
    return far ? far->device : -1;
  };
  const auto& batches = h.recorder().batches;
  for (std::size_t a = 0; a < batches.size(); ++a) {
    RC_ASSERT(batches[a].finished.has_value());
    for (std::size_t b = a + 1; b < batches.size(); ++b) {
      bool ta = false;
      bool tb = false;
      const int pa = peer_of(batches[a], &ta);
      const int pb = peer_of(batches[b], &tb);
      const bool both_overlap =
          overlap(batches[a].posted, *batches[a].finished, batches[b].posted, *batches[b].finished);
      // One lock per link: nothing else on that link while a batch runs (§3.4).
      RC_ASSERT(!(pa == pb && both_overlap));
      // One process-wide transfer mutex: per-layer transfers never overlap (§3.4).
      RC_ASSERT(!(ta && tb && both_overlap));
    }
  }

  // Link state per cluster at each moment: "stable" intervals are those no link/unlink of that
  // cluster overlaps; there the state is known from the link/unlink calls that ended before.
  auto state_during = [&](std::size_t i) -> std::optional<bool> {
    const Op& op = prog.ops[i];
    bool up = true;
    std::vector<std::size_t> changes;
    for (std::size_t j = 0; j < n_ops; ++j) {
      const Op& other = prog.ops[j];
      if (j == i || other.cluster != op.cluster) continue;
      if (other.kind != Op::Kind::kLink && other.kind != Op::Kind::kUnlink) continue;
      // Touching intervals count as overlapping: at one instant either may go first.
      if (seen[j].ended < seen[i].called || seen[j].called > seen[i].ended) {
        if (seen[j].ended < seen[i].called) changes.push_back(j);
        continue;
      }
      return std::nullopt;  // overlaps a change of this link
    }
    std::sort(changes.begin(), changes.end(),
              [&](std::size_t a, std::size_t b) { return seen[a].ended < seen[b].ended; });
    for (std::size_t j : changes) {
      if (seen[j].outcome.kind == CallOutcome::Kind::kOk) up = prog.ops[j].kind == Op::Kind::kLink;
    }
    return up;
  };

  std::vector<std::vector<std::uint8_t>> remote_expected;
  for (int k = 0; k < prog.decoders; ++k) {
    for (int t = 0; t < 2 * prog.layers; ++t) {
      remote_expected.push_back(pattern(tensor, 300 + 100 * static_cast<std::uint64_t>(k) + t));
    }
  }
  std::vector<std::vector<std::uint8_t>> local_expected;
  for (int t = 0; t < 2 * prog.layers; ++t) local_expected.push_back(pattern(tensor, 200 + t));

  for (std::size_t i = 0; i < n_ops; ++i) {
    const Op& op = prog.ops[i];
    const Observed& o = seen[i];
    const std::optional<bool> up = state_during(i);
    const auto k = static_cast<std::size_t>(op.cluster - 2);
    RC_LOG() << "checking [" << i << "], link " << (up ? (*up ? "up" : "down") : "changing")
             << "\n";
    if (op.kind == Op::Kind::kTransfer) {
      // Tasks in flight at the call: called before, still running (ties: either).
      std::size_t in_flight = 0;
      bool tie = false;
      for (std::size_t j = 0; j < n_ops; ++j) {
        if (j == i || prog.ops[j].kind != Op::Kind::kTransfer) continue;
        const bool started = seen[j].outcome.kind == CallOutcome::Kind::kOk;
        if (!started) continue;
        if (seen[j].called == o.called || seen[j].ended == o.called) tie = true;
        if (seen[j].called < o.called && seen[j].ended > o.called) ++in_flight;
      }
      if (prog.strict) {
        if (!tie) {
          RC_ASSERT(o.outcome ==
                    (in_flight > 0 ? llm_outcome(LLMStatusCode::LLM_LINK_BUSY) : CallOutcome{}));
        }
        if (o.outcome.kind != CallOutcome::Kind::kOk) continue;
      } else {
        RC_ASSERT(o.outcome.kind == CallOutcome::Kind::kOk);
        if (!tie) RC_ASSERT(o.concurrent_diagnostics == (in_flight > 0 ? 1u : 0u));
      }
      RC_ASSERT(o.result.has_value());
      if (up) {
        RC_ASSERT(*o.result ==
                  (*up ? LLMStatusCode::LLM_SUCCESS : LLMStatusCode::LLM_NOT_YET_LINK));
      } else {
        RC_ASSERT(*o.result == LLMStatusCode::LLM_SUCCESS ||
                  *o.result == LLMStatusCode::LLM_NOT_YET_LINK);
      }
      // Landed layers: the batches that carry this operation's source row.
      int landed = 0;
      for (const Batch& b : batches) {
        for (int layer = 0; layer < prog.layers; ++layer) {
          if (b.ok && b.descriptors.front().src_addr ==
                          src.tensor_addrs[static_cast<std::size_t>(2 * layer)] + i * stride) {
            RC_ASSERT(layer == landed);  // layers go in order, each once
            ++landed;
            for (int t = 0; t < 2; ++t) {
              const auto tensor_index = static_cast<std::size_t>(2 * layer + t);
              const auto bytes = pattern(tensor, 100 + tensor_index);
              std::copy_n(
                  bytes.begin() + static_cast<std::ptrdiff_t>(i * stride), stride,
                  remote_expected[k * 2 * static_cast<std::size_t>(prog.layers) + tensor_index]
                          .begin() +
                      static_cast<std::ptrdiff_t>(i * stride));
            }
          }
        }
      }
      if (*o.result == LLMStatusCode::LLM_SUCCESS) RC_ASSERT(landed == prog.layers);
    } else if (op.kind == Op::Kind::kPull) {
      if (up) {
        RC_ASSERT(o.outcome ==
                  (*up ? CallOutcome{} : llm_outcome(LLMStatusCode::LLM_NOT_YET_LINK)));
      } else {
        RC_ASSERT(o.outcome == CallOutcome{} ||
                  o.outcome == llm_outcome(LLMStatusCode::LLM_NOT_YET_LINK));
      }
      if (o.outcome.kind == CallOutcome::Kind::kOk) {
        for (int t = 0; t < 2 * prog.layers; ++t) {
          const auto r = pattern(tensor, 300 + 100 * k + static_cast<std::uint64_t>(t));
          std::copy_n(r.begin() + static_cast<std::ptrdiff_t>(i * stride), stride,
                      local_expected[static_cast<std::size_t>(t)].begin() +
                          static_cast<std::ptrdiff_t>(i * stride));
        }
      }
    } else {
      const bool link = op.kind == Op::Kind::kLink;
      if (up) {
        const LLMStatusCode want =
            link ? (*up ? LLMStatusCode::LLM_ALREADY_LINK : LLMStatusCode::LLM_SUCCESS)
                 : (*up ? LLMStatusCode::LLM_SUCCESS : LLMStatusCode::LLM_NOT_YET_LINK);
        RC_ASSERT(o.outcome == llm_outcome(want));
      }
      if (!link) {
        // Unlink waits for the batch in flight on that link (§3.4).
        for (const Batch& b : batches) {
          bool t = false;
          if (peer_of(b, &t) == device_of(op.cluster) &&
              b.posted<o.called&& * b.finished> o.called) {
            RC_ASSERT(o.ended >= *b.finished);
          }
        }
      }
    }
  }
  // No destination byte differs from its initial value or from what an operation put there.
  for (int k = 0; k < prog.decoders; ++k) {
    for (int t = 0; t < 2 * prog.layers; ++t) {
      const auto index = static_cast<std::size_t>(k * 2 * prog.layers + t);
      RC_ASSERT(
          h.read(remote[static_cast<std::size_t>(k)].tensor_addrs[static_cast<std::size_t>(t)],
                 tensor) == remote_expected[index]);
    }
  }
  for (int t = 0; t < 2 * prog.layers; ++t) {
    RC_ASSERT(h.read(local.tensor_addrs[static_cast<std::size_t>(t)], tensor) ==
              local_expected[static_cast<std::size_t>(t)]);
  }
}

}  // namespace
}  // namespace kvsim::properties
