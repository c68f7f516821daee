// Child processes of a launched program join the world, each as a program of its own on its
// parent's node (issue 28: subprocess, multiprocessing's fork and spawn, the Ascend tools).
//
// fork first asks the world for the child's place (Op::kFork: its token and launch pid); the
// child then calls as that program (its descriptors name its parent's sockets, its getpid is its
// launch pid) and the parent tells the world the child's real pid (Op::kForked). vfork is a fork
// here. exec keeps the place: the child's environment carries its token and launch pid, and an
// execve given another environment gets them (and the shim) added, so the new image joins as the
// same program. wait, wait3, waitpid, wait4 and waitid wait in the world until a child the world knows
// has ended (Op::kWaitChild), then reap it for real and tell the world its status (Op::kReaped).
// posix_spawn, system and popen start their children through this fork
// (cpp/preload/spawn_calls.cpp). Not joined: processes a child starts after it left the launch's
// environment.
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cpp/client/channel.h"
#include "cpp/preload/happens_before.h"
#include "cpp/preload/real_calls.h"
#include "cpp/preload/socket_calls.h"

namespace kvsim::cpp::preload {
void set_launch_pid(pid_t pid);
}  // namespace kvsim::cpp::preload

namespace {

using kvsim::cpp::client::Channel;
using kvsim::cpp::preload::simulated;
namespace wire = kvsim::cpp::wire;

constexpr const char* kTokenVar = "KVSIM_PROCESS_TOKEN";
constexpr const char* kPidVar = "KVSIM_PID";

// The real pid of a child of this process that has ended (waiting in the world for one), 0 if
// none has yet (nohang), -1 if the world knows no such child (a real wait then decides).
pid_t world_wait(pid_t pid, bool nohang) {
  const auto reply = Channel::get().call(
      wire::Op::kWaitChild, wire::Writer().i64(pid > 0 ? pid : -1).boolean(nohang).take());
  if (!reply) return -1;
  try {
    return static_cast<pid_t>(wire::Reader(*reply).i64());
  } catch (const wire::WireError&) {
    return -1;
  }
}

void reaped(pid_t pid, int status) {
  (void)Channel::get().call(wire::Op::kReaped, wire::Writer().i64(pid).i32(status).take());
}

// `envp` with the child's token, launch pid and the shim as this process has them.
std::vector<std::string> joined_environment(char* const envp[]) {
  std::vector<std::string> out;
  const char* names[] = {kTokenVar, kPidVar, "KVSIM_WORLD_SOCKET", "LD_PRELOAD"};
  for (char* const* e = envp; e != nullptr && *e != nullptr; ++e) {
    bool ours = false;
    for (const char* name : names) {
      const std::size_t n = std::strlen(name);
      if (std::strncmp(*e, name, n) == 0 && (*e)[n] == '=') ours = true;
    }
    if (!ours) out.emplace_back(*e);
  }
  for (const char* name : names) {
    if (const char* v = std::getenv(name)) out.push_back(std::string(name) + "=" + v);
  }
  return out;
}

// Every exec: with a real time-stamp counter for the new image's loader, and an environment
// that keeps the program's place (glibc's exec functions call its internal execve, so each is
// wrapped).
template <typename F>
int exec_with(char* const envp[], F exec) {
  std::vector<std::string> env;
  std::vector<char*> ptrs;
  char* const* use = envp;
  if (simulated() && std::getenv(kTokenVar) != nullptr && envp != environ) {
    env = joined_environment(envp);
    for (const std::string& e : env) ptrs.push_back(const_cast<char*>(e.c_str()));
    ptrs.push_back(nullptr);
    use = ptrs.data();
  }
  kvsim::cpp::preload::tsc_real_for_exec(true);
  const int rc = exec(use);
  const int error = errno;
  kvsim::cpp::preload::tsc_real_for_exec(false);  // it failed: this image goes on
  errno = error;
  return rc;
}

std::vector<char*> variadic_args(const char* first, va_list ap, char*** envp) {
  std::vector<char*> args{const_cast<char*>(first)};
  while (args.back() != nullptr) args.push_back(va_arg(ap, char*));
  if (envp != nullptr) *envp = va_arg(ap, char**);
  return args;
}

}  // namespace

extern "C" {

pid_t fork(void) {
  if (!simulated()) return KVSIM_REAL(fork)();
  std::string token;
  std::int64_t launch_pid = 0;
  if (const auto reply = Channel::get().call(wire::Op::kFork, {})) {
    try {
      wire::Reader in(*reply);
      token = in.str();
      launch_pid = in.i64();
    } catch (const wire::WireError&) {
      token.clear();
    }
  }
  const pid_t pid = KVSIM_REAL(fork)();
  if (token.empty()) return pid;  // the world made no place: the child runs outside it
  if (pid == 0) {
    Channel::get().become_child(token);
    kvsim::cpp::preload::set_launch_pid(static_cast<pid_t>(launch_pid));
    kvsim::cpp::preload::hb::become_child(static_cast<std::uint32_t>(launch_pid));
    kvsim::cpp::preload::forget_doorbell();
    (void)setenv(kTokenVar, token.c_str(), 1);
    (void)setenv(kPidVar, std::to_string(launch_pid).c_str(), 1);
    (void)setenv("KVSIM_FORKED", "1", 1);  // a child: Python's bootstrap needs no torch here
    return 0;
  }
  (void)Channel::get().call(wire::Op::kForked, wire::Writer().str(token).i64(pid).take());
  return pid;
}

pid_t vfork(void) {
  return fork();  // the child may do more than exec here (the shim calls the world)
}

int execve(const char* path, char* const argv[], char* const envp[]) {
  return exec_with(envp, [&](char* const* e) { return KVSIM_REAL(execve)(path, argv, e); });
}

int execv(const char* path, char* const argv[]) {
  return exec_with(environ, [&](char* const*) { return KVSIM_REAL(execv)(path, argv); });
}

int execvp(const char* file, char* const argv[]) {
  return exec_with(environ, [&](char* const*) { return KVSIM_REAL(execvp)(file, argv); });
}

int execvpe(const char* file, char* const argv[], char* const envp[]) {
  return exec_with(envp, [&](char* const* e) { return KVSIM_REAL(execvpe)(file, argv, e); });
}

int fexecve(int fd, char* const argv[], char* const envp[]) {
  return exec_with(envp, [&](char* const* e) { return KVSIM_REAL(fexecve)(fd, argv, e); });
}

int execl(const char* path, const char* arg, ...) {
  va_list ap;
  va_start(ap, arg);
  std::vector<char*> args = variadic_args(arg, ap, nullptr);
  va_end(ap);
  return execv(path, args.data());
}

int execlp(const char* file, const char* arg, ...) {
  va_list ap;
  va_start(ap, arg);
  std::vector<char*> args = variadic_args(arg, ap, nullptr);
  va_end(ap);
  return execvp(file, args.data());
}

int execle(const char* path, const char* arg, ...) {
  va_list ap;
  va_start(ap, arg);
  char** envp = nullptr;
  std::vector<char*> args = variadic_args(arg, ap, &envp);
  va_end(ap);
  return execve(path, args.data(), envp);
}

pid_t waitpid(pid_t pid, int* status, int options) {
  return wait4(pid, status, options, nullptr);
}

pid_t wait(int* status) {
  return waitpid(-1, status, 0);
}

pid_t wait3(int* status, int options, struct rusage* usage) {
  return wait4(-1, status, options, usage);  // dash waits for its jobs with wait3
}

pid_t wait4(pid_t pid, int* status, int options, struct rusage* usage) {
  if (!simulated()) return KVSIM_REAL(wait4)(pid, status, options, usage);
  const pid_t ended = world_wait(pid, (options & WNOHANG) != 0);
  if (ended < 0) return KVSIM_REAL(wait4)(pid, status, options, usage);
  if (ended == 0) return 0;
  int st = 0;
  const pid_t got = KVSIM_REAL(wait4)(ended, &st, options & ~WNOHANG, usage);
  if (got > 0) {
    if (status != nullptr) *status = st;
    reaped(got, st);
  }
  return got;
}

int waitid(idtype_t type, id_t id, siginfo_t* info, int options) {
  if (!simulated() || (type != P_PID && type != P_ALL)) {
    return KVSIM_REAL(waitid)(type, id, info, options);
  }
  const pid_t ended =
      world_wait(type == P_PID ? static_cast<pid_t>(id) : -1, (options & WNOHANG) != 0);
  if (ended < 0) return KVSIM_REAL(waitid)(type, id, info, options);
  if (ended == 0) {
    if (info != nullptr) info->si_pid = 0;  // as waitid reports "none yet" with WNOHANG
    return 0;
  }
  const int rc = KVSIM_REAL(waitid)(P_PID, static_cast<id_t>(ended), info, options & ~WNOHANG);
  if (rc == 0 && info != nullptr && (options & WNOWAIT) == 0) {
    const int st = info->si_code == CLD_EXITED ? (info->si_status & 0xff) << 8 : info->si_status;
    reaped(ended, st);
  }
  return rc;
}

}  // extern "C"
