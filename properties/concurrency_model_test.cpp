// Worked examples of property 2's reference model (concurrency_model.h), by hand, with no
// simulation: what it predicts for small programs whose outcome the rules fix.
#include "properties/concurrency_model.h"

#include <gtest/gtest.h>

namespace kvsim::properties::concurrency {
namespace {

using S = LLMStatusCode;

// Every batch takes 10, a link round trip 5.
Durations fixed() {
  Durations d;
  d.batch = [](std::size_t, std::size_t) { return BatchService{10, true}; };
  d.round_trip = [](int) { return Time{5}; };
  return d;
}

OpSpec op(OpKind kind, std::vector<int> clusters, Time call) {
  OpSpec o;
  o.kind = kind;
  o.clusters = std::move(clusters);
  o.call = call;
  return o;
}

Prediction predict(const ProgramSpec& p) {
  const SearchResult r = search(
      p, fixed(), [](const Prediction&) { return true; }, 1);
  return *r.match;
}

ProgramSpec program(std::vector<OpSpec> ops) {
  ProgramSpec p;
  p.layers = 1;
  p.sync_timeout = 1000;
  p.linked_at_start = {2, 3};
  p.ops = std::move(ops);
  return p;
}

// Pulls and unlink queue FIFO on the link's mutex; unlink holds it through the round trip; the
// pull behind it finds the link down.
TEST(ConcurrencyModel, PullsAndUnlinkQueueOnTheLinkMutex) {
  const Prediction p = predict(program(
      {op(OpKind::kPullCache, {2}, 0), op(OpKind::kPullCache, {2}, 1), op(OpKind::kUnlink, {2}, 2),
       op(OpKind::kPullCache, {2}, 3), op(OpKind::kPullCache, {3}, 4)}));
  EXPECT_EQ(p.ops[0].ended, 10u);
  EXPECT_EQ(p.ops[1].ended, 20u);
  EXPECT_EQ(p.ops[2].ended, 25u);
  EXPECT_EQ(p.ops[2].raised, S::LLM_SUCCESS);
  EXPECT_EQ(p.ops[3].ended, 25u);
  EXPECT_EQ(p.ops[3].raised, S::LLM_NOT_YET_LINK);
  EXPECT_EQ(p.ops[4].ended, 14u);  // another link: no wait
  EXPECT_EQ(p.completion_order(), (std::vector<std::size_t>{0, 4, 1, 2, 3}));
}

// Per-layer transfers and push layers take the process-wide mutex one layer at a time, FIFO,
// whatever link they use.
TEST(ConcurrencyModel, TransferAndPushLayersInterleaveOnTheProcessMutex) {
  ProgramSpec spec = program({op(OpKind::kTransfer, {2}, 0), op(OpKind::kPushCache, {3}, 1)});
  spec.layers = 2;
  spec.remote_accessible = true;
  const Prediction p = predict(spec);
  EXPECT_EQ(p.ops[1].ended, 40u);  // its layers 10-20 and 30-40
  EXPECT_EQ(p.ops[0].ended, 30u);  // its layers 0-10 and 20-30
  EXPECT_EQ(p.ops[0].results, (std::vector<std::optional<S>>{S::LLM_SUCCESS}));
  ASSERT_EQ(p.batches.size(), 4u);
  EXPECT_EQ(p.batches[1].op, 1u);
  EXPECT_EQ(p.batches[1].posted, 10u);
}

// A second transfer_cache_async while a task is in flight: a diagnostic; strict mode raises
// LLM_LINK_BUSY and starts nothing.
TEST(ConcurrencyModel, ConcurrentTransferIsDiagnosedOrRefused) {
  ProgramSpec spec = program({op(OpKind::kTransfer, {2}, 0), op(OpKind::kTransfer, {3}, 1)});
  const Prediction faithful = predict(spec);
  ASSERT_EQ(faithful.diagnostics.size(), 1u);
  EXPECT_EQ(faithful.diagnostics[0].kind, DiagnosticKind::kConcurrentTransfer);
  EXPECT_EQ(faithful.ops[1].ended, 20u);
  spec.strict = true;
  const Prediction strict = predict(spec);
  EXPECT_EQ(strict.ops[1].raised, S::LLM_LINK_BUSY);
  EXPECT_EQ(strict.ops[1].ended, 1u);
  EXPECT_EQ(strict.batches.size(), 1u);
}

// Simultaneous events are choices: search() tries the other order when the first is refused.
TEST(ConcurrencyModel, SearchTriesEveryOrderOfSimultaneousEvents) {
  const ProgramSpec spec =
      program({op(OpKind::kPullCache, {2}, 0), op(OpKind::kPullCache, {2}, 0)});
  const SearchResult r = search(
      spec, fixed(), [](const Prediction& p) { return p.ops[1].ended == 10u; }, 10);
  ASSERT_TRUE(r.match.has_value());
  EXPECT_EQ(r.runs, 2u);
  EXPECT_EQ(r.first.ops[0].ended, 10u);
}

}  // namespace
}  // namespace kvsim::properties::concurrency
