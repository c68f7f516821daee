// The calling program's own memory in a HOST cache (a CPU tensor's data_ptr, as the official
// pull_blocks sample gives Cache.create_cpu_cache): the simulated world keeps a mirror of it in its
// node's simulated host memory, filled from the program's memory before a call and written back
// after it, so that the library's copies reach the program's bytes.
#pragma once

#include "impl/types.h"
#include "python/src/py_world.h"

namespace kvsim::python {

/// `cache` with every address that is not simulated memory replaced by a mirror on the node of
/// world device `device`, filled with the program's bytes now. ValueError naming the address if
/// the program has no readable and writable memory there.
impl::CacheView mirror_host_memory(WorldBox& box, const impl::CacheView& cache, int device);

/// Copies the mirrors of `mirrored` (made from `original`) back to the program's memory.
void write_back_host_memory(WorldBox& box, const impl::CacheView& original,
                            const impl::CacheView& mirrored);

}  // namespace kvsim::python
