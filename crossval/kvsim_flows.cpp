// kvsim's side of the cross-validation tier (crossval/README.md):
//   kvsim_flows IN.json OUT.json    a flow set through kvsim's FluidNetwork alone
// It links the solver without SystemC (kvsim_fluid), so its process starts as fast as a plain
// C++ program; sets recorded from the SystemC Fabric come from kvsim_fabric_flows.
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "crossval/flow_set.h"

namespace kvsim::crossval {
namespace {

int fluid(const std::string& in, const std::string& out) {
  const FlowSet set = read_flow_set(in);
  // Wall time of building the network and solving it, without process start and I/O (for
  // bench/flows_vs_simgrid.py; never part of a result).
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<Finish> finishes = run_fluid(set);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  nlohmann::json j = {
      {"engine", "kvsim fluid"}, {"wall_seconds", wall}, {"flows", nlohmann::json::array()}};
  for (const Finish& f : finishes) {
    j["flows"].push_back({{"id", f.id}, {"finish_ps", f.at}});
  }
  std::ofstream o(out);
  o << j.dump(1) << '\n';
  return o ? 0 : 1;
}

}  // namespace
}  // namespace kvsim::crossval

int main(int argc, char* argv[]) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: kvsim_flows IN.json OUT.json\n");
    return 2;
  }
  try {
    return kvsim::crossval::fluid(argv[1], argv[2]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvsim_flows: %s\n", e.what());
    return 1;
  }
}
