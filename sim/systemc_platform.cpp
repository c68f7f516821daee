// sc_spawn needs the dynamic-process API, which <systemc> only declares with this macro.
#define SC_INCLUDE_DYNAMIC_PROCESSES
#include "sim/systemc_platform.h"

#include <algorithm>

#include <systemc>

#include <cstring>
#include <deque>
#include <map>
#include <stdexcept>

#include "model/errors.h"

namespace kvsim::sim {
namespace {

using impl::Time;

bool in_thread() {
  return sc_core::sc_get_curr_process_kind() == sc_core::SC_THREAD_PROC_;
}

void require_blocking_context(const char* what) {
  if (sc_core::sc_get_curr_process_kind() == sc_core::SC_METHOD_PROC_) {
    throw std::logic_error(std::string(what) + " cannot block inside a completion callback");
  }
}

sc_core::sc_time span(Time t) {
  return sc_core::sc_time::from_value(t);
}

// Thrown into a suspended job by end_jobs. Not a std::exception, so that the handlers a job's
// code has for errors (catch std::exception) let it pass on to the job's end.
struct JobsEnd {};

class SystemcSignal final : public impl::Signal {
 public:
  explicit SystemcSignal(SystemcPlatform& p) : platform_(p) {}
  void set() override {
    if (set_) return;
    set_ = true;
    event_.notify(sc_core::SC_ZERO_TIME);
    platform_.wake_driver();
  }
  bool is_set() const override { return set_; }
  bool wait_for(Time timeout) override {
    if (set_) return true;
    require_blocking_context("Signal::wait_for");
    if (!in_thread()) return platform_.drive_until([this] { return set_; }, timeout);
    if (timeout == impl::kForever) {
      while (!set_) platform_.job_wait([this] { sc_core::wait(event_); }, "an event");
    } else {
      const Time deadline = platform_.now() + timeout;
      while (!set_ && platform_.now() < deadline)
        platform_.job_wait([&] { sc_core::wait(span(deadline - platform_.now()), event_); },
                           "an event, with a timeout");
    }
    return set_;
  }

 private:
  SystemcPlatform& platform_;
  sc_core::sc_event event_;
  bool set_ = false;
};

// FIFO mutex: unlock hands ownership to the oldest waiter, so no waiter starves.
class SystemcMutex final : public impl::Mutex {
 public:
  SystemcMutex(SystemcPlatform& p, std::string name) : platform_(p), name_(std::move(name)) {}
  void lock() override {
    if (!locked_) {
      locked_ = true;
      return;
    }
    if (sc_core::sc_get_curr_process_kind() == sc_core::SC_METHOD_PROC_) {
      require_blocking_context(("Mutex(" + name_ + ")::lock").c_str());
    }
    auto w = std::make_shared<Waiter>();
    waiters_.push_back(w);
    if (in_thread()) {
      while (!w->granted) platform_.job_wait([&w] { sc_core::wait(w->event); }, "mutex", &name_);
    } else if (!platform_.drive_until([&w] { return w->granted; }, impl::kForever)) {
      waiters_.erase(std::find(waiters_.begin(), waiters_.end(), w));
      throw std::logic_error("Mutex(" + name_ +
                             ")::lock on the driver would wait forever: its holder never runs");
    }
  }
  bool try_lock() override {
    if (locked_) return false;
    locked_ = true;
    return true;
  }
  void unlock() override {
    if (!locked_) throw std::logic_error("Mutex(" + name_ + ")::unlock while not locked");
    if (waiters_.empty()) {
      locked_ = false;
      return;
    }
    std::shared_ptr<Waiter> w = waiters_.front();
    waiters_.pop_front();
    w->granted = true;  // ownership passes directly: locked_ stays true
    w->event.notify(sc_core::SC_ZERO_TIME);
    platform_.wake_driver();
  }
  bool locked() const override { return locked_; }

 private:
  struct Waiter {
    sc_core::sc_event event;
    bool granted = false;
  };
  SystemcPlatform& platform_;
  std::string name_;
  bool locked_ = false;
  std::deque<std::shared_ptr<Waiter>> waiters_;
};

}  // namespace

SystemcPlatform::SystemcPlatform(model::Fabric& fabric)
    : fabric_(fabric),
      next_engine_(static_cast<std::size_t>(fabric.topology().device_count()), 0) {}

SystemcPlatform::~SystemcPlatform() = default;

std::optional<std::uint64_t> SystemcPlatform::allocate(int device, impl::Placement placement,
                                                       std::uint64_t size,
                                                       std::uint64_t alignment) {
  model::Topology& t = fabric_.topology();
  const model::MemoryId m = placement == impl::Placement::HOST ? t.host_memory(t.node_of(device))
                                                               : t.device_memory(device);
  if (!memory_faults_.empty() && placement != impl::Placement::HOST) {
    const Time at = now();
    for (const MemoryFault& f : memory_faults_) {
      if (f.device == device && at >= f.from && at < f.until) return std::nullopt;
    }
  }
  try {
    const std::uint64_t addr = t.memory(m).allocate(size, alignment == 0 ? 64 : alignment);
    owner_[addr] = current_process_;
    return addr;
  } catch (const model::ModelError& e) {
    if (e.kind() == model::ErrorKind::kOutOfMemory) return std::nullopt;
    throw std::invalid_argument(e.what());
  }
}

bool SystemcPlatform::free(std::uint64_t addr) {
  model::MemoryId m;
  if (fabric_.topology().memory_at(addr, &m) == nullptr) return false;
  try {
    fabric_.topology().memory(m).free(addr);
    owner_.erase(addr);
    return true;
  } catch (const model::ModelError&) {
    return false;
  }
}

std::optional<impl::MemoryLocation> SystemcPlatform::locate(std::uint64_t addr,
                                                            std::uint64_t len) const {
  const model::Topology& t = fabric_.topology();
  model::MemoryId m;
  const model::Hbm* hbm = t.memory_at(addr, &m);
  if (hbm == nullptr || len == 0 || !hbm->is_allocated(addr, len)) return std::nullopt;
  impl::MemoryLocation loc;
  if (static_cast<int>(m.index) < t.device_count()) {
    loc.device = static_cast<int>(m.index);
    loc.node = t.node_of(loc.device);
    loc.placement = impl::Placement::DEVICE;
  } else {
    loc.node = static_cast<int>(m.index) - t.device_count();
    loc.device = loc.node * t.spec().devices_per_node;
    loc.placement = impl::Placement::HOST;
  }
  return loc;
}

void SystemcPlatform::write(std::uint64_t addr, const std::uint8_t* data, std::uint64_t len) {
  model::MemoryId m;
  if (fabric_.topology().memory_at(addr, &m) == nullptr) {
    throw std::invalid_argument("write: address is in no memory");
  }
  model::Hbm& hbm = fabric_.topology().memory(m);
  try {
    hbm.check_access(addr, len, "write");
  } catch (const model::ModelError& e) {
    throw std::invalid_argument(e.what());
  }
  hbm.content().write(addr, data, len);
}

void SystemcPlatform::check_read(std::uint64_t addr, std::uint64_t len) const {
  model::MemoryId m;
  const model::Hbm* hbm = fabric_.topology().memory_at(addr, &m);
  if (hbm == nullptr) throw std::invalid_argument("read: address is in no memory");
  try {
    hbm->check_access(addr, len, "read");
  } catch (const model::ModelError& e) {
    throw std::invalid_argument(e.what());
  }
}

void SystemcPlatform::read(std::uint64_t addr, std::uint8_t* out, std::uint64_t len) const {
  check_read(addr, len);
  model::MemoryId m;
  fabric_.topology().memory_at(addr, &m)->content().read(addr, out, len);
}

void SystemcPlatform::post(int device, int engine, std::vector<impl::CopyDescriptor> descriptors,
                           std::function<void(const impl::CopyOutcome&)> done) {
  if (engine < 0) {
    int& next = next_engine_.at(static_cast<std::size_t>(device));
    engine = next;
    next = (next + 1) % engines(device);
  }
  std::vector<model::CopyDescriptor> descs;
  descs.reserve(descriptors.size());
  for (const auto& d : descriptors) descs.push_back({d.src_addr, d.dst_addr, d.length});
  try {
    fabric_.post({device, engine}, std::move(descs),
                 [this, device, done = std::move(done)](const model::BatchOutcome& o) {
                   impl::CopyOutcome out;
                   out.ok = o.ok;
                   out.error = o.error;
                   out.landed_bytes = o.landed_bytes;
                   Time delay = 0;
                   const Time at = now();
                   for (const CompletionDelay& f : completion_delays_) {
                     if (f.device == device && at >= f.from && at < f.until) delay = f.delay;
                   }
                   if (delay > 0 && done) {  // a thread of the kernel's, not a job of a process
                     sc_core::sc_spawn([this, done, out, delay] {
                       sc_core::wait(span(delay));
                       done(out);
                       wake_driver();
                     });
                     return;
                   }
                   if (done) done(out);
                   wake_driver();
                 });
  } catch (const model::ModelError& e) {
    throw std::invalid_argument(e.what());
  }
}

int SystemcPlatform::engines(int device) const {
  (void)fabric_.topology().device_memory(device);  // throws for an unknown device
  return fabric_.topology().spec().dma.engines;
}

Time SystemcPlatform::now() const {
  return fabric_.now();
}

void SystemcPlatform::sleep(Time duration) {
  require_blocking_context("sleep");
  if (in_thread()) {
    job_wait([duration] { sc_core::wait(span(duration)); }, "a sleep");
    return;
  }
  const Time until = now() + duration;
  drive_until([this, until] { return now() >= until; }, duration);
}

std::unique_ptr<impl::Signal> SystemcPlatform::make_signal() {
  return std::make_unique<SystemcSignal>(*this);
}

std::unique_ptr<impl::Mutex> SystemcPlatform::make_mutex(const std::string& name) {
  return std::make_unique<SystemcMutex>(*this, name);
}

void SystemcPlatform::spawn(const std::string& name, std::function<void()> job) {
  spawn_job(current_process_, name, std::move(job));
}

void SystemcPlatform::spawn_as(int process, const std::string& name, std::function<void()> job) {
  (void)this->process(process);
  spawn_job(process, name, std::move(job));
}

void SystemcPlatform::spawn_job(int process, const std::string& name, std::function<void()> job) {
  sc_core::sc_spawn_options opts;
  opts.set_stack_size(1 << 20);  // user synchronizers (and Python) may need a deep stack
  const std::string unique = name + "_" + std::to_string(++spawned_);
  sc_core::sc_spawn(
      [this, process, unique, job = std::move(job)] {
        current_process_ = process;
        if (!killed_.empty() && process_killed(process)) {  // its process died before it ran
          ++finished_;
          wake_driver();
          return;
        }
        try {
          job();
        } catch (const JobsEnd&) {  // end_jobs: its stack is unwound, it ends here
        } catch (const std::exception& e) {
          job_failures_.push_back(unique + ": " + e.what());
        } catch (...) {
          job_failures_.push_back(unique + ": unknown exception");
        }
        ++finished_;
        wake_driver();
      },
      unique.c_str(), &opts);
  wake_driver();
}

bool SystemcPlatform::on_job() const {
  return in_thread();
}

void SystemcPlatform::job_wait(const std::function<void()>& wait, const char* what,
                               const std::string* detail) {
  const int process = current_process_;
  const sc_core::sc_process_handle handle = sc_core::sc_get_current_process_handle();
  const void* key = handle.get_process_object();
  Blocked& b = blocked_[key] = Blocked{handle, process, what, detail, now()};
  void* token = hooks_.leave ? hooks_.leave() : nullptr;
  b.python = token;
  try {
    wait();
    if (!dead_jobs_.empty() && dead_jobs_.count(key) != 0) {  // one branch while nobody died
      // Its process was killed while it waited: it never runs again (a dynamic thread with no
      // static sensitivity is never triggered by wait()), unless end_jobs ends it.
      for (;;) sc_core::wait();
    }
  } catch (const JobsEnd&) {
    // A killed process's job was counted as finished then; it is counted when it ends now.
    if (dead_jobs_.erase(key) != 0) --finished_;
    blocked_.erase(key);
    if (hooks_.enter) hooks_.enter(token);
    throw;
  }
  current_process_ = process;
  blocked_.erase(key);
  if (hooks_.enter) hooks_.enter(token);
}

void SystemcPlatform::kill_process(int process) {
  (void)this->process(process);
  if (!killed_.insert(process).second) return;
  // Only one job runs at a time, and a killed process's jobs are killed from elsewhere, so each
  // of them is suspended in job_wait or spawned and not yet started.
  for (auto it = blocked_.begin(); it != blocked_.end();) {
    if (it->second.process != process) {
      ++it;
      continue;
    }
    dead_jobs_.emplace(it->first, it->second);
    ++finished_;
    it = blocked_.erase(it);
  }
  release_process_memory(process);
  wake_driver();
}

void SystemcPlatform::add_memory_fault(int device, Time from, Time until) {
  (void)fabric_.topology().device_memory(device);  // checks the device
  if (until > from) memory_faults_.push_back({device, from, until});
}

void SystemcPlatform::add_completion_delay(int device, Time from, Time until, Time delay) {
  (void)fabric_.topology().device_memory(device);  // checks the device
  if (until > from && delay > 0) completion_delays_.push_back({device, from, until, delay});
}

void SystemcPlatform::add_queue_stall(int device, Time from, Time until) {
  try {
    fabric_.stall_engines(device, from, until);
  } catch (const model::ModelError& e) {
    throw std::invalid_argument(e.what());
  }
}

void SystemcPlatform::end_jobs() {
  // A job's unwinding may block again (a destructor that waits) or wake others: a few rounds.
  for (int round = 0; round < 8; ++round) {
    auto jobs = std::make_shared<std::vector<sc_core::sc_process_handle>>();
    for (const auto& [key, b] : blocked_) {
      if (b.python == nullptr) jobs->push_back(b.handle);
    }
    for (const auto& [key, b] : dead_jobs_) {
      if (b.python == nullptr) jobs->push_back(b.handle);
    }
    if (jobs->empty()) return;
    std::sort(jobs->begin(), jobs->end(),  // a fixed order
              [](sc_core::sc_process_handle a, sc_core::sc_process_handle b) {
                return std::strcmp(a.name(), b.name()) < 0;
              });
    // throw_it must come from a process while the kernel runs (SystemC preempts the caller
    // with each target, which unwinds to its end before the next is thrown to).
    sc_core::sc_spawn_options method;
    method.spawn_method();
    sc_core::sc_spawn(
        [jobs] {
          for (sc_core::sc_process_handle& h : *jobs) {
            if (h.valid() && !h.terminated()) h.throw_it(JobsEnd{});
          }
          jobs->clear();
        },
        sc_core::sc_gen_unique_name("end_jobs"), &method);
    start_kernel();
    sc_core::sc_start(sc_core::SC_ZERO_TIME);
    back_on_driver();
  }
}

void SystemcPlatform::release_process_memory(int process) {
  std::vector<std::uint64_t> held;
  for (const auto& [addr, owner] : owner_) {
    if (owner == process) held.push_back(addr);
  }
  std::sort(held.begin(), held.end());  // the allocator's state after does not hang on hashing
  for (const std::uint64_t addr : held) free(addr);
}

std::vector<SystemcPlatform::BlockedJob> SystemcPlatform::blocked_jobs() const {
  std::vector<BlockedJob> out;
  for (const auto& [key, b] : blocked_) {
    out.push_back({b.handle.name(), b.process,
                   b.detail != nullptr ? std::string(b.what) + " " + *b.detail : b.what, b.since});
  }
  std::sort(out.begin(), out.end(),
            [](const BlockedJob& a, const BlockedJob& b) { return a.job < b.job; });
  return out;
}

std::string SystemcPlatform::current_job() const {
  return in_thread() ? sc_core::sc_get_current_process_handle().name() : std::string();
}

void SystemcPlatform::request_stop() {
  stop_requested_ = true;
  if (sc_core::sc_get_status() == sc_core::SC_RUNNING) sc_core::sc_pause();
}

void SystemcPlatform::back_on_driver() {
  current_process_ = driver_process_;  // the script, or run_as's process while it runs
}

int SystemcPlatform::add_process(HostProcess process) {
  const model::Topology& t = fabric_.topology();
  if (process.node < 0 || process.node >= t.spec().nodes) {
    throw std::invalid_argument("process '" + process.name + "': node " +
                                std::to_string(process.node) + " is not a node of this world (0.." +
                                std::to_string(t.spec().nodes - 1) + ")");
  }
  for (int d : process.visible_devices) {
    if (d < 0 || d >= t.device_count() || t.node_of(d) != process.node) {
      throw std::invalid_argument("process '" + process.name + "': device " + std::to_string(d) +
                                  " is not a device of node " + std::to_string(process.node));
    }
  }
  processes_.push_back(std::move(process));
  return static_cast<int>(processes_.size());
}

const HostProcess& SystemcPlatform::process(int id) const {
  if (id < 1 || id > static_cast<int>(processes_.size())) {
    throw std::out_of_range("no host process " + std::to_string(id));
  }
  return processes_[static_cast<std::size_t>(id - 1)];
}

void SystemcPlatform::run_as(int process, const std::function<void()>& fn) {
  if (in_thread()) throw std::logic_error("run_as is for the driver, not a job");
  (void)this->process(process);
  struct Restore {
    int& current;
    int& driver;
    ~Restore() { current = driver = impl::kScriptProcess; }
  } restore{current_process_, driver_process_};
  // The driver stays this process across the simulation steps fn's waits run (back_on_driver).
  current_process_ = driver_process_ = process;
  fn();
}

int SystemcPlatform::resolve_device(int logical) const {
  if (current_process_ == impl::kScriptProcess) {
    return logical >= 0 && logical < device_count() ? logical : -1;
  }
  const std::vector<int>& visible = process(current_process_).visible_devices;
  return logical >= 0 && logical < static_cast<int>(visible.size())
             ? visible[static_cast<std::size_t>(logical)]
             : -1;
}

int SystemcPlatform::node_of(int device) const {
  return fabric_.topology().node_of(device);
}

std::string SystemcPlatform::host_ip(int node) const {
  return fabric_.topology().host_ip(node);
}

int SystemcPlatform::node_by_host_ip(const std::string& ip) const {
  return fabric_.topology().node_by_host_ip(ip);
}

int SystemcPlatform::device_count() const {
  return fabric_.topology().device_count();
}

std::string SystemcPlatform::device_ip(int device) const {
  return fabric_.topology().device_ip(device);
}

int SystemcPlatform::device_by_ip(const std::string& ip) const {
  return fabric_.topology().device_by_ip(ip);
}

Time SystemcPlatform::round_trip(int device_a, int device_b) const {
  const model::Topology& t = fabric_.topology();
  const model::Route r = t.route(t.device_memory(device_a), t.device_memory(device_b), device_a, 0);
  return 2 * r.latency;
}

bool SystemcPlatform::path_up(int device_a, int device_b) const {
  const model::Topology& t = fabric_.topology();
  const model::Route r = t.route(t.device_memory(device_a), t.device_memory(device_b), device_a, 0);
  for (const std::uint32_t link : r.links) {
    if (!fabric_.link_up(link)) return false;
  }
  return true;
}

bool SystemcPlatform::drive_until(const std::function<bool()>& done, Time timeout) {
  start_kernel();
  const Time start = now();
  const Time deadline = timeout == impl::kForever || impl::kForever - start < timeout
                            ? impl::kForever
                            : start + timeout;
  ++driver_waiting_;
  struct Leave {
    int& n;
    ~Leave() { --n; }
  } leave{driver_waiting_};
  while (!done()) {
    if (now() >= deadline) return false;
    if (deadline == impl::kForever) {
      if (!sc_core::sc_pending_activity()) return false;  // nothing can ever make it hold
      sc_core::sc_start();  // until starvation, or until wake_driver() pauses it
    } else {
      sc_core::sc_start(span(deadline - now()), sc_core::SC_RUN_TO_TIME);
    }
    back_on_driver();
  }
  return true;
}

void SystemcPlatform::start_kernel() {
  // The driver steps the kernel on purpose, including steps in which nothing is due (a fresh
  // kernel resets report actions, hence here and not once).
  sc_core::sc_report_handler::set_actions(sc_core::SC_ID_NO_SC_START_ACTIVITY_,
                                          sc_core::SC_DO_NOTHING);
  // Processes spawned during elaboration only count as pending once the kernel has initialised.
  if (sc_core::sc_get_status() == sc_core::SC_ELABORATION) {
    sc_core::sc_start(sc_core::SC_ZERO_TIME);
    back_on_driver();
  }
}

void SystemcPlatform::finish_current_time() {
  start_kernel();
  while (sc_core::sc_pending_activity_at_current_time()) {
    sc_core::sc_start(sc_core::SC_ZERO_TIME);
    back_on_driver();
  }
}

void SystemcPlatform::run_until_idle() {
  start_kernel();
  stop_requested_ = false;
  while (sc_core::sc_pending_activity() && !stop_requested_) {
    sc_core::sc_start();
    back_on_driver();
  }
}

void SystemcPlatform::wake_driver() {
  if (driver_waiting_ > 0 && sc_core::sc_get_status() == sc_core::SC_RUNNING) sc_core::sc_pause();
}

}  // namespace kvsim::sim
