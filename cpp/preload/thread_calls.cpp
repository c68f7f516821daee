// Threads of a launched program: pthread_create announces the new thread to the world before it
// starts, so that the world counts the program as running until that thread's first call (the
// new thread would otherwise be invisible until it connects, and simulated time could pass
// meanwhile, depending on the host's scheduling).
#include <pthread.h>

#include "cpp/client/channel.h"
#include "cpp/preload/real_calls.h"

namespace {

using kvsim::cpp::client::Channel;

struct Start {
  void* (*fn)(void*);
  void* arg;
  std::int64_t slot;
};

void* start_announced(void* p) {
  const Start start = *static_cast<Start*>(p);
  delete static_cast<Start*>(p);
  Channel::get().adopt_thread(start.slot);
  return start.fn(start.arg);
}

}  // namespace

extern "C" int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*fn)(void*),
                              void* arg) {
  if (!kvsim::cpp::preload::simulated()) return KVSIM_REAL(pthread_create)(thread, attr, fn, arg);
  const std::int64_t slot = Channel::get().announce_thread();
  auto* start = new Start{fn, arg, slot};
  const int rc = KVSIM_REAL(pthread_create)(thread, attr, start_announced, start);
  if (rc != 0) {
    delete start;
    Channel::get().cancel_thread(slot);
  }
  return rc;
}
