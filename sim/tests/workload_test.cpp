// Workloads: the trace loaders against the figures their publishers give, the transforms, the
// synthetic arrival processes against their distributions, and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <sstream>

#include "model/errors.h"
#include "sim/scenario.h"
#include "sim/serving/workload.h"

namespace kvsim::sim::serving {
namespace {

const std::string kTraces = std::string(KVSIM_SOURCE_DIR) + "/scenarios/traces/";

double mean_of(const std::vector<WorkloadRequest>& w, std::uint64_t WorkloadRequest::*field) {
  double sum = 0;
  for (const auto& r : w) sum += static_cast<double>(r.*field);
  return sum / static_cast<double>(w.size());
}

TEST(Workload, MooncakeConversationMatchesItsPublishedFigures) {
  const auto w = read_trace(kTraces + "mooncake_conversation_trace.jsonl");
  ASSERT_EQ(w.size(), 12031u);
  // FAST25-release/README.md: 12,035 input and 343 output tokens on average over 3,537 s.
  EXPECT_NEAR(mean_of(w, &WorkloadRequest::prompt_tokens), 12035, 1);
  EXPECT_NEAR(mean_of(w, &WorkloadRequest::output_tokens), 343, 1);
  EXPECT_NEAR(model::to_seconds(w.back().arrival), 3537, 1);
  EXPECT_EQ(w.front().hash_ids.size(), 14u);
  EXPECT_EQ(w.front().hash_ids[13], 13u);
}

TEST(Workload, AzureConversationMatchesItsPublishedFigures) {
  const auto w = read_trace(kTraces + "azure_llm_inference_2023_conv.csv");
  ASSERT_EQ(w.size(), 19366u);
  EXPECT_NEAR(mean_of(w, &WorkloadRequest::prompt_tokens), 1155, 1);
  std::uint64_t longest = 0;
  for (const auto& r : w) longest = std::max(longest, r.prompt_tokens);
  EXPECT_EQ(longest, 14050u);
  EXPECT_EQ(w.front().arrival, 0u);
  const double minutes = model::to_seconds(w.back().arrival) / 60;
  EXPECT_GT(minutes, 55);
  EXPECT_LT(minutes, 61);
  // Arrival times keep the trace's 100 ns digits: the second request is 4.3145790 s later.
  EXPECT_EQ(w[1].arrival, 4'314'579'000'000u);
}

TEST(Workload, WindowRateCapAndLimitApplyInOrder) {
  const auto all = read_trace(kTraces + "mooncake_conversation_trace.jsonl");
  TraceOptions o;
  o.window_from = 600 * model::kSec;
  o.window_to = 1200 * model::kSec;
  o.rate_scale = 2;
  o.max_prompt_tokens = 4096;
  const auto w = read_trace(kTraces + "mooncake_conversation_trace.jsonl", o);
  std::size_t in_window = 0;
  for (const auto& r : all)
    in_window += r.arrival >= 600 * model::kSec && r.arrival < 1200 * model::kSec;
  ASSERT_EQ(w.size(), in_window);
  EXPECT_LT(w.back().arrival, 300 * model::kSec);  // 600 s of traffic at twice the rate
  for (const auto& r : w) EXPECT_LE(r.prompt_tokens, 4096u);
  o.limit = 10;
  EXPECT_EQ(read_trace(kTraces + "mooncake_conversation_trace.jsonl", o).size(), 10u);
}

TEST(Workload, PoissonAndGammaGapsHaveTheirMoments) {
  SyntheticSpec s;
  s.process = SyntheticSpec::Process::kPoisson;
  s.rate = 10;
  s.count = 40000;
  s.prompt.value = 1;
  auto moments = [](const std::vector<WorkloadRequest>& w) {
    std::vector<double> gaps;
    for (std::size_t i = 1; i < w.size(); ++i) {
      gaps.push_back(model::to_seconds(w[i].arrival - w[i - 1].arrival));
    }
    const double n = static_cast<double>(gaps.size());
    const double m = std::accumulate(gaps.begin(), gaps.end(), 0.0) / n;
    double v = 0;
    for (double g : gaps) v += (g - m) * (g - m);
    return std::pair<double, double>{m, std::sqrt(v / n) / m};
  };
  const auto [mean, cv] = moments(synthesize(s));
  EXPECT_NEAR(mean, 0.1, 4 * 0.1 / std::sqrt(40000.0));  // four standard errors
  EXPECT_NEAR(cv, 1.0, 0.03);
  s.process = SyntheticSpec::Process::kGamma;
  s.cv = 2;
  const auto [gmean, gcv] = moments(synthesize(s));
  EXPECT_NEAR(gmean, 0.1, 4 * 0.2 / std::sqrt(40000.0));
  EXPECT_NEAR(gcv, 2.0, 0.1);
  // The arrival process does not change the prompts a seed draws (separate streams).
  SyntheticSpec a = s, b = s;
  a.prompt = b.prompt = {LengthSpec::Kind::kUniform, 0, 512, 4096, 0, 0};
  a.process = SyntheticSpec::Process::kPoisson;
  b.process = SyntheticSpec::Process::kGamma;
  b.output = {LengthSpec::Kind::kUniform, 0, 1, 100, 0, 0};
  const auto wa = synthesize(a), wb = synthesize(b);
  for (std::size_t i = 0; i < 100; ++i) EXPECT_EQ(wa[i].prompt_tokens, wb[i].prompt_tokens) << i;
  // Seeded: the same seed, the same arrivals; another seed, others.
  EXPECT_EQ(synthesize(s)[100].arrival, synthesize(s)[100].arrival);
  SyntheticSpec t = s;
  t.seed = 2;
  EXPECT_NE(synthesize(t)[100].arrival, synthesize(s)[100].arrival);
}

TEST(Workload, LognormalLengthsHaveTheirMedianAndBounds) {
  SyntheticSpec s;
  s.count = 20001;
  s.rate = 1;
  s.prompt.kind = LengthSpec::Kind::kLognormal;
  s.prompt.median = 2000;
  s.prompt.sigma = 1;
  s.prompt.min = 16;
  s.prompt.max = 32768;
  auto w = synthesize(s);
  std::vector<std::uint64_t> lengths;
  for (const auto& r : w) lengths.push_back(r.prompt_tokens);
  std::nth_element(lengths.begin(), lengths.begin() + 10000, lengths.end());
  EXPECT_NEAR(static_cast<double>(lengths[10000]), 2000, 60);
  for (auto l : lengths) {
    EXPECT_GE(l, 16u);
    EXPECT_LE(l, 32768u);
  }
}

TEST(Workload, BadTracesNameFileAndLine) {
  const std::string path = ::testing::TempDir() + "bad_trace.jsonl";
  std::ofstream(path) << "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1}\n"
                         "{\"timestamp\": 5, \"input_length\": \"x\", \"output_length\": 1}\n";
  try {
    read_trace(path);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("bad_trace.jsonl:2: input_length"), std::string::npos)
        << e.what();
  }
  std::remove(path.c_str());
  const std::string azure = ::testing::TempDir() + "bad_azure.csv";
  std::ofstream(azure) << "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,0,3\n";
  EXPECT_THROW(read_trace(azure), std::invalid_argument);
  std::remove(azure.c_str());
  TraceOptions o;
  o.window_from = 5 * model::kSec;
  o.window_to = 5 * model::kSec;
  EXPECT_THROW(read_trace(kTraces + "azure_llm_inference_2023_conv.csv", o), std::invalid_argument);
  o.window_to = std::nullopt;
  o.window_from = 100000 * model::kSec;
  try {
    read_trace(kTraces + "azure_llm_inference_2023_conv.csv", o);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("no request left"), std::string::npos);
  }
}

TEST(Workload, TimesPastTheBoundAreRefusedWhereTheyAreRead) {
  const std::string path = ::testing::TempDir() + "far_trace.jsonl";
  std::ofstream(path) << "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1}\n"
                         "{\"timestamp\": 1e30, \"input_length\": 10, \"output_length\": 1}\n";
  try {
    read_trace(path);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("far_trace.jsonl:2: timestamp: is past the time bound"),
              std::string::npos)
        << e.what();
  }
  std::remove(path.c_str());
  TraceOptions slow;
  slow.rate_scale = 1e-6;  // an hour of trace stretched past the bound
  EXPECT_THROW(read_trace(kTraces + "mooncake_conversation_trace.jsonl", slow),
               std::invalid_argument);
  SyntheticSpec s;
  s.count = 3;
  s.interval = model::kMaxTime;  // the third arrival would be at 2 x the bound
  s.prompt.value = 1;
  EXPECT_THROW(synthesize(s), std::invalid_argument);
}

TEST(Workload, LinesTokensAndFilesHaveStatedBounds) {
  const auto rule_of = [](const std::string& text, TraceFormat format) -> std::string {
    std::istringstream in(text);
    TraceOptions o;
    o.format = format;
    try {
      parse_trace(in, "t", o);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "accepted";
  };
  // A line longer than 1 MiB is refused as it is read, not after it has been buffered whole.
  EXPECT_EQ(
      rule_of("0,10\n" + std::string(kMaxTraceLineBytes + 1, '1') + "\n", TraceFormat::kKvsim),
      "t:2: is longer than the bound of 1 MiB");
  EXPECT_EQ(rule_of("0," + std::to_string(kMaxTraceTokens) + "\n", TraceFormat::kKvsim),
            "accepted");
  EXPECT_NE(rule_of("0," + std::to_string(kMaxTraceTokens + 1) + "\n", TraceFormat::kKvsim)
                .find("0 < tokens <= 2^24"),
            std::string::npos);
  EXPECT_EQ(rule_of("{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 16777217}\n",
                    TraceFormat::kMooncake),
            "t:1: output_length: is above the bound of 2^24 tokens");
  EXPECT_NE(rule_of("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,16777217,3\n",
                    TraceFormat::kAzure)
                .find("0 < ContextTokens <= 2^24"),
            std::string::npos);
  // Only regular files are traces: a device or a folder would block or make no sense.
  for (const std::string& path : {std::string("/dev/zero"), ::testing::TempDir()}) {
    try {
      read_trace(path);
      FAIL() << path;
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()), path + ": is not a regular file");
    }
  }
}

TEST(Workload, ScenarioKeysReachTheLoaderAndBadOnesNameTheKey) {
  const std::string head =
      "question: q\nhardware: {preset: atlas-a2}\nmodel: {name: llama-3-8b, "
      "tensor_parallel: 8, dtype: bf16}\ncache: {layout: paged, block_tokens: "
      "128}\n";
  const std::string tail =
      "prefill: {layer_time: 1us}\ntransfer: {method: layerwise, api: 2}\n"
      "placement: {prompt_node: 0, decode_node: 1}\n";
  const Scenario s = parse_scenario(
      head +
          "workload:\n  trace: {file: mooncake_conversation_trace.jsonl, rate_scale: 4, "
          "window: {from: 0s, to: 60s}, max_prompt_tokens: 8192}\n" +
          tail,
      "x.yaml", {}, kTraces);
  ASSERT_FALSE(s.requests.empty());
  EXPECT_LT(s.requests.back().arrival, 15 * model::kSec);
  const Scenario p =
      parse_scenario(head +
                         "workload:\n  requests: 50\n  arrivals: {process: poisson, rate: 20}\n"
                         "  prompt_tokens: {distribution: lognormal, median: 1000, sigma: 0.5}\n"
                         "  output_tokens: 200\n" +
                         tail,
                     "x.yaml");
  ASSERT_EQ(p.requests.size(), 50u);
  EXPECT_EQ(p.requests[7].output_tokens, 200u);
  try {
    parse_scenario(head + "workload:\n  trace: {file: x.jsonl, speed: 2}\n" + tail, "x.yaml");
    FAIL();
  } catch (const model::ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("x.yaml:6: key 'workload.trace.speed'"), std::string::npos)
        << e.what();
  }
  try {
    parse_scenario(head +
                       "workload:\n  requests: 5\n  arrivals: {process: bursty, rate: 1}\n"
                       "  prompt_tokens: 10\n" +
                       tail,
                   "x.yaml");
    FAIL();
  } catch (const model::ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("workload.arrivals.process"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace kvsim::sim::serving
