// Points in child processes: a point's result comes back exactly as an in-process run gives it,
// next to a World the parent keeps alive; the sweep order, figures and CSV.
#include "sim/point_runs.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "model/errors.h"
#include "sim/child_frames.h"
#include "sim/result_codec.h"
#include "sim/results_writer.h"
#include "sim/sweep.h"
#include "sim/sweep_store.h"
#include "sim/world.h"

namespace kvsim::sim {
namespace {

const char* kSmall = R"(question: A small model between two A2 nodes
hardware:
  preset: atlas-a2
model:
  name: tiny
  layers: 4
  hidden: 1024
  intermediate: 4096
  heads: 8
  kv_heads: 8
  head_dim: 128
  tensor_parallel: 1
  dtype: bf16
cache:
  layout: paged
  block_tokens: 128
workload:
  requests: 2
  interval: 1ms
  prompt_tokens: 512
prefill:
  layer_time: 100us
transfer:
  method: layerwise
  api: 2
placement:
  prompt_node: 0
  decode_node: 1
)";

ScenarioSource small() {
  ScenarioSource s;
  s.text = kSmall;
  s.origin = "small";
  return s;
}

TEST(PointRunsTest, ChildResultEqualsAnInProcessRun) {
  const std::vector<ScenarioOverride> point = {{"hardware.scale_out.bandwidth", "400Gb/s"}};
  RunResult here = run_scenario(small().load(point), RunOptions{true, {}, {}});
  std::vector<std::size_t> requests_seen;
  PointRunOptions o;
  o.trace = true;
  o.request_progress = [&](std::size_t p, std::size_t done, std::size_t total) {
    EXPECT_EQ(p, 0u);
    EXPECT_EQ(total, 2u);
    requests_seen.push_back(done);
  };
  World kept("atlas-a2");  // the parent's world stays alive and untouched
  const auto out = run_points(small(), {point}, o);
  ASSERT_EQ(out.size(), 1u);
  ASSERT_TRUE(out[0].result) << out[0].error;
  EXPECT_EQ(out[0].exit_code, 0);
  EXPECT_EQ(result_json(*out[0].result), result_json(here));
  EXPECT_EQ(summary_text(*out[0].result), summary_text(here));
  EXPECT_EQ(out[0].result->trace_json, here.trace_json);
  ASSERT_EQ(out[0].result->compute.size(), here.compute.size());
  EXPECT_EQ(out[0].result->compute.back().end, here.compute.back().end);
  EXPECT_EQ(requests_seen, (std::vector<std::size_t>{1, 2}));
  EXPECT_EQ(kept.platform().now(), 0u);
}

TEST(PointRunsTest, CodecRoundTripsExactly) {
  RunResult r = run_scenario(small().load({}), RunOptions{false, {}, {}});
  r.links.push_back({"x", "roce", 1.0 / 3.0, 0.1 + 0.2});
  r.relinks = 3;  // a serving engine's recovery (a sweep's fault campaign reads them back)
  ASSERT_FALSE(r.requests.empty());
  r.requests.back().retries = 2;
  r.requests.back().recomputes = 1;   // and process_killed's
  r.requests.back().preemptions = 5;  // and an incremental decode side's
  r.restarts = 4;
  const RunResult back = decode_result(encode_result(r), r.scenario);
  EXPECT_EQ(result_json(back), result_json(r));
  EXPECT_EQ(back.relinks, 3);
  EXPECT_EQ(back.requests.back().retries, 2);
  EXPECT_EQ(back.requests.back().recomputes, 1);
  EXPECT_EQ(back.requests.back().preemptions, 5);
  EXPECT_EQ(back.restarts, 4);
  EXPECT_EQ(back.links.back().bytes, 1.0 / 3.0);
  EXPECT_EQ(back.links.back().utilization, 0.1 + 0.2);
  EXPECT_THROW(decode_result("not cbor", r.scenario), std::runtime_error);
}

TEST(PointRunsTest, ARewrittenSweepPointDropsTheTemporariesOfAKilledWriter) {
  // A writer killed between write_file_atomic's write and rename leaves "<name>.tmp<pid>"; the
  // resumed sweep reruns that point, and its folder must end as an uninterrupted run's.
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("kvsim-sweep-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "point-0");
  std::ofstream(dir / "point-0" / "result.cbor.tmp4242") << "half";
  std::ofstream(dir / "point-0" / "notes.tmp") << "a user's file, not a temporary";
  PointOutcome point;
  point.result = run_scenario(small().load({}), RunOptions{false, {}, {}});
  write_sweep_point(dir.string(), 0, point);
  EXPECT_FALSE(fs::exists(dir / "point-0" / "result.cbor.tmp4242"));
  EXPECT_TRUE(fs::exists(dir / "point-0" / "notes.tmp"));
  EXPECT_TRUE(fs::exists(dir / "point-0" / "result.cbor"));
  fs::remove_all(dir);
}

TEST(PointRunsTest, CodecRefusesMalformedResultsWithATypedError) {
  // A float or an out-of-range value where an integer belongs would be undefined behaviour if
  // cast; it is a malformed result instead.
  nlohmann::json j = nlohmann::json::parse(
      R"({"schema": 1, "requests": [], "compute": [[0, 0, 1e300, 2]], "links": [],
          "diagnostics": [], "end": 0, "trace": "", "line_rate": 0, "effective_rate": 0,
          "sample_times": [], "series": []})");
  const auto cbor = [](const nlohmann::json& v) {
    const auto bytes = nlohmann::json::to_cbor(v);
    return std::string(bytes.begin(), bytes.end());
  };
  const auto rule_of = [&](const nlohmann::json& v) -> std::string {
    try {
      decode_result(cbor(v), Scenario{});
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "accepted";
  };
  EXPECT_EQ(rule_of(j), "not an encoded run result: a number where an integer belongs");
  j["compute"][0][2] = 5;
  EXPECT_EQ(rule_of(j), "accepted");
  j["compute"][0][0] = 1ull << 40;
  EXPECT_EQ(rule_of(j), "not an encoded run result: an integer out of range");
  j["compute"][0][0] = 0;
  j["schema"] = 2.5;
  EXPECT_EQ(rule_of(j), "not an encoded run result: a number where an integer belongs");
}

TEST(PointRunsTest, FramesSurviveAnySplitAndOversizedOnesAreRefused) {
  const std::string stream = encode_frame(kFrameProgress, std::string(16, '\x01')) +
                             encode_frame(kFrameResult, "result bytes") +
                             encode_frame(kFrameError, "");
  for (std::size_t chunk = 1; chunk <= stream.size(); ++chunk) {
    FrameReader reader;
    std::vector<ChildFrame> got;
    for (std::size_t at = 0; at < stream.size(); at += chunk) {
      reader.feed(stream.data() + at, std::min(chunk, stream.size() - at));
      while (auto f = reader.next()) got.push_back(*f);
    }
    ASSERT_EQ(got.size(), 3u) << chunk;
    EXPECT_EQ(got[0].tag, kFrameProgress);
    EXPECT_EQ(got[1].body, "result bytes");
    EXPECT_EQ(got[2].tag, kFrameError);
    EXPECT_TRUE(got[2].body.empty());
    EXPECT_FALSE(reader.pending());
  }
  // A length past the bound (a corrupt or hostile stream) is refused, not allocated.
  std::string huge = encode_frame(kFrameResult, "");
  const std::uint64_t len = kMaxFrameBytes + 1;
  std::memcpy(huge.data() + 1, &len, sizeof len);
  FrameReader reader;
  reader.feed(huge.data(), huge.size());
  EXPECT_THROW(reader.next(), std::runtime_error);
}

TEST(PointRunsTest, BadPointFailsBeforeAnythingRuns) {
  std::size_t progress_calls = 0;
  PointRunOptions o;
  o.progress = [&](std::size_t, std::size_t) { ++progress_calls; };
  EXPECT_THROW(run_points(small(), {{}, {{"cache.block_tokens", "0"}}}, o), model::ModelError);
  EXPECT_EQ(progress_calls, 0u);
}

TEST(PointRunsTest, SetupFailureComesBackAsAnError) {
  const auto out = run_points(small(), {{{"workload.prompt_tokens", "16000000"}}}, {});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_FALSE(out[0].result);
  EXPECT_EQ(out[0].exit_code, 2);
  EXPECT_NE(out[0].error.find("does not fit"), std::string::npos) << out[0].error;
}

TEST(SweepTest, AxesWithoutValuesOrTooManyPointsAreRefusedBeforeBuilding) {
  EXPECT_THROW(cross_product({{"model.dtype", {}}}), std::invalid_argument);
  std::vector<SweepAxis> axes;
  for (int i = 0; i < 8; ++i) {  // 10^8 points: refused from the sizes, in no time and memory
    axes.push_back({"k" + std::to_string(i), std::vector<std::string>(10, "v")});
  }
  try {
    cross_product(axes);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("more than 100000 points"), std::string::npos);
  }
}

TEST(SweepTest, CrossProductOrderFiguresAndCsv) {
  const std::vector<SweepAxis> axes = {{"hardware.scale_out.bandwidth", {"100Gb/s", "400Gb/s"}},
                                       {"cache.block_tokens", {"16", "128"}}};
  const auto points = cross_product(axes);
  ASSERT_EQ(points.size(), 4u);
  EXPECT_EQ(points[1], (std::vector<ScenarioOverride>{{"hardware.scale_out.bandwidth", "100Gb/s"},
                                                      {"cache.block_tokens", "128"}}));
  PointRunOptions o;
  o.jobs = 2;
  std::vector<std::size_t> done;
  o.progress = [&](std::size_t d, std::size_t total) {
    EXPECT_EQ(total, 4u);
    done.push_back(d);
  };
  auto out = run_points(small(), points, o);
  EXPECT_EQ(done, (std::vector<std::size_t>{0, 1, 2, 3, 4}));
  const SweepRow row = sweep_row(*out[0].result);
  EXPECT_EQ(row.requests, 2);
  EXPECT_DOUBLE_EQ(row.line_rate_gbps, 100.0 / 8);
  out[3].result.reset();
  const std::string csv = sweep_csv(axes, out);
  EXPECT_EQ(csv.rfind("hardware.scale_out.bandwidth,cache.block_tokens,point,requests,", 0), 0u);
  EXPECT_NE(csv.find("\n100Gb/s,16,0,2,"), std::string::npos) << csv;
  EXPECT_NE(csv.find("\n400Gb/s,128,3,0,,,,,,,,,,,,,failed\n"), std::string::npos) << csv;
  EXPECT_EQ(progress_bar(3, 10), "  [#########                     ] 3/10 points");
}

}  // namespace
}  // namespace kvsim::sim
