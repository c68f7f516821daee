// The platform door: everything impl/ needs from the world, and nothing more (DESIGN.md, "The
// platform door"). The SystemC platform (sim/) implements it on the hardware model; any other
// platform (threads and memcpy) could too. impl/ behaves the same on every platform.
//
// Execution contexts: impl code runs either on a *job* (a simulated thread started by spawn(),
// which is where transfer_cache_async's background loop and user synchronizers run) or on the
// *driver* (the host program's own thread, between simulation steps: a test body, a Python
// script). Every blocking call below works from both: on a job it suspends the job in simulated
// time; on the driver it advances the simulation until the condition holds or the timeout passes.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "impl/copy_geometry.h"
#include "impl/types.h"

namespace kvsim::impl {

/// Simulated time in picoseconds.
using Time = std::uint64_t;
inline constexpr Time kForever = std::numeric_limits<Time>::max();
inline constexpr Time kPsPerMs = 1'000'000'000ULL;
/// Milliseconds (the API's timeout unit) to Time.
inline constexpr Time from_ms(std::uint64_t ms) {
  return ms * kPsPerMs;
}

/// How a posted copy batch ended.
struct CopyOutcome {
  bool ok = false;
  std::string error;               ///< empty when ok (e.g. "link 'roce n1d0' went down at 3 ms")
  std::uint64_t landed_bytes = 0;  ///< bytes that reached destination memory
};

/// Where an address range lives.
struct MemoryLocation {
  int device = -1;  ///< the device whose HBM holds it, or for host memory a device of its node
  int node = 0;
  Placement placement = Placement::DEVICE;
};

/// A one-shot flag in simulated time.
class Signal {
 public:
  virtual ~Signal() = default;
  /// Sets the flag and wakes every waiter (callable from any context, including completions).
  virtual void set() = 0;
  virtual bool is_set() const = 0;
  /// Waits until set or `timeout` (kForever: no limit) elapses; returns is_set(). On the driver,
  /// a wait that nothing can ever end (no pending simulation activity) returns false at once.
  [[nodiscard]] virtual bool wait_for(Time timeout) = 0;
};

/// A mutex held across simulated time (FIFO hand-over to waiters).
class Mutex {
 public:
  virtual ~Mutex() = default;
  virtual void lock() = 0;
  [[nodiscard]] virtual bool try_lock() = 0;
  virtual void unlock() = 0;
  virtual bool locked() const = 0;
};

/// The process id of a program that drives the world itself (not launched).
inline constexpr int kScriptProcess = 0;

/// The world as impl sees it. Not copyable or movable: impl holds it by reference.
class Platform {
 public:
  Platform() = default;
  Platform(const Platform&) = delete;
  Platform& operator=(const Platform&) = delete;
  virtual ~Platform() = default;

  // Memory.
  /// Allocates `size` bytes in the HBM of `device` (DEVICE) or in its node's host memory (HOST);
  /// nullopt if it does not fit.
  [[nodiscard]] virtual std::optional<std::uint64_t> allocate(int device, Placement placement,
                                                              std::uint64_t size,
                                                              std::uint64_t alignment) = 0;
  /// Frees an allocation made by allocate() (false if `addr` starts none).
  virtual bool free(std::uint64_t addr) = 0;
  /// Where [addr, addr+len) lives, if it lies inside one allocation.
  [[nodiscard]] virtual std::optional<MemoryLocation> locate(std::uint64_t addr,
                                                             std::uint64_t len) const = 0;
  /// Direct access for tests and the Python module (no simulated time passes).
  virtual void write(std::uint64_t addr, const std::uint8_t* data, std::uint64_t len) = 0;
  virtual void read(std::uint64_t addr, std::uint8_t* out, std::uint64_t len) const = 0;

  // Copies.
  /// Posts a batch of copies on a DMA engine of `device` (round-robin over its engines if
  /// engine < 0). `done` runs once, in simulation context, when the batch completes or fails.
  /// Descriptors must be valid (locate() succeeds for both ends, non-empty, disjoint
  /// destinations): impl checks before posting, the platform throws std::invalid_argument.
  virtual void post(int device, int engine, std::vector<CopyDescriptor> descriptors,
                    std::function<void(const CopyOutcome&)> done) = 0;
  /// DMA engines per device.
  virtual int engines(int device) const = 0;

  // Time and concurrency.
  virtual Time now() const = 0;
  /// Lets `duration` of simulated time pass for the caller.
  virtual void sleep(Time duration) = 0;
  virtual std::unique_ptr<Signal> make_signal() = 0;
  virtual std::unique_ptr<Mutex> make_mutex(const std::string& name) = 0;
  /// Starts `job` as a background job (a simulated thread) at the current time. The job runs for
  /// the caller's host process.
  virtual void spawn(const std::string& name, std::function<void()> job) = 0;
  /// True when the caller runs on a job, false on the driver.
  virtual bool on_job() const = 0;

  // Host processes (DESIGN.md "Simulated processes").
  /// The simulated host process the caller runs for: kScriptProcess for a program that was not
  /// launched (a script or test driving the world itself), 1, 2, ... for launched processes.
  virtual int current_process() const = 0;
  /// The world device behind the caller's logical device id (a launched process sees the
  /// devices its launch made visible; the script sees every device as its own id), or -1.
  virtual int resolve_device(int logical) const = 0;

  // Addressing (for cluster links).
  /// Number of devices in the world.
  virtual int device_count() const = 0;
  /// The device's NIC IPv4 address ("10.0.0.3").
  virtual std::string device_ip(int device) const = 0;
  /// The device with that address, or -1.
  virtual int device_by_ip(const std::string& ip) const = 0;
  /// The node (server) a device belongs to.
  virtual int node_of(int device) const = 0;
  /// The node's host IPv4 address: where its processes listen (spec §5 llm.listenIpInfo).
  virtual std::string host_ip(int node) const = 0;
  /// The node whose host has that address, or -1.
  virtual int node_by_host_ip(const std::string& ip) const = 0;
  /// Time of one small message there and back between two devices (link handshakes).
  virtual Time round_trip(int device_a, int device_b) const = 0;
  /// True if every link between the two devices' NICs is up now (a link setup needs it).
  virtual bool path_up(int device_a, int device_b) const = 0;
};

}  // namespace kvsim::impl
