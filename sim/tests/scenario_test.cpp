// Scenario parsing: the schema, overrides, and errors that name file, line and key.
#include "sim/scenario.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <tuple>
#include <utility>

#include "model/errors.h"
#include "model/preset.h"
#include "sim/results_writer.h"
#include "sim/runner.h"

namespace kvsim::sim {
namespace {

const char* kBase = R"(question: How much of TTFT is KV transfer?
hardware:
  preset: atlas-a2
  scale_out:
    bandwidth: 100Gb/s
model:
  name: llama-3-70b
  tensor_parallel: 8
  dtype: bf16
cache:
  layout: paged
  block_tokens: 128
workload:
  requests: 3
  interval: 20ms
  prompt_tokens: 4096
prefill:
  device_tflops: 300
  efficiency: 0.5
transfer:
  method: layerwise
  api: 2
placement:
  prompt_node: 0
  decode_node: 1
faults:
  - link: roce n1d0
    at: 5ms
    event: degrade
    factor: 0.5
)";

TEST(Scenario, ParsesEverySection) {
  const Scenario s = parse_scenario(kBase, "base.yaml");
  EXPECT_EQ(s.preset, "atlas-a2");
  ASSERT_EQ(s.hardware_overrides.size(), 1u);
  EXPECT_EQ(s.hardware_overrides[0], (model::Override{"scale_out.bandwidth", "100Gb/s"}));
  EXPECT_EQ(s.model.layers, 80);
  EXPECT_TRUE(s.paged);
  EXPECT_EQ(s.block_tokens, 128u);
  ASSERT_EQ(s.requests.size(), 3u);
  EXPECT_EQ(s.requests[2].arrival, 40 * model::kMs);
  EXPECT_EQ(s.requests[2].prompt_tokens, 4096u);
  ASSERT_EQ(s.faults.size(), 1u);
  EXPECT_DOUBLE_EQ(s.faults[0].event.factor, 0.5);
  // Per-layer time from FLOPs: (2 t P + 2 t^2 h d) / TP / (TFLOPS x efficiency).
  const double flops = s.model.prefill_flops_per_layer(4096) / 8;
  EXPECT_NEAR(static_cast<double>(s.prefill_layer_time(4096)), flops / (300e12 * 0.5) * 1e12, 1.0);
}

TEST(Scenario, OverridesReachHardwareAndScenarioKeys) {
  const Scenario s = parse_scenario(kBase, "base.yaml",
                                    {{"hardware.scale_out.bandwidth", "400Gb/s"},
                                     {"hardware.scale_out.latency", "3us"},
                                     {"cache.block_tokens", "16"}});
  EXPECT_EQ(s.block_tokens, 16u);
  std::map<std::string, std::string> hw(s.hardware_overrides.begin(), s.hardware_overrides.end());
  EXPECT_EQ(hw["scale_out.bandwidth"], "400Gb/s");
  EXPECT_EQ(hw["scale_out.latency"], "3us");
}

struct Bad {
  std::string key, value, expect;
};

class ScenarioErrors : public ::testing::TestWithParam<Bad> {};

TEST_P(ScenarioErrors, NameFileLineAndKey) {
  const Bad& b = GetParam();
  try {
    parse_scenario(kBase, "base.yaml", {{b.key, b.value}});
    FAIL() << b.key << "=" << b.value << " accepted";
  } catch (const model::ModelError& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.kind(), model::ErrorKind::kFormat) << what;
    EXPECT_NE(what.find("base.yaml:"), std::string::npos) << what;
    EXPECT_NE(what.find(b.expect), std::string::npos) << what;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Sim, ScenarioErrors,
    ::testing::Values(Bad{"model.name", "llama-9", "key 'model.name'"},
                      Bad{"model.dtype", "fp64", "key 'model.dtype' must be one of"},
                      Bad{"model.tensor_parallel", "0", "key 'model.tensor_parallel'"},
                      Bad{"cache.layout", "ring", "key 'cache.layout'"},
                      Bad{"workload.interval", "soon", "key 'workload.interval'"},
                      Bad{"hardware.scale_out.bandwidth", "0Gb/s", "key 'hardware.preset'"},
                      Bad{"transfer.method", "carrier-pigeon", "key 'transfer.method'"},
                      Bad{"placement.decode_node", "7", "key 'placement.decode_node'"},
                      Bad{"workload.colour", "blue", "key 'workload.colour' is not a known key"},
                      Bad{"prefill.efficiency", "1.5", "key 'prefill.efficiency'"},
                      Bad{"question", "bad \xff byte", "key 'question' must be valid UTF-8"},
                      Bad{"workload.interval", "1e30s", "exceeds the bound of 1000000 s"},
                      // In range as numbers, out of range once turned into simulated time.
                      Bad{"prefill.device_tflops", "1e-300",
                          "key 'prefill.device_tflops' with efficiency 0.5 gives a"},
                      Bad{"prefill.efficiency", "1e-300", "with efficiency 1e-300 gives a"},
                      Bad{"transfer.path", "rdma_magic",
                          "key 'transfer.path' must name one of the preset's transfer paths"}));

TEST(Scenario, WithoutAPrefillSectionThePresetsComputePricesPrefill) {
  std::string text = kBase;
  const auto from = text.find("prefill:"), to = text.find("transfer:");
  text.erase(from, to - from);
  const Scenario s = parse_scenario(text, "base.yaml");
  const model::TopologySpec spec = model::load_preset("atlas-a2", s.hardware_overrides);
  EXPECT_EQ(s.device_tflops, spec.compute.tflops_bf16);
  EXPECT_TRUE(s.prefill_from_preset);
  // The preset's roofline prices a layer, and the scenario's dtype picks the peak.
  const ComputeModel c = ComputeModel::from(spec, "bf16");
  EXPECT_EQ(
      s.prefill_layer_time(4096),
      static_cast<model::SimTime>(std::ceil(c.prefill_layer(s.model, 4096, 8, 2).total() * 1e12)));
  // A hardware override of the preset's compute reaches it.
  const Scenario faster =
      parse_scenario(text, "base.yaml", {{"hardware.compute.gemm_efficiency", "0.9"}});
  EXPECT_LT(faster.prefill_layer_time(4096), s.prefill_layer_time(4096));
  // A2 has no FP8 compute: the scenario must say, and the error says which section.
  try {
    parse_scenario(text, "base.yaml", {{"model.dtype", "fp8"}});
    ADD_FAILURE() << "fp8 on A2 without prefill: accepted";
  } catch (const model::ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("key 'prefill' is required: preset atlas-a2 gives no "
                                         "fp8 compute"),
              std::string::npos)
        << e.what();
  }
}

TEST(Scenario, AnEngineProfileAddsItsCostsAroundPrefillTransferAndTheFirstDecodeStep) {
  std::string text = kBase;
  text.erase(text.find("faults:"));
  const std::vector<ScenarioOverride> pull{{"transfer.method", "pull_blocks"},
                                           {"workload.requests", "1"}};
  RunOptions quiet;
  quiet.trace = false;
  const Scenario bare_s = parse_scenario(text, "base.yaml", pull);
  EXPECT_EQ(bare_s.engine.name, "none");
  const RunResult bare = run_scenario(bare_s, quiet);
  auto with = pull;
  with.insert(with.end(), {{"serving.engine", "vllm"},
                           {"serving.request_overhead", "7ms"},
                           {"serving.handoff", "3ms"},
                           {"serving.transfer_overhead", "1ms"},
                           {"serving.first_token_overhead", "2ms"}});
  const Scenario vllm_s = parse_scenario(text, "base.yaml", with);
  const RunResult vllm = run_scenario(vllm_s, quiet);
  ASSERT_EQ(bare.requests.size(), 1u);
  ASSERT_EQ(vllm.requests.size(), 1u);
  const RequestResult &b = bare.requests[0], &v = vllm.requests[0];
  ASSERT_TRUE(b.ok && v.ok);
  EXPECT_EQ(b.ttft(), b.kv_ready());  // no engine: the first token is not modelled
  EXPECT_EQ(v.prefill_start - b.prefill_start, 7 * model::kMs);
  EXPECT_EQ(v.transfer_start - v.prefill_end, 3 * model::kMs);
  EXPECT_EQ(v.exposed(), b.exposed() + model::kMs);  // the handoff is not transfer time
  const model::SimTime step = vllm_s.decode_step_time(1, 4096);
  EXPECT_GT(step, 0u);
  EXPECT_EQ(v.ttft(), b.ttft() + (7 + 3 + 1 + 2) * model::kMs + step);
  // A bootstrap longer than prefill holds the pull back to arrival + bootstrap.
  auto slow = pull;
  slow.insert(slow.end(), {{"serving.engine", "sglang"},
                           {"serving.request_overhead", "0s"},
                           {"serving.bootstrap", "5s"}});
  const RunResult boot = run_scenario(parse_scenario(text, "base.yaml", slow), quiet);
  EXPECT_EQ(boot.requests.at(0).transfer_start, boot.requests[0].arrival + 5 * model::kSec);
  // Costs need an engine, and an unknown engine names the choices.
  for (const auto& [key, value, rule] :
       {std::tuple<std::string, std::string, std::string>{
            "serving.handoff", "1ms", "key 'serving.handoff' sets an engine cost"},
        {"serving.engine", "tgi", "engine 'tgi' is not in"},
        {"serving.router", "round_robin", "key 'serving.router' needs an instances section"}}) {
    try {
      parse_scenario(text, "base.yaml", {{key, value}});
      ADD_FAILURE() << key << "=" << value << " accepted";
    } catch (const model::ModelError& e) {
      EXPECT_NE(std::string(e.what()).find(rule), std::string::npos) << e.what();
    }
  }
}

// vLLM's and SGLang's kv_cache_dtype "auto" keeps KV in the activation dtype whatever the
// weights' quantization; without such an engine, or when the scenario says, KV is as set.
TEST(Scenario, TheKvCacheDtypeFollowsTheEngineUnlessTheScenarioSetsIt) {
  std::string text = kBase;
  text.erase(text.find("faults:"));
  const std::vector<ScenarioOverride> one{{"workload.requests", "1"},
                                          {"transfer.method", "pull_blocks"}};
  auto with = [&](std::vector<ScenarioOverride> more) {
    more.insert(more.begin(), one.begin(), one.end());
    return parse_scenario(text, "base.yaml", more);
  };
  for (const auto& [dtype, engine, kv, expect, bytes] :
       {std::tuple<std::string, std::string, std::string, std::string, std::uint32_t>{
            "int8", "", "", "int8", 1},
        {"int8", "vllm", "", "bf16", 2},
        {"int8", "sglang", "", "bf16", 2},
        {"int8", "mindie", "", "int8", 1},
        {"int8", "vllm", "int8", "int8", 1},
        {"bf16", "vllm", "", "bf16", 2},
        {"bf16", "", "fp8", "fp8", 1}}) {
    std::vector<ScenarioOverride> set{{"model.dtype", dtype}};
    if (!engine.empty()) set.push_back({"serving.engine", engine});
    if (!kv.empty()) set.push_back({"cache.kv_dtype", kv});
    const Scenario s = with(set);
    EXPECT_EQ(s.kv_dtype, expect) << dtype << " " << engine << " " << kv;
    EXPECT_EQ(s.kv_dtype_bytes, bytes) << dtype << " " << engine << " " << kv;
  }
  // The caches registered, and so the bytes moved, hold the KV dtype: twice the int8 bytes.
  RunOptions quiet;
  quiet.trace = false;
  const RunResult bf16_kv =
      run_scenario(with({{"model.dtype", "int8"}, {"serving.engine", "vllm"}}), quiet);
  const RunResult int8_kv = run_scenario(
      with({{"model.dtype", "int8"}, {"serving.engine", "vllm"}, {"cache.kv_dtype", "int8"}}),
      quiet);
  ASSERT_TRUE(bf16_kv.requests.at(0).ok && int8_kv.requests.at(0).ok);
  EXPECT_EQ(bf16_kv.requests[0].bytes, 2 * int8_kv.requests[0].bytes);
  EXPECT_NE(summary_text(bf16_kv).find("TP8 int8 (KV bf16), "), std::string::npos);
  EXPECT_NE(summary_text(int8_kv).find("TP8 int8, "), std::string::npos);
  try {
    with({{"cache.kv_dtype", "fp4"}});
    ADD_FAILURE() << "cache.kv_dtype fp4 accepted";
  } catch (const model::ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("key 'cache.kv_dtype' must be one of bf16, fp16, fp32, "
                                         "int8, fp8"),
              std::string::npos)
        << e.what();
  }
}

// An engine profile names its KV dtype rule with one of two words, and states every cost.
TEST(Scenario, AnEngineProfileWithABadKvRuleOrAMissingCostIsRefusedByKey) {
  const std::string path = ::testing::TempDir() + "/kvsim_engines_test.yaml";
  const char* const costs =
      "  request_overhead: 1ms\n  bootstrap: 0s\n  handoff: 0s\n  transfer_overhead: 0s\n"
      "  first_token_overhead: 1ms\n";
  for (const auto& [extra, rule] :
       {std::pair<std::string, std::string>{"  decode_request_overhead: 10us\n"
                                            "  kv_cache_dtype: fp8\n",
                                            "key 'x.kv_cache_dtype' must be auto or model"},
        {"  kv_cache_dtype: auto\n", "key 'x.decode_request_overhead' is missing"},
        {"  decode_request_overhead: 10us\n  kv_cache_dtype: model\n", ""}}) {
    std::ofstream(path) << "x:\n" << costs << extra;
    ::setenv("KVSIM_ENGINES", path.c_str(), 1);
    if (rule.empty()) {
      const EngineProfile e = load_engine("x");
      EXPECT_FALSE(e.kv_in_activation_dtype);
      EXPECT_EQ(e.decode_request_overhead, 10 * model::kUs);
    } else {
      try {
        load_engine("x");
        ADD_FAILURE() << extra << " accepted";
      } catch (const model::ModelError& err) {
        EXPECT_NE(std::string(err.what()).find(rule), std::string::npos) << err.what();
      }
    }
    ::unsetenv("KVSIM_ENGINES");
  }
  std::remove(path.c_str());
}

// The engine's host work per running request is added to each decode step, once per request.
TEST(Scenario, ADecodeStepPaysTheEnginesCostPerRunningRequest) {
  std::string text = kBase;
  text.erase(text.find("faults:"));
  auto step = [&](const std::string& cost, std::uint64_t batch) {
    return parse_scenario(text, "base.yaml",
                          {{"workload.requests", "1"},
                           {"serving.engine", "vllm"},
                           {"serving.decode_request_overhead", cost}})
        .decode_step_time(batch, 4096 * batch);
  };
  for (const std::uint64_t batch : {1u, 4u, 64u}) {
    EXPECT_EQ(step("1ms", batch) - step("0s", batch), batch * model::kMs) << batch;
  }
  EXPECT_GT(step("0s", 64), step("0s", 1));  // the device step itself grows with the KV read
}

TEST(Scenario, HostMemoryCachesNeedTheApiThatTakesThem) {
  const Scenario s = parse_scenario(
      kBase, "base.yaml", {{"transfer.method", "pull_blocks"}, {"cache.prompt_memory", "host"}});
  EXPECT_TRUE(s.prompt_on_host);
  EXPECT_FALSE(s.decode_on_host);
  for (const auto& [sets, rule] :
       {std::pair<std::vector<ScenarioOverride>, std::string>{
            {{"cache.decode_memory", "disk"}}, "key 'cache.decode_memory' must be device or host"},
        {{{"cache.prompt_memory", "host"}},
         "key 'transfer.method' must be pull_blocks with cache.prompt_memory: host"},
        {{{"cache.decode_memory", "host"}, {"transfer.api", "1"}},
         "key 'transfer.api' must be 2 with a cache in host memory"}}) {
    try {
      parse_scenario(kBase, "base.yaml", sets);
      ADD_FAILURE() << rule << ": accepted";
    } catch (const model::ModelError& e) {
      EXPECT_NE(std::string(e.what()).find(rule), std::string::npos) << e.what();
    }
  }
}

TEST(Scenario, TransferPathChoosesThePresetsPathBeforeTheUsersOverrides) {
  const Scenario cs = parse_scenario(kBase, "base.yaml", {{"transfer.path", "hixl_cs"}});
  ASSERT_FALSE(cs.hardware_overrides.empty());
  EXPECT_EQ(cs.hardware_overrides.front(), (model::Override{"path", "hixl_cs"}));
  EXPECT_EQ(model::load_preset(cs.preset, cs.hardware_overrides).path, "hixl_cs");
  // The user's own hardware override comes after the path's, so it wins.
  const Scenario pinned = parse_scenario(
      kBase, "base.yaml",
      {{"transfer.path", "hixl_cs"}, {"hardware.paths.hixl_cs.scale_out.descriptor_cost", "2us"}});
  EXPECT_EQ(
      model::load_preset(pinned.preset, pinned.hardware_overrides).scale_out.path.descriptor_cost,
      std::optional<model::SimTime>(2 * model::kUs));
}

// A serving cluster in place of the placement.
std::string serving_text(const std::string& instances, const std::string& extra = "") {
  std::string t = kBase;
  t.replace(t.find("placement:"), t.find("faults:") - t.find("placement:"),
            "instances: " + instances + "\n" + extra);
  return t;
}

std::string error_of(const std::string& text) {
  try {
    parse_scenario(text, "s.yaml");
  } catch (const model::ModelError& e) {
    return e.what();
  }
  return "accepted";
}

TEST(Scenario, ServingClusterParsesAndChecksItsShape) {
  const Scenario s = parse_scenario(
      serving_text("{prefill: 1 x TP8, decode: 1}",
                   "serving: {router: round_robin, verify: 0.25, slo: {ttft: 1s}}\n"),
      "s.yaml");
  ASSERT_TRUE(s.serving);
  EXPECT_EQ(s.serving->prefill_instances, 1);
  EXPECT_EQ(s.serving->router, ServingSpec::Router::kRoundRobin);
  EXPECT_EQ(s.serving->verify_fraction, 0.25);
  EXPECT_EQ(s.serving->slo_ttft, 1000 * model::kMs);
  EXPECT_NE(error_of(serving_text("{prefill: 2 x TP4, decode: 1}"))
                .find("s.yaml:23: key 'instances.prefill' has TP4 but model.tensor_parallel is 8"),
            std::string::npos)
      << error_of(serving_text("{prefill: 2 x TP4, decode: 1}"));
  EXPECT_NE(error_of(serving_text("{prefill: 2, decode: 2}")).find("need 4 nodes"),
            std::string::npos);
  EXPECT_NE(error_of(serving_text("{prefill: two, decode: 1}")).find("e.g. '2 x TP8'"),
            std::string::npos);
  EXPECT_NE(error_of(serving_text("{prefill: 1, decode: 1}", "serving: {verify: 2}\n"))
                .find("key 'serving.verify'"),
            std::string::npos);
}

TEST(Scenario, NestingPastYamlCppsLimitNamesTheFileAndLine) {
  // yaml-cpp's own depth guard used to surface as its bare "bad file".
  const std::string deep =
      "question: deep\nhardware: " + std::string(3000, '[') + std::string(3000, ']') + "\n";
  try {
    parse_scenario(deep, "deep.yaml");
    FAIL() << "a 3000-level document was accepted";
  } catch (const model::ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("deep.yaml:2: nests deeper than"), std::string::npos)
        << e.what();
  }
}

TEST(Scenario, AnAliasBombIsRefusedBeforeAnyKeyIsRead) {
  // Nine levels of ten aliases: 10^9 nodes once expanded, from a few hundred bytes.
  std::string bomb = "hardware:\n  preset: atlas-a2\n  l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 9; ++i) {
    const std::string prev = "*l" + std::to_string(i - 1);
    bomb += "  l" + std::to_string(i) + ": &l" + std::to_string(i) + " [";
    for (int k = 0; k < 10; ++k) bomb += prev + (k < 9 ? ", " : "]\n");
  }
  try {
    parse_scenario("question: bomb\n" + bomb, "bomb.yaml");
    FAIL() << "an alias bomb was accepted";
  } catch (const model::ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("bomb.yaml: expands to more than 1000000 nodes"),
              std::string::npos)
        << e.what();
  }
}

TEST(Scenario, UnknownFaultLinkNamesTheLink) {
  std::string text = kBase;
  text.replace(text.find("roce n1d0"), 9, "roce n9d9");
  try {
    parse_scenario(text, "f.yaml");
    FAIL();
  } catch (const model::ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("faults[0].link"), std::string::npos) << e.what();
  }
}

TEST(Scenario, TraceFileGivesArrivalsAndLengths) {
  const std::string dir = ::testing::TempDir();
  {
    std::ofstream out(dir + "/trace.csv");
    out << "arrival_ms,prompt_tokens\n0,1024\n2.5,8192\n";
  }
  std::string text = kBase;
  text.replace(text.find("  requests: 3\n  interval: 20ms\n  prompt_tokens: 4096\n"), 52,
               "  trace: trace.csv\n");
  const Scenario s = parse_scenario(text, "t.yaml", {}, dir);
  std::remove((dir + "/trace.csv").c_str());
  ASSERT_EQ(s.requests.size(), 2u);
  EXPECT_EQ(s.requests[1].arrival, 2500 * model::kUs);
  EXPECT_EQ(s.requests[1].prompt_tokens, 8192u);
}

}  // namespace
}  // namespace kvsim::sim
