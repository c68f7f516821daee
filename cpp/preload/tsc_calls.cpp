// The time-stamp counter of a launched program in simulated time. rdtsc and rdtscp are
// instructions, not calls: the shim has the kernel fault them (prctl PR_SET_TSC,
// PR_TSC_SIGSEGV, as Shadow does) and answers from its SIGSEGV handler with the simulated time of
// the faulting thread, one tick per nanosecond. libzmq caches its millisecond clock between
// rdtsc reads less than half a million ticks apart, so a real counter made its timers (its
// reconnect interval) fire at simulated times that depended on the host's speed.
//
// The program's own SIGSEGV handlers (faulthandler's, a crash reporter's) keep working: sigaction
// and signal for SIGSEGV are recorded here, and a fault that is not rdtsc goes to the program's
// handler, or, with none, to the default action. SIGSEGV is never blocked (libzmq blocks every
// signal in its threads; a fault while it is blocked kills the process). A program that spins on
// rdtsc alone, without any other call, spins forever (its simulated time does not move).
//
// The trap is a flag of each thread, inherited by new threads and child processes. A fork's child
// is a program of the launch (cpp/preload/child_calls.cpp) and keeps it; but a new program's
// dynamic loader reads the counter before any library could answer, so exec clears the flag (the
// new image's shim sets it again; posix_spawn, system and popen exec through fork too:
// cpp/preload/spawn_calls.cpp). Outside a launch, and with --wall-clock, the counter stays real.
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>

#include "cpp/client/channel.h"
#include "cpp/preload/real_calls.h"

namespace {

constexpr std::uint64_t kBootTicks = 1'000'000'000;  // a counter that has run a while
constexpr std::uint64_t kPsPerTick = 1000;           // one tick per nanosecond

bool g_trapping = false;
// This file is built without ThreadSanitizer in a TSan build (cpp/CMakeLists.txt), so it has a
// lock of its own: an uninstrumented copy of the shared SpinLock's inline code could stand in for
// the instrumented one everywhere (one definition per library), and TSan would then miss every
// lock of the shim.
std::atomic_flag g_lock = ATOMIC_FLAG_INIT;
struct Locked {
  Locked() {
    while (g_lock.test_and_set(std::memory_order_acquire)) {
    }
  }
  ~Locked() { g_lock.clear(std::memory_order_release); }
};
struct sigaction g_program {};  // the program's SIGSEGV disposition (SIG_DFL until it sets one)

std::uint64_t ticks() {
  if (!kvsim::cpp::preload::simulated()) {
    // A thread that is not the program's (ThreadSanitizer's own, or a new one while TSan sets it
    // up) reads the host's clock, raw: the shim's clock_gettime would ask the world.
    timespec ts{};
    (void)syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
    return kBootTicks + static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000U +
           static_cast<std::uint64_t>(ts.tv_nsec);
  }
  return kBootTicks + kvsim::cpp::client::Channel::get().now_ps() / kPsPerTick;
}

// Answers rdtsc (0f 31) or rdtscp (0f 01 f9) at the faulting instruction; false for any other
// fault.
bool answer_tsc(ucontext_t* uc) {
  auto* regs = uc->uc_mcontext.gregs;
  const auto* ip = reinterpret_cast<const unsigned char*>(regs[REG_RIP]);
  std::size_t length = 0;
  if (ip[0] == 0x0f && ip[1] == 0x31) {
    length = 2;
  } else if (ip[0] == 0x0f && ip[1] == 0x01 && ip[2] == 0xf9) {
    length = 3;
    regs[REG_RCX] = 0;  // IA32_TSC_AUX: processor 0
  } else {
    return false;
  }
  const std::uint64_t t = ticks();
  regs[REG_RAX] = static_cast<greg_t>(t & 0xffffffffU);
  regs[REG_RDX] = static_cast<greg_t>(t >> 32);
  regs[REG_RIP] += static_cast<greg_t>(length);
  return true;
}

void on_segv(int sig, siginfo_t* info, void* context) {
  // A trapped rdtsc is a general protection fault (SI_KERNEL); page faults come with SEGV_*
  // codes, and their instruction may not even be readable.
  if (info->si_code == SI_KERNEL && answer_tsc(static_cast<ucontext_t*>(context))) return;
  struct sigaction program;
  {
    Locked g;
    program = g_program;
  }
  if (program.sa_flags & SA_SIGINFO) {
    if (program.sa_sigaction != nullptr) {
      program.sa_sigaction(sig, info, context);
      return;
    }
  } else if (program.sa_handler != SIG_DFL && program.sa_handler != SIG_IGN) {
    program.sa_handler(sig);
    return;
  }
  // The default action: the instruction faults again, now without this handler.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  KVSIM_REAL_EARLY(sigaction)(SIGSEGV, &dfl, nullptr);
}

__attribute__((constructor)) void trap_tsc() {
  if (!kvsim::cpp::preload::simulated() || kvsim::cpp::preload::wall_clock()) {
    (void)prctl(PR_SET_TSC, PR_TSC_ENABLE);  // a parent's setting is inherited across exec
    return;
  }
  struct sigaction sa {};
  sa.sa_sigaction = on_segv;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  if (KVSIM_REAL_EARLY(sigaction)(SIGSEGV, &sa, &g_program) != 0) return;
  if (prctl(PR_SET_TSC, PR_TSC_SIGSEGV) != 0) {  // not on this CPU or kernel: stays real
    KVSIM_REAL_EARLY(sigaction)(SIGSEGV, &g_program, nullptr);
    return;
  }
  g_trapping = true;
}

}  // namespace

namespace kvsim::cpp::preload {

void tsc_real_for_exec(bool real) {
  if (g_trapping) (void)prctl(PR_SET_TSC, real ? PR_TSC_ENABLE : PR_TSC_SIGSEGV);
}

}  // namespace kvsim::cpp::preload

// The program's view of SIGSEGV while rdtsc is trapped: its handler is recorded, not installed.
extern "C" int sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  if (sig != SIGSEGV || !g_trapping) return KVSIM_REAL_EARLY(sigaction)(sig, act, old);
  Locked g;
  if (old != nullptr) *old = g_program;
  if (act != nullptr) g_program = *act;
  return 0;
}

extern "C" sighandler_t signal(int sig, sighandler_t handler) {
  if (sig != SIGSEGV || !g_trapping) return KVSIM_REAL_EARLY(signal)(sig, handler);
  struct sigaction act {};
  act.sa_handler = handler;
  sigemptyset(&act.sa_mask);
  act.sa_flags = SA_RESTART;
  struct sigaction old {};
  (void)sigaction(sig, &act, &old);
  return (old.sa_flags & SA_SIGINFO) ? SIG_DFL : old.sa_handler;
}

// A mask never blocks SIGSEGV while rdtsc is trapped.
namespace {
const sigset_t* without_segv(int how, const sigset_t* set, sigset_t& copy) {
  if (!g_trapping || set == nullptr || how == SIG_UNBLOCK || !sigismember(set, SIGSEGV)) {
    return set;
  }
  copy = *set;
  sigdelset(&copy, SIGSEGV);
  return &copy;
}
}  // namespace

extern "C" int pthread_sigmask(int how, const sigset_t* set, sigset_t* old) {
  sigset_t copy;
  return KVSIM_REAL_EARLY(pthread_sigmask)(how, without_segv(how, set, copy), old);
}

extern "C" int sigprocmask(int how, const sigset_t* set, sigset_t* old) {
  sigset_t copy;
  return KVSIM_REAL_EARLY(sigprocmask)(how, without_segv(how, set, copy), old);
}
