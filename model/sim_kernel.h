// Fresh SystemC kernels, so that each test case, sweep point or Python world simulates alone.
#pragma once

namespace kvsim::model {

/// Turns SystemC's copyright banner off for this process (unless the user set the variable).
/// Must run before the first SystemC call builds a context; fresh_kernel() calls it.
void quiet_banner();

/// Detaches the current SystemC simulation context so that the next SystemC call builds a new
/// one (DESIGN.md: deleting the old context crashes, so it is kept, unused; a few KB each). Call
/// only when no module of the old context will be used again.
void fresh_kernel();

/// Runs the current kernel until no event is pending (sc_start with no limit).
void run_to_completion();

}  // namespace kvsim::model
