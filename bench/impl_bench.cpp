// Cost of the implementation and of whole studies: descriptor building for one PA layer,
// simulated seed-example transfers per wall-second, the Llama-3-70B exposed transfer against its
// physical lower bound, and simulated requests per wall-second for a 1,000-request trace.
#include <benchmark/benchmark.h>

#include <systemc>

#include <numeric>
#include <random>

#include "impl/copy_geometry.h"
#include "impl/directory.h"
#include "impl/llm_datadist.h"
#include "sim/engine_setup.h"
#include "sim/runner.h"
#include "sim/world.h"

namespace {

using namespace kvsim;

sim::RunOptions no_trace() {
  sim::RunOptions o;
  o.trace = false;
  return o;
}

// One PA layer of 256 blocks (B2B, 2 tensors): random tables give 256 runs, consecutive 1.
void BM_PlanPaLayer256(benchmark::State& state) {
  const bool consecutive = state.range(0) != 0;
  impl::CacheView view{-1, impl::CacheDesc(160, {1024, 128 * 128 * 2}, impl::DataType::DT_INT8)};
  view.is_blocks_cache = true;
  for (int t = 0; t < 160; ++t)
    view.tensor_addrs.push_back((1ull << 40) + static_cast<std::uint64_t>(t) * (64ull << 20));
  const impl::CacheGeometry geometry = impl::make_cache_geometry(view);
  impl::LayerTransfer layer;
  layer.layer_index = 17;
  layer.dst_addrs = {(2ull << 40), (2ull << 40) + (64ull << 20)};
  std::vector<std::uint64_t> ids(1024);
  std::iota(ids.begin(), ids.end(), 0);
  std::mt19937_64 rng(7);
  if (!consecutive) std::shuffle(ids.begin(), ids.end(), rng);
  layer.src_blocks.assign(ids.begin(), ids.begin() + 256);
  if (!consecutive) std::shuffle(ids.begin(), ids.end(), rng);
  layer.dst_blocks.assign(ids.begin(), ids.begin() + 256);
  std::size_t descriptors = 0;
  for (auto _ : state) {
    auto d = impl::plan_layer_copy(geometry, layer);
    descriptors = d.size();
    benchmark::DoNotOptimize(d.data());
  }
  state.counters["descriptors"] = static_cast<double>(descriptors);
  state.counters["ns/block"] =
      benchmark::Counter(256.0 * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_PlanPaLayer256)->Arg(0)->Arg(1)->ArgNames({"consecutive"});

// The seed example end to end: world, two processes, link, registration, 40 layers, synchronize.
class AlwaysReady final : public impl::LayerSynchronizer {
 public:
  bool synchronize_layer(std::int64_t, std::optional<std::int64_t>) override { return true; }
};

void BM_SeedExample(benchmark::State& state) {
  for (auto _ : state) {
    sim::World world("atlas-a2");
    impl::LLMDataDist prompt(world.platform(), world.directory(), impl::LLMRole::PROMPT, 1);
    impl::LLMDataDist decoder(world.platform(), world.directory(), impl::LLMRole::DECODER, 2);
    prompt.init(sim::engine_options(world.platform(), 0, false));
    decoder.init(sim::engine_options(world.platform(), 8, true));
    prompt.link_clusters({sim::server_info(world.platform(), 2, 8, 0)});
    const impl::CacheDesc desc(80, {1, 4096 * 128 * 2}, impl::DataType::DT_INT8);
    auto make = [&](impl::LLMDataDist& dist, int device) {
      std::vector<std::uint64_t> addrs;
      for (int t = 0; t < 80; ++t)
        addrs.push_back(
            *world.platform().allocate(device, impl::Placement::DEVICE, desc.size(), 2 << 20));
      return dist.cache_manager().register_cache(desc, addrs);
    };
    const impl::CacheView src = make(prompt, 0);
    const impl::CacheView dst = make(decoder, 8);
    std::vector<impl::AnyTransferConfig> configs = {
        impl::TransferConfig(2, dst.tensor_addrs, impl::LayerRange{0, 40, 1}, 0)};
    auto task =
        prompt.cache_manager().transfer_cache_async(src, std::make_shared<AlwaysReady>(), configs);
    if (task.synchronize() != impl::LLMStatusCode::LLM_SUCCESS)
      state.SkipWithError("transfer failed");
  }
  state.counters["transfers/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SeedExample)->Unit(benchmark::kMillisecond);

sim::Scenario llama70b(std::size_t requests, const std::string& trace_interval) {
  const std::string text = R"(question: Llama-3-70B 4k TP8 on two A2 servers over 200 Gb/s RoCE
hardware:
  preset: atlas-a2
model:
  name: llama-3-70b
  tensor_parallel: 8
  dtype: bf16
cache:
  layout: paged
  block_tokens: 128
workload:
  requests: )" + std::to_string(requests) +
                           R"(
  interval: )" + trace_interval +
                           R"(
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
)";
  return sim::parse_scenario(text, "bench");
}

// Exposed transfer after the last layer's compute against the physical lower bound: the last
// layer's bytes of one rank over the line rate, plus the link latency.
void BM_Llama70bExposed(benchmark::State& state) {
  const sim::Scenario s = llama70b(1, "1ms");
  sim::RunResult r;
  for (auto _ : state) r = sim::run_scenario(s, no_trace());
  const model::TopologySpec spec = model::load_preset("atlas-a2");
  const double layer_bytes = 2.0 * 4096 * 128 * 2;  // K and V of one layer on one rank
  const double bound_us =
      (layer_bytes / spec.scale_out.bandwidth + model::to_seconds(spec.scale_out.latency)) * 1e6;
  const double exposed_us = static_cast<double>(r.requests.at(0).exposed()) / 1e6;
  state.counters["exposed_us"] = exposed_us;
  state.counters["lower_bound_us"] = bound_us;
  state.counters["ratio"] = exposed_us / bound_us;
  state.counters["layer_compute_us"] = static_cast<double>(s.prefill_layer_time(4096)) / 1e6;
}
BENCHMARK(BM_Llama70bExposed)->Unit(benchmark::kMillisecond)->Iterations(3);

// A 1,000-request workload on two A2 nodes: simulated requests per wall-second.
void BM_Trace1000Requests(benchmark::State& state) {
  const sim::Scenario s = llama70b(1000, "20ms");
  for (auto _ : state) {
    const sim::RunResult r = sim::run_scenario(s, no_trace());
    benchmark::DoNotOptimize(r.end);
  }
  state.counters["requests/s"] = benchmark::Counter(
      1000.0 * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Trace1000Requests)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace

int sc_main(int argc, char* argv[]) {
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
