#include "model/sim_kernel.h"

#include <systemc>

#include <cstdlib>
#include <vector>

namespace kvsim::model {

namespace {
// Detached contexts stay reachable here rather than leaked: they cannot be deleted (DESIGN.md),
// and a leak checker then reports only real leaks.
std::vector<sc_core::sc_simcontext*>& retired() {
  static auto* contexts = new std::vector<sc_core::sc_simcontext*>;
  return *contexts;
}
}  // namespace

void quiet_banner() {
  // SystemC prints its banner when it builds its first context unless this is set; the user's
  // own setting wins.
  setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 0);
}

void fresh_kernel() {
  quiet_banner();
  if (sc_core::sc_curr_simcontext) retired().push_back(sc_core::sc_curr_simcontext);
  sc_core::sc_curr_simcontext = nullptr;
  sc_core::sc_default_global_context = nullptr;
}

void run_to_completion() {
  sc_core::sc_start();
}

}  // namespace kvsim::model
