// How a C++ program's kvsim libraries reach their world (libkvsim_channel).
//
// A program started by `kvsim launch` (KVSIM_WORLD_SOCKET and KVSIM_PROCESS_TOKEN in its
// environment) sends each call to the world over a private Unix socket, one connection per
// thread, and waits for the answer: its calls, sleeps and socket waits happen in the launch's
// simulated time. The world answers a thread only when every launched process waits, so the
// time of a thread's last answer is the simulated time for as long as it runs.
//
// Any other program uses the local backend that libkvsim_client installs: a world of its own
// in process (cpp/client/local_world.cpp). Without one, calls fail.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "cpp/wire/wire.h"

namespace kvsim::cpp::client {

/// Serves calls of a program that was not launched: the reply payload, or nullopt (and says why
/// on stderr once); sets `now_ps` to the simulated time after the call.
using LocalBackend =
    std::function<std::optional<std::string>(wire::Op, const std::string&, std::uint64_t& now_ps)>;

class Channel {
 public:
  /// The program's channel.
  static Channel& get();

  /// The reply payload of one request of the calling thread; nullopt if the world cannot answer
  /// (it is gone, refused this program, or the channel broke): the caller returns its API's
  /// failure code. The first failure says why on stderr.
  std::optional<std::string> call(wire::Op op, const std::string& payload);
  /// Simulated time for the calling thread, in picoseconds.
  std::uint64_t now_ps();
  /// Requests the calling thread has made so far.
  std::uint64_t calls_made() const;
  /// True in a program started by a launch, unless the world refused it (a child such a program
  /// forked or started, which inherits its environment but is no process of the launch).
  bool launched() const;

  /// Announces a thread about to start (the preloaded pthread_create): its slot, -1 if not
  /// launched. The launch counts the process as running until that thread's first call.
  std::int64_t announce_thread();
  /// The calling thread ends by pthread_exit: if it is the main thread, the process goes on.
  void main_thread_exits_alone();
  /// The announced thread did not start.
  void cancel_thread(std::int64_t slot);
  /// Binds the calling (new) thread to its announced slot; connects at once so that the world
  /// knows it runs.
  void adopt_thread(std::int64_t slot);

  /// In a fork's child that the world made a place for (Op::kFork): from now on this process is
  /// the program of `token`; the calling thread (its only one) connects at its next call.
  void become_child(const std::string& token);

  /// The calling thread's last failure reason (aclGetRecentErrMsg), nullptr if none.
  static const char* recent_error();
  /// Records the calling thread's last failure reason.
  static void set_recent_error(std::string why);

  /// Installs the backend of programs that were not launched (libkvsim_client does, at load).
  static void set_local_backend(LocalBackend backend);

 private:
  Channel();
  void forget_after_fork();

  bool launched_ = false;
  std::string socket_path_;
  std::string token_;
};

}  // namespace kvsim::cpp::client
