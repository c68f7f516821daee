// libkvsim_client's world for programs that were not launched (see local_world.cpp).
#pragma once

namespace kvsim::cpp::client {

/// True once the local backend is installed. The libraries call it so that they always need
/// libkvsim_client (a linker with --as-needed would otherwise drop it).
bool local_world_available();

}  // namespace kvsim::cpp::client
