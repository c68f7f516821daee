// impl's platform door implemented on the SystemC model: memory in the Fabric's HBMs, copies as
// DMA batches, jobs as dynamic SC_THREADs, waits as sc_events (on a job) or as simulation steps
// (on the driver).
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "impl/platform.h"
#include "model/fabric.h"

namespace kvsim::sim {

/// A simulated host process (DESIGN.md "Simulated processes"): a launched program on one node,
/// seeing some of that node's devices.
struct HostProcess {
  std::string name;
  int node = 0;
  std::vector<int> visible_devices;  ///< world device ids, by logical id
};

/// The SystemC platform. One per Fabric; all objects it makes live in that Fabric's kernel.
class SystemcPlatform final : public impl::Platform {
 public:
  explicit SystemcPlatform(model::Fabric& fabric);
  ~SystemcPlatform() override;

  std::optional<std::uint64_t> allocate(int device, impl::Placement placement, std::uint64_t size,
                                        std::uint64_t alignment) override;
  bool free(std::uint64_t addr) override;
  std::optional<impl::MemoryLocation> locate(std::uint64_t addr, std::uint64_t len) const override;
  void write(std::uint64_t addr, const std::uint8_t* data, std::uint64_t len) override;
  void read(std::uint64_t addr, std::uint8_t* out, std::uint64_t len) const override;
  /// Throws std::invalid_argument unless [addr, addr + len) is allocated memory: what read()
  /// checks, for callers that must size a buffer first.
  void check_read(std::uint64_t addr, std::uint64_t len) const;

  void post(int device, int engine, std::vector<impl::CopyDescriptor> descriptors,
            std::function<void(const impl::CopyOutcome&)> done) override;
  int engines(int device) const override;

  impl::Time now() const override;
  void sleep(impl::Time duration) override;
  std::unique_ptr<impl::Signal> make_signal() override;
  std::unique_ptr<impl::Mutex> make_mutex(const std::string& name) override;
  void spawn(const std::string& name, std::function<void()> job) override;
  bool on_job() const override;
  int current_process() const override { return current_process_; }
  int resolve_device(int logical) const override;

  int device_count() const override;
  std::string device_ip(int device) const override;
  int device_by_ip(const std::string& ip) const override;
  int node_of(int device) const override;
  std::string host_ip(int node) const override;
  int node_by_host_ip(const std::string& ip) const override;
  impl::Time round_trip(int device_a, int device_b) const override;
  bool path_up(int device_a, int device_b) const override;

  /// Adds a host process; returns its id (1, 2, ...). std::invalid_argument for a node the world
  /// lacks or a visible device that is not on that node.
  int add_process(HostProcess process);
  /// The process with that id (std::out_of_range otherwise).
  const HostProcess& process(int id) const;
  /// Runs `fn` on the driver as host process `process` (a runner initializing the engine of one
  /// of its processes), also across the simulation steps its waits run; std::logic_error on a
  /// job.
  void run_as(int process, const std::function<void()>& fn);
  /// Starts `job` as the first job of host process `process`.
  void spawn_as(int process, const std::string& name, std::function<void()> job);
  /// Kills host process `process` as SIGKILL would: none of its jobs runs again. Each stays
  /// suspended where it is, counted neither live nor blocked; a job it started that has not run
  /// yet never starts. The memory it allocated is freed, as the driver frees a dead process's;
  /// the engines it held are the caller's to abandon. Called from outside the process.
  void kill_process(int process);
  /// Frees what `process` allocated and has not freed (the driver at a process's death).
  void release_process_memory(int process);
  /// Whether kill_process ended `process`.
  bool process_killed(int process) const { return killed_.count(process) != 0; }

  /// Runs the simulation on the driver until `done()` holds or `timeout` passes; false on
  /// timeout or when nothing is left that could make it hold.
  bool drive_until(const std::function<bool()>& done, impl::Time timeout);
  /// Runs every delta cycle still due at the current time (no time passes).
  void finish_current_time();
  /// Runs the simulation until no activity is left, or until request_stop().
  void run_until_idle();
  /// Makes run_until_idle return at the next step (callable from a job or a signal handler).
  void request_stop();
  /// Wakes a driver blocked in drive_until so it re-checks its condition (called on any state
  /// change a driver may wait for).
  void wake_driver();
  /// Hooks run around every suspension of a job: `leave` just before the job yields to the
  /// kernel (its result is handed back to `enter`), `enter` right after it resumes (the job's
  /// process is current again). An embedded interpreter uses them to swap its per-job thread
  /// state (the Python module does).
  struct JobSwitchHooks {
    std::function<void*()> leave;
    std::function<void(void*)> enter;
  };
  void set_job_switch_hooks(JobSwitchHooks hooks) { hooks_ = std::move(hooks); }
  /// Runs a SystemC wait of the current job between the switch hooks; `what` (a literal) and
  /// `detail` (which must outlive the wait) say what it waits for while blocked (blocked_jobs).
  void job_wait(const std::function<void()>& wait, const char* what,
                const std::string* detail = nullptr);
  /// A job suspended in job_wait.
  struct BlockedJob {
    std::string job;       ///< its SystemC name
    int process = 0;       ///< the host process it runs for
    std::string what;      ///< "mutex link c1->c2", "an event", "a sleep"
    impl::Time since = 0;  ///< when it blocked
  };
  /// Every job suspended right now, by name (a launcher's report of who waits on what).
  std::vector<BlockedJob> blocked_jobs() const;
  /// The running job's SystemC name; empty on the driver.
  std::string current_job() const;

  /// Messages of exceptions that escaped a job (impl must catch its own; tests assert none).
  const std::vector<std::string>& job_failures() const { return job_failures_; }
  /// Jobs started and not yet returned (blocked or runnable).
  std::uint64_t live_jobs() const { return spawned_ - finished_; }
  /// From `from` to `until` (simulated time) every allocation in `device`'s HBM fails as if it
  /// were full: a fault campaign's device_oom (the library then reports its out-of-memory
  /// status). Host memory is not affected.
  void add_memory_fault(int device, impl::Time from, impl::Time until);
  /// From `from` to `until` (simulated time) every copy batch that `device`'s engines complete
  /// reports its outcome `delay` late: the bytes land on time, their completion does not (a
  /// fault campaign's completion_delay, a stuck completion queue [I]). Callers waiting with a
  /// timeout meet it.
  void add_completion_delay(int device, impl::Time from, impl::Time until, impl::Time delay);
  /// From `from` to `until` `device`'s copy engines take nothing new from their queues: copies
  /// posted meanwhile wait, then drain (a fault campaign's queue_stall; Fabric::stall_engines).
  void add_queue_stall(int device, impl::Time from, impl::Time until);

  /// Ends the jobs still suspended (and those of killed processes): each is resumed with an
  /// exception, not std::exception's, that unwinds its stack, so that what its frames own is
  /// freed (SystemC never unwinds a coroutine it does not resume). Jobs suspended inside Python
  /// code stay as they are. Call while what those jobs use is alive; the platform is spent after.
  void end_jobs();

 private:
  void start_kernel();
  void back_on_driver();
  void spawn_job(int process, const std::string& name, std::function<void()> job);

  model::Fabric& fabric_;
  std::vector<int> next_engine_;
  int driver_waiting_ = 0;
  std::uint64_t spawned_ = 0;
  std::uint64_t finished_ = 0;
  std::vector<std::string> job_failures_;
  JobSwitchHooks hooks_;
  std::vector<HostProcess> processes_;  ///< processes_[id - 1]
  int current_process_ = impl::kScriptProcess;
  int driver_process_ = impl::kScriptProcess;  ///< whom the driver runs as (run_as)
  // Kept cheap, as every wait of every job passes here: names are made only when asked for.
  struct Blocked {
    sc_core::sc_process_handle handle;
    int process = 0;
    const char* what = "";
    const std::string* detail = nullptr;
    impl::Time since = 0;
    void* python = nullptr;  ///< the switch hooks' token: set if it waits inside Python code
  };
  std::unordered_map<const void*, Blocked> blocked_;  ///< by the job's process object
  std::set<int> killed_;                              ///< processes kill_process ended
  std::unordered_map<std::uint64_t, int> owner_;      ///< allocation -> the process that made it
  std::map<const void*, Blocked> dead_jobs_;          ///< their jobs, resumed only by end_jobs
  struct MemoryFault {
    int device = 0;
    impl::Time from = 0, until = 0;
  };
  std::vector<MemoryFault> memory_faults_;  ///< add_memory_fault's windows
  struct CompletionDelay {
    int device = 0;
    impl::Time from = 0, until = 0, delay = 0;
  };
  std::vector<CompletionDelay> completion_delays_;  ///< add_completion_delay's windows
  bool stop_requested_ = false;
};

}  // namespace kvsim::sim
