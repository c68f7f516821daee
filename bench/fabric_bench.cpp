// Model speed: flows completed per wall-second under contention (an A2 pair of nodes, HCCS mesh
// plus RoCE, 1 to 4096 concurrent flows), against the bare SystemC kernel's timed-notification
// rate measured in the same process. Goal (issue 31): at most 10 bare-kernel events per completed
// flow at 64 concurrent flows, and flat (within 2x) from 64 to 4,096.
#include <benchmark/benchmark.h>

#include <systemc>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "model/fabric.h"
#include "model/preset.h"
#include "model/sim_kernel.h"

namespace {

using namespace kvsim::model;

// One SC_METHOD that re-notifies itself 1 ns later, `limit` times: the kernel's floor.
struct Ticker : sc_core::sc_module {
  sc_core::sc_event ev;
  std::uint64_t count = 0, limit;
  SC_HAS_PROCESS(Ticker);
  Ticker(const sc_core::sc_module_name& n, std::uint64_t l) : sc_core::sc_module(n), limit(l) {
    SC_METHOD(tick);
    sensitive << ev;
  }
  void tick() {
    if (++count < limit) ev.notify(1, sc_core::SC_NS);
  }
};

double bare_kernel_events_per_second() {
  std::vector<double> rates;
  for (int rep = 0; rep < 5; ++rep) {
    fresh_kernel();
    const std::uint64_t n = 2'000'000;
    Ticker t("ticker", n);
    const auto start = std::chrono::steady_clock::now();
    sc_core::sc_start();
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    rates.push_back(static_cast<double>(t.count) / s);
  }
  std::sort(rates.begin(), rates.end());
  return rates[2];
}

double g_bare_rate = 0;

// Keeps `concurrency` single-descriptor batches in flight between random device pairs of two A2
// nodes (same node: HCCS mesh; other node: RoCE) until `total` have completed.
void BM_ContentionMix(benchmark::State& state) {
  const auto concurrency = static_cast<std::size_t>(state.range(0));
  const std::size_t total = std::max<std::size_t>(20000, 4 * concurrency);
  std::uint64_t flows = 0, activations = 0;
  double wall = 0;
  for (auto _ : state) {
    fresh_kernel();
    // Enough engines and queue slots that `concurrency` flows really run at once.
    const TopologySpec spec =
        load_preset("atlas-a2", {{"dma.engines", "16"}, {"dma.queue_depth", "64"}});
    Fabric fabric("fabric", spec);
    Topology& topo = fabric.topology();
    const int devices = topo.device_count();
    std::vector<std::uint64_t> base(static_cast<std::size_t>(devices));
    for (int d = 0; d < devices; ++d)
      base[static_cast<std::size_t>(d)] = topo.memory(topo.device_memory(d)).allocate(1ull << 30);
    std::mt19937_64 rng(12345);
    std::size_t posted = 0, done = 0, slot = 0;
    std::function<void()> post_one = [&] {
      const int s = static_cast<int>(rng() % static_cast<std::uint64_t>(devices));
      int d = static_cast<int>(rng() % static_cast<std::uint64_t>(devices - 1));
      if (d >= s) ++d;
      const std::uint64_t len = (std::uint64_t{64} << 10) << (rng() % 6);  // 64 KiB .. 2 MiB
      const std::uint64_t off = (slot++ % 256) * (4ull << 20);
      ++posted;
      fabric.post(
          {s, static_cast<int>(posted % 16)},
          {{base[static_cast<std::size_t>(s)] + off, base[static_cast<std::size_t>(d)] + off, len}},
          [&](const BatchOutcome&) {
            ++done;
            if (posted < total) post_one();
          });
    };
    // Timed: the flows, from the first post to the last completion (the goal's cost per flow
    // event); loading the preset and building the fabric and its memories are not.
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < concurrency; ++i) post_one();
    sc_core::sc_start();
    if (done != total) state.SkipWithError("not every batch completed");
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    state.SetIterationTime(seconds);
    wall += seconds;
    flows += fabric.stats().flows_completed;
    activations += fabric.stats().activations;
  }
  state.counters["flows/s"] =
      benchmark::Counter(static_cast<double>(flows), benchmark::Counter::kIsRate);
  state.counters["activations/flow"] =
      static_cast<double>(activations) / static_cast<double>(flows);
  // Cost of one completed flow, in units of bare kernel timed notifications.
  state.counters["bare_events/flow"] = wall / static_cast<double>(flows) * g_bare_rate;
}
BENCHMARK(BM_ContentionMix)
    ->RangeMultiplier(4)
    ->Range(1, 4096)
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime();

}  // namespace

int sc_main(int argc, char* argv[]) {
  g_bare_rate = bare_kernel_events_per_second();
  std::printf("bare SystemC kernel: %.2f M timed notifications/s (median of 5)\n",
              g_bare_rate / 1e6);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
