// Worked examples of property 2's reference model (concurrency_model.h), by hand, with no
// simulation: what it predicts for small programs whose outcome the rules fix.
#include "properties/concurrency_model.h"

#include <gtest/gtest.h>

#include <string>

namespace kvsim::properties::concurrency {
namespace {

using S = LLMStatusCode;

// Every batch takes 10, a link round trip 5.
Durations fixed() {
  Durations d;
  d.batch = [](std::size_t, std::size_t) { return BatchService{10, true}; };
  d.round_trip = [](int, int) { return Time{5}; };
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
  p.linked_at_start = {{1, 2}, {1, 3}};
  p.ops = std::move(ops);
  return p;
}

// Pulls and unlink queue FIFO on the link's mutex; unlink (v2, no force) holds it through the round
// trip that tells the server and only then takes the link down: the pull that queued behind it
// finds the link down.
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

OpSpec by_decoder(OpKind kind, int decoder, Time call) {
  OpSpec o = op(kind, {1}, call);
  o.issuer = decoder;
  return o;
}

// Each process has its own transfer mutex and each side of a link its own mutex: a decoder's push
// toward the prompt does not wait for the prompt's transfer to that decoder, but queues FIFO
// behind the same decoder's pull on its side.
TEST(ConcurrencyModel, DecoderCallsUseTheirOwnProcessAndLinkMutexes) {
  ProgramSpec spec =
      program({op(OpKind::kTransfer, {2}, 0), by_decoder(OpKind::kPullCache, 2, 1),
               by_decoder(OpKind::kPushBlocks, 2, 2), by_decoder(OpKind::kPushCache, 3, 3)});
  spec.remote_accessible = true;
  const Prediction p = predict(spec);
  EXPECT_EQ(p.ops[0].ended, 10u);
  EXPECT_EQ(p.ops[1].ended, 11u);
  EXPECT_EQ(p.ops[2].ended, 21u);  // its layer waits for the pull on link c2->c1
  EXPECT_EQ(p.ops[3].ended, 13u);  // decoder 3: its own mutexes
  for (const OpOutcome& o : p.ops) EXPECT_EQ(o.raised, S::LLM_SUCCESS);
  std::vector<std::string> locks;
  for (const LockHold& h : p.holds) locks.push_back(h.lock);
  EXPECT_EQ(locks,
            (std::vector<std::string>{"transfer c1", "link c1->c2", "link c2->c1", "transfer c2",
                                      "link c2->c1", "transfer c3", "link c3->c1"}));
}

// Tasks in flight are counted per process: a decoder's transfer_cache_async while the prompt has
// one is not diagnosed. v1 lets only role PROMPT transfer: the decoder's call raises at once.
TEST(ConcurrencyModel, DecoderTransferIsItsOwnProcessAndRefusedUnderV1) {
  ProgramSpec spec = program({op(OpKind::kTransfer, {2}, 0), by_decoder(OpKind::kTransfer, 3, 1)});
  spec.strict = true;
  const Prediction v2 = predict(spec);
  EXPECT_TRUE(v2.diagnostics.empty());
  EXPECT_EQ(v2.ops[1].ended, 11u);
  EXPECT_EQ(v2.ops[1].results, (std::vector<std::optional<S>>{S::LLM_SUCCESS}));
  spec.v1 = true;
  const Prediction v1 = predict(spec);
  EXPECT_EQ(v1.ops[1].raised, S::LLM_PARAM_INVALID);
  EXPECT_EQ(v1.ops[1].ended, 1u);
  EXPECT_EQ(v1.batches.size(), 1u);
}

// The prompt's unlink drops the decoder's side after its round trip, without the decoder's link
// mutex: a decoder push in flight finishes its layer; the next layer finds no link.
TEST(ConcurrencyModel, UnlinkDropsTheDecoderSideUnderItsCalls) {
  ProgramSpec spec = program({by_decoder(OpKind::kPushCache, 2, 0), op(OpKind::kUnlink, {2}, 1),
                              by_decoder(OpKind::kPullBlocks, 2, 7)});
  spec.remote_accessible = true;
  spec.layers = 2;
  const Prediction p = predict(spec);
  EXPECT_EQ(p.ops[1].ended, 6u);
  EXPECT_EQ(p.ops[0].raised, S::LLM_NOT_YET_LINK);
  EXPECT_EQ(p.ops[0].ended, 10u);
  EXPECT_EQ(p.ops[2].raised, S::LLM_NOT_YET_LINK);
  EXPECT_EQ(p.ops[2].ended, 7u);
  EXPECT_EQ(p.batches.size(), 1u);
}

// v1: only a DECODER links (the prompt's link_clusters is refused at once); link_clusters and
// unlink_clusters of one process exclude each other whatever the cluster, and a call that cannot
// get in within link_op_wait raises LLM_PROCESSING_LINK; another process has its own lock. v2
// runs them at once: an unlink of what is not linked yet succeeds after telling the server, and a
// link that finds the link made meanwhile (by either side, the comm backend gives both one) is
// ALREADY_LINK.
TEST(ConcurrencyModel, V1LinkCallsExcludeEachOtherPerProcessOrRaiseProcessingLink) {
  ProgramSpec spec = program({by_decoder(OpKind::kLink, 2, 0), by_decoder(OpKind::kUnlink, 2, 1),
                              by_decoder(OpKind::kLink, 2, 2), op(OpKind::kLink, {2}, 3),
                              by_decoder(OpKind::kUnlink, 3, 4)});
  spec.linked_at_start = {{3, 1}};
  spec.v1 = true;
  spec.link_op_wait = 10;
  const Prediction v1 = predict(spec);
  EXPECT_EQ(v1.ops[0].ended, 10u);
  EXPECT_EQ(v1.ops[0].raised, S::LLM_SUCCESS);
  EXPECT_EQ(v1.ops[1].ended, 15u);  // in at 10, then the round trip
  EXPECT_EQ(v1.ops[1].raised, S::LLM_SUCCESS);
  EXPECT_EQ(v1.ops[2].ended, 12u);  // gave up at its deadline
  EXPECT_EQ(v1.ops[2].raised, S::LLM_PROCESSING_LINK);
  EXPECT_EQ(v1.ops[3].ended, 3u);  // the prompt may not link
  EXPECT_EQ(v1.ops[3].raised, S::LLM_PARAM_INVALID);
  EXPECT_EQ(v1.ops[4].ended, 9u);  // decoder 3's own lock
  EXPECT_EQ(v1.ops[4].raised, S::LLM_SUCCESS);
  spec.v1 = false;
  const Prediction v2 = predict(spec);
  EXPECT_EQ(v2.ops[1].ended, 6u);
  EXPECT_EQ(v2.ops[1].raised, S::LLM_SUCCESS);
  EXPECT_EQ(v2.ops[2].ended, 12u);
  EXPECT_EQ(v2.ops[2].raised, S::LLM_ALREADY_LINK);
  EXPECT_EQ(v2.ops[3].ended, 13u);  // the link [0] made gave the prompt its side at 10
  EXPECT_EQ(v2.ops[3].raised, S::LLM_ALREADY_LINK);
}

// v1 roles and overlap: the prompt transfers and may not pull; a decoder's pull while the
// prompt's task is in flight on the same link is diagnosed although each runs on its own side
// (the check looks at both ends); strict mode refuses it with LLM_LINK_BUSY.
TEST(ConcurrencyModel, V1DecoderPullOverlapsThePromptsTaskOnTheOtherEnd) {
  ProgramSpec spec =
      program({op(OpKind::kTransfer, {2}, 0), by_decoder(OpKind::kPullCache, 2, 1),
               op(OpKind::kPullCache, {2}, 2), by_decoder(OpKind::kPullCache, 3, 3)});
  spec.linked_at_start = {{2, 1}, {3, 1}};
  spec.v1 = true;
  const Prediction faithful = predict(spec);
  ASSERT_EQ(faithful.diagnostics.size(), 1u);
  EXPECT_EQ(faithful.diagnostics[0].kind, DiagnosticKind::kLinkCallOverlap);
  EXPECT_EQ(faithful.diagnostics[0].op, 1u);
  EXPECT_EQ(faithful.ops[1].ended, 11u);
  EXPECT_EQ(faithful.ops[2].raised, S::LLM_PARAM_INVALID);
  EXPECT_EQ(faithful.ops[2].ended, 2u);
  EXPECT_EQ(faithful.ops[3].ended, 13u);  // decoder 3's link carries no task
  spec.strict = true;
  const Prediction strict = predict(spec);
  EXPECT_EQ(strict.ops[1].raised, S::LLM_LINK_BUSY);
  EXPECT_EQ(strict.ops[1].ended, 1u);
}

// hixl: a link belongs to its client. The decoder cannot push over the prompt's link; once it has
// linked itself both directions exist, and the prompt's unlink (which never tells the server,
// force or not) leaves the decoder's link and its pulls alone.
TEST(ConcurrencyModel, HixlLinksAreTheClientsAndDirectionsAreIndependent) {
  ProgramSpec spec =
      program({by_decoder(OpKind::kPushCache, 2, 0), by_decoder(OpKind::kLink, 2, 1),
               by_decoder(OpKind::kPullCache, 2, 12), op(OpKind::kUnlink, {2}, 13),
               by_decoder(OpKind::kPullCache, 2, 23), op(OpKind::kPullCache, {2}, 24)});
  spec.hixl = true;
  spec.remote_accessible = true;
  const Prediction p = predict(spec);
  EXPECT_EQ(p.ops[0].raised, S::LLM_NOT_YET_LINK);
  EXPECT_EQ(p.ops[0].ended, 0u);
  EXPECT_EQ(p.ops[1].raised, S::LLM_SUCCESS);
  EXPECT_EQ(p.ops[1].ended, 11u);
  EXPECT_EQ(p.ops[2].ended, 22u);
  EXPECT_EQ(p.ops[3].raised, S::LLM_SUCCESS);
  EXPECT_EQ(p.ops[3].ended, 13u);  // no round trip
  EXPECT_EQ(p.ops[4].raised, S::LLM_SUCCESS);
  EXPECT_EQ(p.ops[4].ended, 33u);
  EXPECT_EQ(p.ops[5].raised, S::LLM_NOT_YET_LINK);
  std::vector<std::string> locks;
  for (const LockHold& h : p.holds) locks.push_back(h.lock);
  EXPECT_EQ(locks,
            (std::vector<std::string>{"transfer c2", "link c2->c1", "link c1->c2", "link c2->c1"}));
}

// Comm backend: unlink with force drops only the caller's side, so the decoder still pulls over
// its own; the prompt's next link replaces the decoder's stale side (whose new mutex the next
// pull takes) and a link the decoder then asks for is ALREADY_LINK. Unlinking a cluster that is
// not linked succeeds after the round trip to its server.
TEST(ConcurrencyModel, ForceUnlinkLeavesTheServersSideWhichARelinkReplaces) {
  ProgramSpec spec = program({op(OpKind::kUnlink, {2}, 0), by_decoder(OpKind::kPullCache, 2, 1),
                              op(OpKind::kLink, {2}, 2), by_decoder(OpKind::kPullCache, 2, 13),
                              by_decoder(OpKind::kLink, 2, 14), op(OpKind::kUnlink, {3}, 15)});
  spec.ops[0].force = true;
  spec.linked_at_start = {{1, 2}};
  const Prediction p = predict(spec);
  EXPECT_EQ(p.ops[0].ended, 0u);
  EXPECT_EQ(p.ops[1].raised, S::LLM_SUCCESS);
  EXPECT_EQ(p.ops[1].ended, 11u);
  EXPECT_EQ(p.ops[2].raised, S::LLM_SUCCESS);
  EXPECT_EQ(p.ops[2].ended, 12u);
  EXPECT_EQ(p.ops[3].raised, S::LLM_SUCCESS);
  EXPECT_EQ(p.ops[3].ended, 23u);
  EXPECT_EQ(p.ops[4].raised, S::LLM_ALREADY_LINK);
  EXPECT_EQ(p.ops[4].ended, 14u);
  EXPECT_EQ(p.ops[5].raised, S::LLM_SUCCESS);
  EXPECT_EQ(p.ops[5].ended, 20u);
  ASSERT_EQ(p.batches.size(), 2u);
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
