// The Chrome trace records engine and link activity at the model's times.
#include "sim/chrome_trace.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <optional>

#include "sim/world.h"

namespace kvsim::sim {
namespace {

TEST(ChromeTrace, RecordsProcessingAndDataSpansAtModelTimes) {
  World world("atlas-a2");
  model::Fabric& f = world.fabric();
  ChromeTrace trace(f);
  model::Topology& t = f.topology();
  const std::uint64_t a = t.memory(t.device_memory(0)).allocate(1 << 20);
  const std::uint64_t b = t.memory(t.device_memory(8)).allocate(1 << 20);
  std::optional<model::BatchOutcome> out;
  f.post({0, 2}, {{a, b, 1 << 20}}, [&](const model::BatchOutcome& o) { out = o; });
  f.schedule_link_event("roce n1d3", 5 * model::kUs, {model::LinkEvent::Kind::kDown});
  world.platform().run_until_idle();
  ASSERT_TRUE(out && out->ok);

  const auto j = nlohmann::json::parse(trace.json());
  const model::TopologySpec& s = world.spec();
  // A write over RoCE: the scale-out path's cost per descriptor.
  const double processing_end_us =
      static_cast<double>(s.dma.batch_setup +
                          s.scale_out.path.descriptor_cost.value_or(s.dma.descriptor_cost)) /
      1e6;
  const double data_us =
      static_cast<double>(model::transfer_time(1 << 20, s.scale_out.effective())) / 1e6;
  std::map<int, std::string> names;  // track id -> track name
  for (const auto& e : j["traceEvents"]) {
    if (e["name"] == "thread_name")
      names[e["tid"].get<int>()] = e["args"]["name"].get<std::string>();
  }
  int processing = 0, data = 0, link_spans = 0, instants = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "X" && e["name"] == "descriptors") {
      ++processing;
      EXPECT_EQ(names[e["tid"].get<int>()], "dma2");
      EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 0.0);
      EXPECT_NEAR(e["dur"].get<double>(), processing_end_us, 1e-6);
    } else if (e["ph"] == "X" && e["name"] == "data") {
      const std::string track = names[e["tid"].get<int>()];
      if (track.rfind("roce", 0) == 0)
        ++link_spans;
      else
        ++data;
      EXPECT_NEAR(e["ts"].get<double>(), processing_end_us, 1e-6);
      EXPECT_NEAR(e["dur"].get<double>(), data_us, 1e-6);
    } else if (e["ph"] == "i") {
      ++instants;
      EXPECT_EQ(e["name"], "down");
      EXPECT_EQ(names[e["tid"].get<int>()], "roce n1d3");
    }
  }
  EXPECT_EQ(processing, 1);
  EXPECT_EQ(data, 1);
  EXPECT_EQ(link_spans, 2);  // source NIC out, destination NIC in
  EXPECT_EQ(instants, 1);
}

}  // namespace
}  // namespace kvsim::sim
