// The scenario library (label scenarios): every scenario runs with every request verified, its
// result.json matches the reviewed golden file exactly (simulated times to the picosecond), and a
// scenario with a closed-form answer gives exactly that answer.
// Regenerate goldens after an intended behaviour change:
//   KVSIM_UPDATE_GOLDEN=1 ctest --test-dir build -L scenarios   (then review `git diff
//   scenarios/golden`)
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "model/units.h"
#include "sim/results_writer.h"
#include "sim/runner.h"
#include "sim/scenario.h"

#ifndef KVSIM_SOURCE_DIR
#define KVSIM_SOURCE_DIR "."
#endif

namespace kvsim::sim {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> library() {
  std::vector<std::string> names;
  for (const auto& e :
       fs::directory_iterator(std::string(KVSIM_SOURCE_DIR) + "/scenarios/library")) {
    if (e.path().extension() == ".yaml") names.push_back(e.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

class Library : public ::testing::TestWithParam<std::string> {};

TEST_P(Library, RunsVerifiedAndMatchesItsGoldenResult) {
  const std::string src = KVSIM_SOURCE_DIR;
  // Relative origin, so the golden text does not depend on where the tree lives.
  const std::string rel = "scenarios/library/" + GetParam() + ".yaml";
  Scenario s = load_scenario(src + "/" + rel);
  s.origin = rel;
  ASSERT_FALSE(s.question.empty());
  RunOptions options;
  options.trace = false;
  const RunResult r = run_scenario(s, options);
  ASSERT_FALSE(r.requests.empty());
  for (const auto& q : r.requests) {
    if (!s.faults.empty()) continue;  // fault scenarios pin their statuses in the golden file
    EXPECT_TRUE(q.ok) << "request " << q.id << ": " << q.status;
    EXPECT_TRUE(q.verified) << "request " << q.id;
  }
  const std::string text = result_json(r);
  const std::string golden = src + "/scenarios/golden/" + GetParam() + ".json";
  if (std::getenv("KVSIM_UPDATE_GOLDEN")) {
    std::ofstream(golden) << text;
    GTEST_SKIP() << "golden rewritten: " << golden;
  }
  std::ifstream in(golden);
  ASSERT_TRUE(in) << "no golden result " << golden << " (KVSIM_UPDATE_GOLDEN=1 writes it)";
  std::stringstream want;
  want << in.rdbuf();
  EXPECT_EQ(text, want.str()) << "behaviour changed; if intended, regenerate and review the diff";
}

INSTANTIATE_TEST_SUITE_P(Scenarios, Library, ::testing::ValuesIn(library()), [](const auto& p) {
  std::string n = p.param;
  for (char& c : n) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return n;
});

// One request, idle links, compute per layer far above transfer per layer: the exposed time is
// the last layer's transfer alone, which on an idle path is setup + 2 descriptors + bytes over
// the bottleneck + latency (contiguous cache: one row per tensor).
TEST(ClosedForm, ExposedTimeIsTheLastLayersIdlePathTime) {
  const char* text = R"(question: closed form
hardware:
  preset: atlas-a2
model:
  name: llama-3-8b
  tensor_parallel: 1
  dtype: bf16
cache:
  layout: contiguous
workload:
  requests: 1
  interval: 1ms
  prompt_tokens: 2048
prefill:
  layer_time: 5ms
transfer:
  method: layerwise
  api: 2
placement:
  prompt_node: 0
  decode_node: 1
)";
  const Scenario s = parse_scenario(text, "closed.yaml");
  const RunResult r = run_scenario(s, {});
  ASSERT_EQ(r.requests.size(), 1u);
  const model::TopologySpec spec = model::load_preset("atlas-a2");
  const double row = 2048.0 * 8 * 128 * 2;  // tokens x KV heads x head_dim x bf16
  const double bottleneck =
      std::min({spec.scale_out.effective(), spec.hbm_bandwidth, spec.dma.bandwidth});
  // A push (the source's engine writes) over RoCE: the scale-out path's cost per descriptor.
  const model::SimTime cost =
      spec.scale_out.path.descriptor_cost.value_or(spec.dma.descriptor_cost);
  const model::SimTime expected = spec.dma.batch_setup + 2 * cost +
                                  model::transfer_time(2 * row, bottleneck) +
                                  spec.scale_out.latency;
  EXPECT_EQ(r.requests[0].exposed(), expected);
  EXPECT_EQ(r.requests[0].prefill_end - r.requests[0].prefill_start, 32 * 5 * model::kMs);
  EXPECT_EQ(r.requests[0].bytes, static_cast<std::uint64_t>(2 * row * 32));
  EXPECT_TRUE(r.requests[0].verified);
}

}  // namespace
}  // namespace kvsim::sim
