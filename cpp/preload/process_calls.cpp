// Process ids of a launched program: getpid gives the launch's pid for it (KVSIM_PID, 4000 plus
// its rank, as kvsim.launch numbers them), so that what a program derives from its pid (log
// lines, socket and file names, seeds) replays with the launch as Shadow's virtual pids do.
// kill() of that pid reaches the real process. A child it forks gets a launch pid of its own
// (multiprocessing tells a forked child by its changed pid; cpp/preload/child_calls.cpp).
#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>

#include "cpp/preload/real_calls.h"

namespace {

using kvsim::cpp::preload::simulated;

// The launch's pid of this program (KVSIM_PID, or what a fork gave its child), 0 outside a
// launch.
std::atomic<pid_t> g_launch_pid{-1};

pid_t launch_pid() {
  pid_t pid = g_launch_pid.load(std::memory_order_relaxed);
  if (pid < 0) {
    const char* v = std::getenv("KVSIM_PID");
    const long n = v != nullptr ? std::strtol(v, nullptr, 10) : 0;
    pid = n > 0 ? static_cast<pid_t>(n) : 0;
    g_launch_pid.store(pid, std::memory_order_relaxed);
  }
  return pid;
}

pid_t real_pid() {
  return KVSIM_REAL(getpid)();
}

}  // namespace

namespace kvsim::cpp::preload {
void set_launch_pid(pid_t pid) {
  g_launch_pid.store(pid, std::memory_order_relaxed);
}
}  // namespace kvsim::cpp::preload

extern "C" {

pid_t getpid(void) {
  if (launch_pid() == 0 || !simulated()) return real_pid();
  return launch_pid();
}

int kill(pid_t pid, int sig) {
  if (launch_pid() != 0 && simulated()) {
    if (pid == launch_pid()) pid = real_pid();
    if (pid == -launch_pid()) pid = -getpgrp();  // its process group, which it leads
  }
  return KVSIM_REAL(kill)(pid, sig);
}

}  // extern "C"
