// Programs started by posix_spawn, posix_spawnp, system and popen join the world as children of
// the launched program (issue 28: a C++ engine that runs `npu-smi info` through popen, Python's
// subprocess with close_fds=False, which uses posix_spawn). glibc starts them with an internal
// clone that no interposed fork sees, so the shim starts them itself with the interposed fork
// (cpp/preload/child_calls.cpp) and exec, as POSIX specifies each call:
//
// - posix_spawn: the attributes are read through their public getters; the file actions have no
//   getters, so the posix_spawn_file_actions_add* calls are recorded here (and passed on, so the
//   C library's copy stays valid) and replayed in the child in order. An exec failure is the
//   call's error, as in glibc (the child reports its errno through a close-on-exec pipe).
// - system: SIGINT and SIGQUIT ignored and SIGCHLD blocked in the caller while it waits.
// - popen: the caller's stream reads or writes the pipe through fopencookie, so that its reads
//   wait in simulated time (glibc's stdio calls its internal read, which no shim sees);
//   fileno() of such a stream is -1. pclose waits in the world and gives the shell's status.
//
// Outside a launch, each is the C library's, with a real time-stamp counter for the new program's
// loader (cpp/preload/tsc_calls.cpp).
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "cpp/preload/real_calls.h"
#include "cpp/preload/spin_lock.h"

namespace {

using kvsim::cpp::preload::simulated;
using kvsim::cpp::preload::SpinLock;

/// One recorded posix_spawn_file_actions_add* call.
struct FileAction {
  enum Kind { kClose, kDup2, kOpen, kChdir, kFchdir, kClosefrom, kTcsetpgrp } kind;
  int fd = -1;
  int newfd = -1;
  int oflag = 0;
  mode_t mode = 0;
  std::string path;
};

SpinLock g_lock;
// Keyed by the address of the program's posix_spawn_file_actions_t.
std::map<const void*, std::vector<FileAction>>* g_actions = nullptr;
/// A popen stream's child and its end of the pipe.
struct Popened {
  pid_t child;
  int fd;
};
std::map<FILE*, Popened>* g_popen = nullptr;

int record(const posix_spawn_file_actions_t* fa, FileAction a) {
  SpinLock::Guard g(g_lock);
  if (g_actions == nullptr) g_actions = new std::map<const void*, std::vector<FileAction>>;
  (*g_actions)[fa].push_back(std::move(a));
  return 0;
}

std::vector<FileAction> actions_of(const posix_spawn_file_actions_t* fa) {
  if (fa == nullptr) return {};
  SpinLock::Guard g(g_lock);
  if (g_actions == nullptr) return {};
  const auto it = g_actions->find(fa);
  return it == g_actions->end() ? std::vector<FileAction>{} : it->second;
}

// Runs `start` with the calling thread's counter real (a program outside the world).
template <typename F>
auto with_real_tsc(F start) {
  kvsim::cpp::preload::tsc_real_for_exec(true);
  auto result = start();
  kvsim::cpp::preload::tsc_real_for_exec(false);
  return result;
}

// In the child: one file action, as glibc's __spawni_child does it; false with errno on failure.
bool apply(const FileAction& a) {
  switch (a.kind) {
    case FileAction::kClose:
      // POSIX: closing a descriptor that is not open is no error for posix_spawn.
      return close(a.fd) == 0 || errno == EBADF;
    case FileAction::kDup2:
      if (a.fd == a.newfd) {  // glibc 2.29: dup2 onto itself clears FD_CLOEXEC
        const int flags = fcntl(a.fd, F_GETFD);
        return flags >= 0 && fcntl(a.fd, F_SETFD, flags & ~FD_CLOEXEC) == 0;
      }
      return dup2(a.fd, a.newfd) == a.newfd;
    case FileAction::kOpen: {
      const int fd = open(a.path.c_str(), a.oflag, a.mode);
      if (fd < 0) return false;
      if (fd == a.fd) return true;
      const bool ok = dup2(fd, a.fd) == a.fd;
      (void)close(fd);
      return ok;
    }
    case FileAction::kChdir:
      return chdir(a.path.c_str()) == 0;
    case FileAction::kFchdir:
      return fchdir(a.fd) == 0;
    case FileAction::kClosefrom:
      for (int fd = a.fd; fd < 65536; ++fd) (void)close(fd);
      return true;
    case FileAction::kTcsetpgrp:
      return tcsetpgrp(a.fd, getpgrp()) == 0;
  }
  return false;
}

// In the child: the attributes, as glibc's __spawni_child applies them.
bool apply(const posix_spawnattr_t* attr) {
  if (attr == nullptr) return true;
  short flags = 0;
  (void)posix_spawnattr_getflags(attr, &flags);
  if (flags & POSIX_SPAWN_SETSIGDEF) {
    sigset_t def;
    (void)posix_spawnattr_getsigdefault(attr, &def);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig) {
      if (sigismember(&def, sig) == 1) (void)sigaction(sig, &dfl, nullptr);
    }
  }
  if (flags & POSIX_SPAWN_SETSCHEDULER) {
    int policy = 0;
    sched_param param{};
    (void)posix_spawnattr_getschedpolicy(attr, &policy);
    (void)posix_spawnattr_getschedparam(attr, &param);
    if (sched_setscheduler(0, policy, &param) != 0) return false;
  } else if (flags & POSIX_SPAWN_SETSCHEDPARAM) {
    sched_param param{};
    (void)posix_spawnattr_getschedparam(attr, &param);
    if (sched_setparam(0, &param) != 0) return false;
  }
  if ((flags & POSIX_SPAWN_SETSID) && setsid() < 0) return false;
  if (flags & POSIX_SPAWN_SETPGROUP) {
    pid_t group = 0;
    (void)posix_spawnattr_getpgroup(attr, &group);
    if (setpgid(0, group) != 0) return false;
  }
  if ((flags & POSIX_SPAWN_RESETIDS) && (setgid(getgid()) != 0 || setuid(getuid()) != 0)) {
    return false;
  }
  if (flags & POSIX_SPAWN_SETSIGMASK) {
    sigset_t mask;
    (void)posix_spawnattr_getsigmask(attr, &mask);
    (void)sigprocmask(SIG_SETMASK, &mask, nullptr);
  }
  return true;
}

// posix_spawn and posix_spawnp in the world: fork, the attributes and actions, exec.
int spawn(pid_t* pid, const char* path, const posix_spawn_file_actions_t* fa,
          const posix_spawnattr_t* attr, char* const argv[], char* const envp[], bool search) {
  const std::vector<FileAction> actions = actions_of(fa);
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) return errno;
  const pid_t child = fork();
  if (child < 0) {
    const int error = errno;
    (void)close(report[0]);
    (void)close(report[1]);
    return error;
  }
  if (child == 0) {
    (void)close(report[0]);
    bool ok = apply(attr);
    for (const FileAction& a : actions) {
      if (!ok) break;
      // An action on the report pipe's descriptor moves the pipe away first.
      if (a.fd == report[1] || a.newfd == report[1]) {
        const int moved = fcntl(report[1], F_DUPFD_CLOEXEC, 3);
        if (moved >= 0) report[1] = moved;
      }
      ok = apply(a);
    }
    if (ok) {
      char* const* env = envp != nullptr ? envp : environ;
      if (search) {
        (void)execvpe(path, argv, env);
      } else {
        (void)execve(path, argv, env);
      }
    }
    const int error = errno;
    (void)!write(report[1], &error, sizeof error);
    _exit(127);
  }
  (void)close(report[1]);
  int error = 0;
  ssize_t got = 0;
  do {
    got = read(report[0], &error, sizeof error);
  } while (got < 0 && errno == EINTR);
  (void)close(report[0]);
  if (got == static_cast<ssize_t>(sizeof error)) {  // it never ran: reap it, as glibc does
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    return error;
  }
  if (pid != nullptr) *pid = child;
  return 0;
}

// popen's stream: the pipe's end in this process.
struct PopenEnd {
  int fd;
};

ssize_t popen_read(void* cookie, char* buf, size_t n) {
  return read(static_cast<PopenEnd*>(cookie)->fd, buf, n);
}

ssize_t popen_write(void* cookie, const char* buf, size_t n) {
  return write(static_cast<PopenEnd*>(cookie)->fd, buf, n);
}

int popen_close(void* cookie) {
  auto* end = static_cast<PopenEnd*>(cookie);
  const int rc = close(end->fd);
  delete end;
  return rc;
}

}  // namespace

extern "C" {

int posix_spawn_file_actions_init(posix_spawn_file_actions_t* fa) {
  {
    SpinLock::Guard g(g_lock);
    if (g_actions != nullptr) g_actions->erase(fa);
  }
  return KVSIM_REAL(posix_spawn_file_actions_init)(fa);
}

int posix_spawn_file_actions_destroy(posix_spawn_file_actions_t* fa) {
  {
    SpinLock::Guard g(g_lock);
    if (g_actions != nullptr) g_actions->erase(fa);
  }
  return KVSIM_REAL(posix_spawn_file_actions_destroy)(fa);
}

// Each add* is the C library's first (it checks the arguments), then recorded.

int posix_spawn_file_actions_addclose(posix_spawn_file_actions_t* fa, int fd) {
  const int rc = KVSIM_REAL(posix_spawn_file_actions_addclose)(fa, fd);
  return rc != 0 ? rc : record(fa, {FileAction::kClose, fd, -1, 0, 0, {}});
}

int posix_spawn_file_actions_adddup2(posix_spawn_file_actions_t* fa, int fd, int newfd) {
  const int rc = KVSIM_REAL(posix_spawn_file_actions_adddup2)(fa, fd, newfd);
  return rc != 0 ? rc : record(fa, {FileAction::kDup2, fd, newfd, 0, 0, {}});
}

int posix_spawn_file_actions_addopen(posix_spawn_file_actions_t* __restrict fa, int fd,
                                     const char* __restrict path, int oflag, mode_t mode) {
  const int rc = KVSIM_REAL(posix_spawn_file_actions_addopen)(fa, fd, path, oflag, mode);
  return rc != 0 ? rc : record(fa, {FileAction::kOpen, fd, -1, oflag, mode, path});
}

int posix_spawn_file_actions_addchdir_np(posix_spawn_file_actions_t* __restrict fa,
                                         const char* __restrict path) {
  const int rc = KVSIM_REAL(posix_spawn_file_actions_addchdir_np)(fa, path);
  return rc != 0 ? rc : record(fa, {FileAction::kChdir, -1, -1, 0, 0, path});
}

int posix_spawn_file_actions_addfchdir_np(posix_spawn_file_actions_t* fa, int fd) {
  const int rc = KVSIM_REAL(posix_spawn_file_actions_addfchdir_np)(fa, fd);
  return rc != 0 ? rc : record(fa, {FileAction::kFchdir, fd, -1, 0, 0, {}});
}

int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t* fa, int from) {
  const int rc = KVSIM_REAL(posix_spawn_file_actions_addclosefrom_np)(fa, from);
  return rc != 0 ? rc : record(fa, {FileAction::kClosefrom, from, -1, 0, 0, {}});
}

int posix_spawn_file_actions_addtcsetpgrp_np(posix_spawn_file_actions_t* fa, int fd) {
  const int rc = KVSIM_REAL(posix_spawn_file_actions_addtcsetpgrp_np)(fa, fd);
  return rc != 0 ? rc : record(fa, {FileAction::kTcsetpgrp, fd, -1, 0, 0, {}});
}

int posix_spawn(pid_t* pid, const char* path, const posix_spawn_file_actions_t* fa,
                const posix_spawnattr_t* attr, char* const argv[], char* const envp[]) {
  if (!simulated()) {
    return with_real_tsc([&] { return KVSIM_REAL(posix_spawn)(pid, path, fa, attr, argv, envp); });
  }
  return spawn(pid, path, fa, attr, argv, envp, false);
}

int posix_spawnp(pid_t* pid, const char* file, const posix_spawn_file_actions_t* fa,
                 const posix_spawnattr_t* attr, char* const argv[], char* const envp[]) {
  if (!simulated()) {
    return with_real_tsc([&] { return KVSIM_REAL(posix_spawnp)(pid, file, fa, attr, argv, envp); });
  }
  return spawn(pid, file, fa, attr, argv, envp, true);
}

int system(const char* command) {
  if (!simulated()) return with_real_tsc([&] { return KVSIM_REAL(system)(command); });
  if (command == nullptr) return 1;  // a shell is there
  // POSIX system(): the caller ignores SIGINT and SIGQUIT and blocks SIGCHLD while it waits.
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  struct sigaction old_int {
  }, old_quit{};
  (void)sigaction(SIGINT, &ignore, &old_int);
  (void)sigaction(SIGQUIT, &ignore, &old_quit);
  sigset_t chld, old_mask;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  (void)sigprocmask(SIG_BLOCK, &chld, &old_mask);
  int status = -1;
  const pid_t child = fork();
  if (child == 0) {
    (void)sigaction(SIGINT, &old_int, nullptr);
    (void)sigaction(SIGQUIT, &old_quit, nullptr);
    (void)sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    (void)execl("/bin/sh", "sh", "-c", command, static_cast<char*>(nullptr));
    _exit(127);
  }
  if (child > 0) {
    while (waitpid(child, &status, 0) < 0) {
      if (errno != EINTR) {
        status = -1;
        break;
      }
    }
  }
  const int error = errno;
  (void)sigaction(SIGINT, &old_int, nullptr);
  (void)sigaction(SIGQUIT, &old_quit, nullptr);
  (void)sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  errno = error;
  return status;
}

FILE* popen(const char* command, const char* mode) {
  if (!simulated()) return with_real_tsc([&] { return KVSIM_REAL(popen)(command, mode); });
  const bool reading = mode != nullptr && mode[0] == 'r';
  if (mode == nullptr || (mode[0] != 'r' && mode[0] != 'w')) {
    errno = EINVAL;
    return nullptr;
  }
  const bool cloexec = std::strchr(mode, 'e') != nullptr;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return nullptr;
  const int mine = reading ? fds[0] : fds[1];
  const int theirs = reading ? fds[1] : fds[0];
  const int target = reading ? STDOUT_FILENO : STDIN_FILENO;
  std::vector<int> others;  // POSIX: earlier popen streams are closed in the child
  {
    SpinLock::Guard g(g_lock);
    if (g_popen != nullptr) {
      for (const auto& entry : *g_popen) others.push_back(entry.second.fd);
    }
  }
  const pid_t child = fork();
  if (child < 0) {
    const int error = errno;
    (void)close(fds[0]);
    (void)close(fds[1]);
    errno = error;
    return nullptr;
  }
  if (child == 0) {
    for (int fd : others) (void)close(fd);
    if (theirs == target) {
      (void)fcntl(theirs, F_SETFD, 0);
    } else {
      (void)dup2(theirs, target);
    }
    (void)execl("/bin/sh", "sh", "-c", command, static_cast<char*>(nullptr));
    _exit(127);
  }
  (void)close(theirs);
  if (!cloexec) (void)fcntl(mine, F_SETFD, 0);
  cookie_io_functions_t io{};
  if (reading) {
    io.read = popen_read;
  } else {
    io.write = popen_write;
  }
  io.close = popen_close;
  FILE* stream = fopencookie(new PopenEnd{mine}, reading ? "r" : "w", io);
  if (stream == nullptr) {
    const int error = errno;
    (void)close(mine);
    errno = error;
    return nullptr;
  }
  SpinLock::Guard g(g_lock);
  if (g_popen == nullptr) g_popen = new std::map<FILE*, Popened>;
  (*g_popen)[stream] = {child, mine};
  return stream;
}

int pclose(FILE* stream) {
  pid_t child = -1;
  {
    SpinLock::Guard g(g_lock);
    if (g_popen != nullptr) {
      const auto it = g_popen->find(stream);
      if (it != g_popen->end()) {
        child = it->second.child;
        g_popen->erase(it);
      }
    }
  }
  if (child < 0) return KVSIM_REAL(pclose)(stream);
  (void)fclose(stream);
  int status = 0;
  while (waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return status;
}

}  // extern "C"
