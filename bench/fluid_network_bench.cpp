// Flow solver speed alone: wall time per flow event (one add plus one completion) with a steady
// number of concurrent flows on an A2-like mix of 2 nodes x 8 devices (HBM, 16 DMA engines,
// full intra-node mesh, per-device NIC tx/rx).
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "model/fluid_network.h"

namespace {

using kvsim::model::FluidNetwork;
using Use = FluidNetwork::Use;
using ResourceId = FluidNetwork::ResourceId;

struct Mix {
  static constexpr int kNodes = 2, kPerNode = 8, kDevices = kNodes * kPerNode, kEngines = 16;
  FluidNetwork net;
  std::vector<ResourceId> hbm, tx, rx;
  std::vector<std::vector<ResourceId>> engine, mesh;  // mesh[src][dst] (same node only)
  std::mt19937_64 rng{12345};

  Mix() {
    hbm.resize(kDevices);
    tx.resize(kDevices);
    rx.resize(kDevices);
    engine.assign(kDevices, {});
    mesh.assign(kDevices, std::vector<ResourceId>(kDevices, 0));
    for (int d = 0; d < kDevices; ++d) {
      hbm[d] = net.add_resource("hbm", 1.6e12);
      for (int e = 0; e < kEngines; ++e) engine[d].push_back(net.add_resource("dma", 4e11));
      tx[d] = net.add_resource("nic.tx", 2.375e10);
      rx[d] = net.add_resource("nic.rx", 2.375e10);
    }
    for (int s = 0; s < kDevices; ++s) {
      for (int d = 0; d < kDevices; ++d) {
        if (s != d && s / kPerNode == d / kPerNode) mesh[s][d] = net.add_resource("hccs", 2.07e10);
      }
    }
  }

  void add_random_flow() {
    const int s = static_cast<int>(rng() % kDevices);
    int d = static_cast<int>(rng() % (kDevices - 1));
    if (d >= s) ++d;
    const double bytes = static_cast<double>(64 * 1024 + rng() % (2 * 1024 * 1024 - 64 * 1024));
    std::vector<Use> path = {{hbm[s]}, {engine[s][rng() % kEngines]}};
    if (s / kPerNode == d / kPerNode) {
      path.push_back({mesh[s][d]});
    } else {
      path.push_back({tx[s]});
      path.push_back({rx[d]});
    }
    path.push_back({hbm[d]});
    net.add_flow(bytes, std::move(path));
  }
};

// Each iteration completes the next flow(s) and replaces each with a new one.
void BM_AddComplete(benchmark::State& state) {
  const auto concurrency = static_cast<std::size_t>(state.range(0));
  Mix mix;
  for (std::size_t i = 0; i < concurrency; ++i) mix.add_random_flow();
  for (std::size_t i = 0; i < 4 * concurrency; ++i) {  // warm up to a steady mix
    for (std::size_t n = mix.net.complete_until(FluidNetwork::kNever).size(); n > 0; --n) {
      mix.add_random_flow();
    }
  }
  std::size_t events = 0;
  for (auto _ : state) {
    const std::size_t n = mix.net.complete_until(FluidNetwork::kNever).size();
    for (std::size_t i = 0; i < n; ++i) mix.add_random_flow();
    events += n;
  }
  // Wall seconds per event (printed with an SI prefix: 1.2u is 1.2 us).
  state.counters["s/event"] = benchmark::Counter(
      static_cast<double>(events), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_AddComplete)->Arg(64)->Arg(512)->Arg(4096);

}  // namespace

int main(int argc, char* argv[]) {
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
