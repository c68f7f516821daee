#include "model/sim_kernel.h"

#include <systemc>

namespace kvsim::model {

void fresh_kernel() {
  sc_core::sc_curr_simcontext = nullptr;
  sc_core::sc_default_global_context = nullptr;
}

void run_to_completion() {
  sc_core::sc_start();
}

}  // namespace kvsim::model
