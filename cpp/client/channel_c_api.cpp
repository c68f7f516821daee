// The channel for programs that are not C++: a C interface that Python's ctypes reaches
// (python/kvsim/launched/channel.py). Only Op::kPython and Op::kNow pass through it.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cpp/client/channel.h"

extern "C" {

/// 1 in a program started by a launch that the world accepted, else 0.
__attribute__((visibility("default"))) int kvsim_channel_launched() {
  return kvsim::cpp::client::Channel::get().launched() ? 1 : 0;
}

/// Sends a kPython request of the calling thread and waits for its reply: 0 and a malloc'ed
/// reply in *out (free it with kvsim_channel_release), or -1 if the world cannot answer.
__attribute__((visibility("default"))) int kvsim_channel_python_call(const char* request,
                                                                     std::size_t size, char** out,
                                                                     std::size_t* out_size) {
  using kvsim::cpp::client::Channel;
  auto reply =
      Channel::get().call(kvsim::cpp::wire::Op::kPython, std::string(request, request + size));
  if (!reply) return -1;
  *out_size = reply->size();
  *out = static_cast<char*>(std::malloc(reply->size() ? reply->size() : 1));
  if (*out == nullptr) return -1;
  if (!reply->empty()) std::memcpy(*out, reply->data(), reply->size());
  return 0;
}

/// Frees a reply of kvsim_channel_python_call.
__attribute__((visibility("default"))) void kvsim_channel_release(char* reply) {
  std::free(reply);
}

/// The simulated time of the calling thread, in picoseconds.
__attribute__((visibility("default"))) std::uint64_t kvsim_channel_now_ps() {
  return kvsim::cpp::client::Channel::get().now_ps();
}
}
