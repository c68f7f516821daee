// Shared machinery of the property suites: a fresh simulated world per case, a recorder of what
// reaches the hardware, the platform mutants (test decorators selected by KVSIM_PLATFORM_MUTANT),
// byte helpers and readable printing of statuses and descriptors.
#pragma once

#include <rapidcheck.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "impl/directory.h"
#include "impl/errors.h"
#include "impl/forwarding_platform.h"
#include "impl/llm_datadist.h"
#include "impl/status.h"
#include "sim/world.h"

namespace kvsim::impl {
/// Readable statuses and descriptors in counterexamples.
void showValue(LLMStatusCode code, std::ostream& os);
void showValue(const CopyDescriptor& d, std::ostream& os);
void showValue(const std::optional<LLMStatusCode>& r, std::ostream& os);
}  // namespace kvsim::impl

namespace kvsim::properties {

using impl::CopyDescriptor;
using impl::LLMStatusCode;
using impl::Time;
inline constexpr Time kUs = 1'000'000;
/// llm.SyncKvCacheWaitTime of every property world, in ms (transfers of a few KiB take µs).
inline constexpr int kSyncTimeoutMs = 20;

/// One batch as it reached the hardware.
struct Batch {
  int device = -1;
  std::vector<CopyDescriptor> descriptors;
  Time posted = 0;
  std::optional<Time> finished{};
  bool ok = false;
};

using impl::ForwardingPlatform;

/// Records every batch that reaches the hardware, with post and completion times.
class Recorder final : public ForwardingPlatform {
 public:
  using ForwardingPlatform::ForwardingPlatform;
  void post(int device, int engine, std::vector<CopyDescriptor> descriptors,
            std::function<void(const impl::CopyOutcome&)> done) override;
  std::vector<Batch> batches;
};

/// Deliberately faulty platforms: each must make some property fail.
enum class PlatformMutant {
  kNone,
  kReorder,     ///< reverses the descriptors of every batch of two or more
  kDrop,        ///< drops the last descriptor of every batch
  kDuplicate,   ///< re-posts the first descriptor of every batch once it completed
  kShift,       ///< moves the first destination of every batch by one byte
  kDelay,       ///< reports every completion 3 x llm.SyncKvCacheWaitTime late
  kIgnoreLock,  ///< every mutex admits everyone at once
};

/// KVSIM_PLATFORM_MUTANT: unset or "none", "reorder", "drop", "duplicate", "shift", "delay",
/// "ignore_lock" (anything else throws).
PlatformMutant platform_mutant_from_env();

/// The platform mutant decorator (kNone forwards unchanged).
class MutantPlatform final : public ForwardingPlatform {
 public:
  MutantPlatform(impl::Platform& inner, PlatformMutant mutant)
      : ForwardingPlatform(inner), mutant_(mutant) {}
  void post(int device, int engine, std::vector<CopyDescriptor> descriptors,
            std::function<void(const impl::CopyOutcome&)> done) override;
  std::unique_ptr<impl::Mutex> make_mutex(const std::string& name) override;

 private:
  PlatformMutant mutant_;
};

/// A fresh world on the atlas-a2 preset (devices 0-7 node 0, 8-15 node 1) with the stack
/// impl → MutantPlatform → Recorder → SystemcPlatform. One alive at a time (sim::World).
class Harness {
 public:
  Harness();
  ~Harness();
  Harness(const Harness&) = delete;
  Harness& operator=(const Harness&) = delete;

  /// The platform impl sees (the mutant on top).
  impl::Platform& platform() { return mutant_; }
  Recorder& recorder() { return recorder_; }
  sim::World& world() { return world_; }
  sim::SystemcPlatform& systemc() { return world_.platform(); }

  /// An initialized LLMDataDist on `device` with llm.SyncKvCacheWaitTime = kSyncTimeoutMs and the
  /// v2 CacheManager (sim::engine_options), `extra` overriding them; `listen` makes it a server at
  /// listen_address(device).
  std::unique_ptr<impl::LLMDataDist> make_dist(impl::LLMRole role, std::uint64_t cluster,
                                               int device, bool listen,
                                               std::map<std::string, std::string> extra = {});
  /// An LLMDataDist initialized with exactly `options` (plus ge.exec.deviceId 0 and
  /// llm.SyncKvCacheWaitTime unless given) in a new host process on `device`'s node that sees
  /// `device` as device 0, as on hardware. Throws what init throws.
  std::unique_ptr<impl::LLMDataDist> make_dist_with(impl::LLMRole role, std::uint64_t cluster,
                                                    int device,
                                                    std::map<std::string, std::string> options);
  /// `device`'s listen address "host_ip:port" (its node's host, sim::listen_port(device)).
  std::string listen_address(int device) const;
  /// The host process make_dist / make_dist_with last made for `cluster` (-1 if none).
  int process_of(std::uint64_t cluster) const;
  /// LLMClusterInfo naming the server `cluster` on `device`.
  impl::LLMClusterInfo cluster_info(std::uint64_t cluster, int device, int client_device = 0) const;
  /// link_clusters to one server; its overall code.
  LLMStatusCode link(impl::LLMDataDist& client, std::uint64_t cluster, int device);
  /// `size` bytes of DEVICE memory on `device`, 2 MiB aligned (so the bytes after it are not
  /// allocated), filled with pattern(size, seed).
  std::uint64_t alloc(int device, std::uint64_t size, std::uint64_t seed);
  std::vector<std::uint8_t> read(std::uint64_t addr, std::uint64_t len) const;
  void write(std::uint64_t addr, const std::vector<std::uint8_t>& bytes);
  /// Exceptions that escaped a simulated job (must stay empty).
  const std::vector<std::string>& job_failures() { return world_.platform().job_failures(); }

 private:
  sim::World world_;
  Recorder recorder_;
  MutantPlatform mutant_;
  std::map<std::uint64_t, int> processes_;
};

/// Deterministic bytes, a different sequence per seed.
std::vector<std::uint8_t> pattern(std::uint64_t size, std::uint64_t seed);

/// How a synchronous call ended: normally, or with which error type and status.
struct CallOutcome {
  enum class Kind { kOk, kTypeError, kValueError, kLLMException, kOther };
  Kind kind = Kind::kOk;
  LLMStatusCode code = LLMStatusCode::LLM_SUCCESS;  ///< LLMException's status_code
  std::string what{};
  friend bool operator==(const CallOutcome& a, const CallOutcome& b) {
    return a.kind == b.kind && a.code == b.code;
  }
  friend bool operator!=(const CallOutcome& a, const CallOutcome& b) { return !(a == b); }
};
/// Runs `call` and classifies how it ended.
CallOutcome outcome_of(const std::function<void()>& call);
/// How `call` ended as a status: LLM_SUCCESS if it returned, the LLMException's status if it raised
/// one (any other exception propagates as std::runtime_error).
LLMStatusCode status_of(const std::function<void()>& call);
/// The outcome of an LLMException with `code` (kOk for LLM_SUCCESS).
CallOutcome llm_outcome(LLMStatusCode code);
void showValue(const CallOutcome& o, std::ostream& os);

/// "LLM_SUCCESS", "None" for an empty optional, ...
std::string show_result(const std::optional<LLMStatusCode>& r);
/// A one-line list of descriptors "[src→dst +len, ...]" with addresses relative to bases.
std::string show_batches(const std::vector<Batch>& batches);

}  // namespace kvsim::properties
