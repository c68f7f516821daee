// The serving runner's consistency (label serving): with one request in flight it gives the
// single-request runner's times exactly; one prefill instance with deterministic service under
// Poisson arrivals waits as M/D/1 says; the bytes moved are the requests' KV sizes, on the links
// too; two runs are identical.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <numeric>

#include "sim/result_codec.h"
#include "sim/results_writer.h"
#include "sim/runner.h"
#include "sim/scenario.h"
#include "sim/serving/block_pool.h"
#include "sim/serving/metrics.h"

namespace kvsim::sim {
namespace {

RunOptions no_trace() {
  RunOptions o;
  o.trace = false;
  return o;
}
const RunOptions kNoTrace = no_trace();

// Llama-3-70B TP8 between two A2 servers, requests far enough apart that one is in flight.
std::string single_request_text(const std::string& method, const std::string& table) {
  return R"(question: consistency
hardware: {preset: atlas-a2}
model: {name: llama-3-70b, tensor_parallel: 8, dtype: bf16}
cache: {layout: paged, block_tokens: 128, block_table: )" +
         table + R"(}
workload:
  requests: 4
  arrivals: {process: uniform, rate: 0.25}
  prompt_tokens: {min: 1000, max: 3000}
  seed: 7
prefill: {device_tflops: 300, efficiency: 0.5}
transfer: {method: )" +
         method + R"(, api: 2}
)";
}

struct Case {
  std::string method;
  std::string table;
};

class OneInFlight : public ::testing::TestWithParam<Case> {};

TEST_P(OneInFlight, ServingRunnerGivesTheSingleRequestRunnersTimes) {
  const std::string base = single_request_text(GetParam().method, GetParam().table);
  const Scenario single =
      parse_scenario(base + "placement: {prompt_node: 0, decode_node: 1}\n", "<single>");
  std::uint64_t longest = 0;
  for (const Request& q : single.requests) longest = std::max(longest, q.prompt_tokens);
  // vLLM's queue hands each request fresh ids (as the single-request runner's fresh engine
  // does) while the cache has never-used blocks: room for all four, plus the null block.
  const std::uint64_t blocks =
      GetParam().table == "vllm" ? 4 * ((longest + 127) / 128) + 1 : (longest + 127) / 128;
  const Scenario served = parse_scenario(
      base + "instances: {prefill: 1 x TP8, decode: 1 x TP8}\nserving: {cache_blocks: " +
          std::to_string(blocks) + "}\n",
      "<served>");
  const RunResult a = run_scenario(single, kNoTrace);
  const RunResult b = run_scenario(served, kNoTrace);
  ASSERT_EQ(a.requests.size(), b.requests.size());
  for (std::size_t i = 0; i < a.requests.size(); ++i) {
    const RequestResult& x = a.requests[i];
    const RequestResult& y = b.requests[i];
    SCOPED_TRACE("request " + std::to_string(i));
    EXPECT_EQ(x.arrival, y.arrival);
    EXPECT_EQ(x.prefill_start, y.prefill_start);
    EXPECT_EQ(x.transfer_start, y.transfer_start);
    EXPECT_EQ(x.prefill_end, y.prefill_end);
    EXPECT_EQ(x.transfer_end, y.transfer_end);
    EXPECT_EQ(x.bytes, y.bytes);
    EXPECT_EQ(x.status, y.status);
    EXPECT_TRUE(x.verified);
    EXPECT_TRUE(y.verified);
    EXPECT_EQ(y.queueing(), x.prefill_start - x.arrival);  // only the first waits, for the setup
  }
}

INSTANTIATE_TEST_SUITE_P(Serving, OneInFlight,
                         ::testing::Values(Case{"layerwise", "scattered"},
                                           Case{"layerwise", "sequential"},
                                           Case{"layerwise", "vllm"},
                                           Case{"pull_blocks", "scattered"},
                                           Case{"pull_blocks", "vllm"}),
                         [](const auto& p) { return p.param.method + "_" + p.param.table; });

// A small model with a fixed layer time: every prefill batch of one request takes D = 10 ms.
std::string queue_text(double rate, int requests, int prefill, int decode, double verify) {
  return R"(question: queueing
hardware: {preset: atlas-a2}
model: {name: tiny, layers: 4, hidden: 1024, intermediate: 2048, heads: 8, kv_heads: 8,
        head_dim: 128, tensor_parallel: 1, dtype: bf16}
cache: {layout: paged, block_tokens: 16, block_table: sequential}
workload:
  requests: )" +
         std::to_string(requests) + R"(
  arrivals: {process: poisson, rate: )" +
         std::to_string(rate) + R"(}
  prompt_tokens: 512
  output_tokens: 4
  seed: 11
prefill: {layer_time: 2.5ms}
transfer: {method: layerwise, api: 2}
instances: {prefill: )" +
         std::to_string(prefill) + ", decode: " + std::to_string(decode) + R"(}
serving: {token_budget: 512, cache_blocks: 8192, verify: )" +
         std::to_string(verify) + "}\n";
}

TEST(Serving, OnePrefillInstanceWaitsAsMD1Says) {
  const double service = 0.010, rho = 0.7, rate = rho / service;
  const RunResult r =
      run_scenario(parse_scenario(queue_text(rate, 20000, 1, 1, 0), "<md1>"), kNoTrace);
  // Waiting time in queue of M/D/1: rho * D / (2 (1 - rho)).
  const double expected = rho * service / (2 * (1 - rho));
  // Batch means over 20 consecutive groups give the sampling error of the correlated waits.
  const std::size_t groups = 20, per = r.requests.size() / groups;
  std::vector<double> means;
  for (std::size_t g = 0; g < groups; ++g) {
    double sum = 0;
    for (std::size_t i = g * per; i < (g + 1) * per; ++i) {
      sum += model::to_seconds(r.requests[i].queueing());
    }
    means.push_back(sum / static_cast<double>(per));
  }
  const double mean = std::accumulate(means.begin(), means.end(), 0.0) / groups;
  double var = 0;
  for (const double m : means) var += (m - mean) * (m - mean);
  const double stderr_of_mean = std::sqrt(var / (groups - 1) / groups);
  EXPECT_NEAR(mean, expected, 4 * stderr_of_mean)
      << "mean wait " << mean * 1e3 << " ms, M/D/1 " << expected * 1e3 << " ms";
  EXPECT_LT(stderr_of_mean, 0.1 * expected);  // the run is long enough to say something
}

TEST(Serving, BytesMovedAreTheRequestsKvSizesOnTheApiAndOnTheLinks) {
  const Scenario s = parse_scenario(queue_text(300, 400, 2, 2, 0.25), "<bytes>");
  const RunResult r = run_scenario(s, kNoTrace);
  const std::uint64_t block = 16ull * s.model.kv_elements_per_token(1) * s.dtype_bytes;
  std::uint64_t expected = 0, moved = 0;
  for (const Request& q : s.requests) {
    expected +=
        (q.prompt_tokens + 15) / 16 * block * 2 * static_cast<std::uint64_t>(s.model.layers);
  }
  for (const RequestResult& q : r.requests) {
    moved += q.bytes;
    EXPECT_TRUE(q.ok) << q.status;
    EXPECT_EQ(q.verified, q.checked);
  }
  EXPECT_EQ(moved, expected);
  // Prefill and decode sit on different nodes: every byte leaves one NIC and enters another.
  double on_nics = 0;
  for (const LinkUsage& l : r.links) {
    if (l.type == "roce") on_nics += l.bytes;
  }
  EXPECT_NEAR(on_nics, 2.0 * static_cast<double>(expected), 1e-6 * static_cast<double>(expected));
  const serving::ServingMetrics m = serving::serving_metrics(r);
  EXPECT_EQ(m.checked, 100u);  // every 4th of 400
  EXPECT_EQ(m.verified, 100u);
}

TEST(Serving, PushBlocksPerLayerTimesAsTransferCacheAsync) {
  // Both send each computed layer of each request with one TransferCache under the process-wide
  // transfer mutex (spec 3.4), so the KV lands at the same times; only the calls differ.
  const Scenario a = parse_scenario(queue_text(300, 200, 2, 2, 0.5), "<layerwise>");
  const Scenario b = parse_scenario(queue_text(300, 200, 2, 2, 0.5), "<push>",
                                    {{"transfer.method", "push_blocks"}});
  const RunResult x = run_scenario(a, kNoTrace);
  const RunResult y = run_scenario(b, kNoTrace);
  ASSERT_EQ(x.requests.size(), y.requests.size());
  for (std::size_t i = 0; i < x.requests.size(); ++i) {
    EXPECT_EQ(x.requests[i].transfer_end, y.requests[i].transfer_end) << i;
    EXPECT_EQ(x.requests[i].bytes, y.requests[i].bytes) << i;
    EXPECT_TRUE(y.requests[i].ok) << y.requests[i].status;
    EXPECT_EQ(y.requests[i].verified, y.requests[i].checked) << i;
  }
  EXPECT_TRUE(y.diagnostics.empty());  // one synchronous push at a time: nothing to flag
}

class FaultedServing : public ::testing::TestWithParam<std::string> {};

TEST_P(FaultedServing, ANicDownMidRunFailsTheRequestsAfterItAndServesTheRest) {
  // The decode rank's NIC dies at 100 ms: requests before it are served, every later one ends
  // with the library's status instead of hanging the run.
  const Scenario s = parse_scenario(
      queue_text(100, 40, 1, 1, 1) + "faults:\n  - {link: roce n1d0, at: 100ms, event: down}\n",
      "<fault>", {{"transfer.method", GetParam()}});
  const RunResult r = run_scenario(s, kNoTrace);
  ASSERT_EQ(r.requests.size(), 40u);
  std::size_t failed = 0;
  for (const RequestResult& q : r.requests) {
    if (q.ok) {
      EXPECT_TRUE(q.verified) << q.id;
      EXPECT_LT(q.transfer_end, 100 * model::kMs) << q.id;
      EXPECT_GT(q.completion, 0u) << q.id;
      continue;
    }
    ++failed;
    EXPECT_NE(q.status, "LLM_SUCCESS") << q.id;
    EXPECT_FALSE(q.verified) << q.id;
    EXPECT_EQ(q.first_token, 0u) << q.id;  // never decoded
  }
  EXPECT_GT(failed, 20u);
  EXPECT_LT(failed, 40u);
}

INSTANTIATE_TEST_SUITE_P(Serving, FaultedServing,
                         ::testing::Values("layerwise", "push_blocks", "pull_blocks"));

TEST(Serving, SummarysMeanExposedTransferIsTheTablesExposedKvMean) {
  // More requests than the summary lists, some failed by a NIC outage: the closing line still
  // averages every succeeded request, as the percentile table above it does.
  const Scenario s = parse_scenario(
      queue_text(100, 40, 1, 1, 0) + "faults:\n  - {link: roce n1d0, at: 100ms, event: down}\n",
      "<summary>");
  const RunResult r = run_scenario(s, kNoTrace);
  const serving::ServingMetrics m = serving::serving_metrics(r);
  ASSERT_LT(m.succeeded, m.requests);
  const std::string text = summary_text(r);
  const std::size_t at = text.find("mean exposed transfer: ");
  ASSERT_NE(at, std::string::npos) << text;
  double mean_us = 0;
  std::size_t over = 0;
  ASSERT_EQ(
      std::sscanf(text.c_str() + at, "mean exposed transfer: %lf us over %zu", &mean_us, &over), 2);
  EXPECT_EQ(over, m.succeeded);
  EXPECT_NEAR(mean_us, m.exposed.mean, 0.05);
}

TEST(Serving, TwoRunsAreIdentical) {
  const Scenario s = parse_scenario(queue_text(250, 300, 2, 2, 0.5), "<twice>");
  EXPECT_EQ(encode_result(run_scenario(s, kNoTrace)), encode_result(run_scenario(s, kNoTrace)));
}

TEST(Serving, ARequestLargerThanACacheIsRejectedBeforeItRuns) {
  const Scenario s = parse_scenario(
      queue_text(10, 2, 1, 1, 1) + "", "<small>",
      {{"serving.cache_blocks", "8"}});  // 512 prompt + 4 output tokens need 33 blocks of 16
  try {
    (void)run_scenario(s, kNoTrace);
    FAIL() << "a request that can never fit ran";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("33 blocks"), std::string::npos) << e.what();
  }
}

TEST(Serving, WithoutAPrefillSectionDecodeStepsAreThePresetsComputeModel) {
  // One request of 3 output tokens: after the first, two steps over prompt + 1 and + 2 tokens.
  const std::string text = R"(question: decode steps
hardware: {preset: dgx-h100}
model: {name: qwen3-8b, tensor_parallel: 1, dtype: bf16}
cache: {layout: paged, block_tokens: 16}
workload: {requests: 1, interval: 0s, prompt_tokens: 1000, output_tokens: 3}
transfer: {method: pull_blocks, api: 2}
instances: {prefill: 1 x TP1, decode: 1 x TP1}
)";
  const Scenario s = parse_scenario(text, "decode.yaml");
  ASSERT_TRUE(s.prefill_from_preset);
  const RunResult r = run_scenario(s, kNoTrace);
  ASSERT_EQ(r.requests.size(), 1u);
  ASSERT_TRUE(r.requests[0].ok);
  EXPECT_EQ(r.requests[0].completion - r.requests[0].first_token,
            s.decode_step_time(1, 1001) + s.decode_step_time(1, 1002));
  // The step reads the LM head too: Qwen3-8B's 151,936 x 4,096 bf16 weights, 1.24 GB.
  LlmModel headless = s.model;
  headless.vocab = 0;
  const double kv =
      1001.0 * static_cast<double>(s.model.kv_elements_per_token(1)) * 2 * s.model.layers * 2;
  EXPECT_NEAR(
      s.compute.decode_step(s.model, 1, 2, 1, kv) - s.compute.decode_step(headless, 1, 2, 1, kv),
      151936.0 * 4096 * 2 / s.compute.hbm_rate, 1e-12);
}

// Eight requests that need 32 blocks each at their end, on a decode cache of 128 blocks. Reserving
// whole outputs runs four at a time; vLLM's decode side (serving.engine: vllm) takes all eight
// on their prompts' 16 blocks, grows them a block at a time and, with none free, preempts the
// newest, which is computed again and finishes: every request ends, with all its tokens.
TEST(Serving, AnEngineThatGrowsDecodeBlocksPreemptsTheNewestAndComputesItAgain) {
  const std::string text = R"(question: preemption
hardware: {preset: dgx-h100}
model: {name: qwen3-8b, tensor_parallel: 1, dtype: bf16}
cache: {layout: paged, block_tokens: 16}
workload: {requests: 8, interval: 0s, prompt_tokens: 256, output_tokens: 256}
transfer: {method: pull_blocks, api: 2}
instances: {prefill: 1 x TP1, decode: 1 x TP1}
serving: {cache_blocks: 128, verify: 1)";
  const RunResult reserve = run_scenario(parse_scenario(text + "}\n", "reserve.yaml"), kNoTrace);
  const RunResult grow =
      run_scenario(parse_scenario(text + ", engine: vllm}\n", "grow.yaml"), kNoTrace);
  int preempted = 0;
  std::uint64_t reserve_bytes = 0, grow_bytes = 0;
  for (const RunResult* r : {&reserve, &grow}) {
    ASSERT_EQ(r->requests.size(), 8u);
    for (const RequestResult& q : r->requests) {
      EXPECT_TRUE(q.ok && q.verified) << q.status;
      EXPECT_EQ(q.output_tokens, 256u);
      EXPECT_GT(q.completion, q.first_token);
    }
  }
  for (const RequestResult& q : reserve.requests) {
    EXPECT_EQ(q.preemptions, 0);
    reserve_bytes += q.bytes;
  }
  for (const RequestResult& q : grow.requests) {
    preempted += q.preemptions > 0;
    grow_bytes += q.bytes;
  }
  EXPECT_GT(preempted, 0);
  EXPECT_LT(preempted, 8);               // the oldest keeps its blocks
  EXPECT_GT(grow_bytes, reserve_bytes);  // a preempted request's KV moves again, longer
  // The first four start decoding together in both; the last four wait for blocks only when
  // outputs are reserved.
  const auto last_start = [](const RunResult& r) {
    model::SimTime t = 0;
    for (const RequestResult& q : r.requests) t = std::max(t, q.first_token);
    return t;
  };
  EXPECT_LT(last_start(grow), last_start(reserve));
  EXPECT_NE(summary_text(grow).find("requests preempted and computed again"), std::string::npos);
  EXPECT_EQ(summary_text(reserve).find("preempted"), std::string::npos);
}

// A burst that decodes for half a minute: sampled every 1 ms at first (a 200th of a zero arrival
// span), its series would hold ~30,000 samples; pairs merge as the interval doubles, so at most
// 512 stay, in time order, ending near the last completion.
TEST(Serving, ALongRunKeepsABoundedSeriesByDoublingItsSamplingInterval) {
  const std::string text = R"(question: sampling
hardware: {preset: dgx-h100}
model: {name: qwen3-8b, tensor_parallel: 1, dtype: bf16}
cache: {layout: paged, block_tokens: 16}
workload: {requests: 4, interval: 0s, prompt_tokens: 256, output_tokens: 4096}
transfer: {method: pull_blocks, api: 2}
instances: {prefill: 1 x TP1, decode: 1 x TP1}
)";
  const RunResult r = run_scenario(parse_scenario(text, "long.yaml"), kNoTrace);
  ASSERT_GT(r.end, 20 * model::kSec);
  const std::vector<model::SimTime>& t = r.sample_times;
  ASSERT_GE(t.size(), 256u);
  ASSERT_LE(t.size(), 512u);
  for (std::size_t i = 1; i < t.size(); ++i) ASSERT_LT(t[i - 1], t[i]) << i;
  const model::SimTime step = t.back() - t[t.size() - 2];
  EXPECT_GE(step, r.end / 512);  // the interval grew to cover the run
  EXPECT_GE(t.back() + step, r.end);
  for (const TimeSeries& s : r.series) {
    ASSERT_EQ(s.values.size(), t.size()) << s.name;
    if (s.name == "decode0 running") {  // an instantaneous count stays a count
      for (const double v : s.values) EXPECT_EQ(v, std::floor(v)) << s.name;
      EXPECT_EQ(s.values.front(), 4.0);
    }
  }
}

TEST(BlockPool, ScatteredDrawsArePrefixesAndSequentialTakesTheLowestIds) {
  serving::BlockPool a(100, BlockOrder::kScattered), b(100, BlockOrder::kScattered);
  const auto ten = *a.allocate(10, 5);
  const auto four = *b.allocate(4, 5);
  EXPECT_TRUE(std::equal(four.begin(), four.end(), ten.begin()));
  serving::BlockPool seq(10, BlockOrder::kSequential);
  EXPECT_EQ(*seq.allocate(3, 0), (std::vector<std::int64_t>{0, 1, 2}));
  seq.release({1});
  EXPECT_EQ(*seq.allocate(2, 0), (std::vector<std::int64_t>{1, 3}));
  EXPECT_FALSE(seq.allocate(7, 0));
  EXPECT_EQ(seq.free_blocks(), 6);
  EXPECT_THROW(seq.release({9}), std::logic_error);  // never handed out
  // Every id once: draws and releases keep the pool a set.
  serving::BlockPool p(64, BlockOrder::kScattered);
  std::vector<std::int64_t> all;
  for (int i = 0; i < 8; ++i) {
    const auto got = *p.allocate(8, static_cast<std::uint64_t>(i));
    all.insert(all.end(), got.begin(), got.end());
  }
  std::sort(all.begin(), all.end());
  for (std::int64_t i = 0; i < 64; ++i) EXPECT_EQ(all[static_cast<std::size_t>(i)], i);
}

TEST(BlockPool, VllmHandsOutFreshIdsFromOneAndReusesFreedOnesLastBlockFirst) {
  // vllm/v1/core/block_pool.py: block 0 is the null block; a fresh queue gives 1, 2, 3, ...;
  // a finished request's blocks go to the tail in reverse table order.
  serving::BlockPool p(8, BlockOrder::kVllm);
  EXPECT_EQ(p.free_blocks(), 7);
  EXPECT_EQ(*p.allocate(3, 0), (std::vector<std::int64_t>{1, 2, 3}));
  EXPECT_EQ(*p.allocate(2, 0), (std::vector<std::int64_t>{4, 5}));
  p.release({1, 2, 3});
  EXPECT_EQ(*p.allocate(4, 0), (std::vector<std::int64_t>{6, 7, 3, 2}));
  EXPECT_EQ(p.free_blocks(), 1);
  EXPECT_FALSE(p.allocate(2, 0));
  EXPECT_THROW(p.release({0}), std::logic_error);  // the null block is never handed out
  EXPECT_THROW(p.release({1}), std::logic_error);  // free already
  // A repeated id is refused whole: the pool is left as it was.
  EXPECT_THROW(p.release({6, 6}), std::logic_error);
  EXPECT_EQ(p.free_blocks(), 1);
  p.release({6, 7});
  EXPECT_EQ(*p.allocate(3, 0), (std::vector<std::int64_t>{1, 7, 6}));
}

TEST(Percentiles, NearestRank) {
  const serving::Percentiles p = serving::percentiles({5, 1, 4, 2, 3, 6, 7, 8, 9, 10});
  EXPECT_EQ(p.p50, 5);
  EXPECT_EQ(p.p90, 9);
  EXPECT_EQ(p.p99, 10);
  EXPECT_EQ(p.mean, 5.5);
}

}  // namespace
}  // namespace kvsim::sim
