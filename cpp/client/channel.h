// How a C++ program's kvsim libraries reach their world. A program started by `kvsim launch`
// (KVSIM_WORLD_SOCKET and KVSIM_PROCESS_TOKEN in its environment) sends each call to the world
// over a private Unix socket and waits for the answer, so its calls and sleeps happen in the
// launch's simulated time. Any other program gets a world of its own in process: the scenario
// named by $KVSIM_SCENARIO, else the preset $KVSIM_PRESET (default atlas-a2), in which it is the
// only program (handy for unit tests of transfer code; links to other programs need a launch).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "cpp/wire/wire.h"

namespace kvsim::cpp::client {

class Channel {
 public:
  /// The program's channel, opened at the first call.
  static Channel& get();

  /// The reply payload of one request; nullopt if the world cannot answer (it is gone, or the
  /// channel broke): the caller returns its API's failure code. The first failure says why on
  /// stderr.
  std::optional<std::string> call(wire::Op op, const std::string& payload);
  /// Simulated time as of the last answer, in picoseconds.
  std::uint64_t now_ps() const;
  /// True for a launched program (a world in another process).
  bool launched() const;

  struct State;

 private:
  Channel();
  State* state_;
};

}  // namespace kvsim::cpp::client
