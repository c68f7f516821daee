#include "cpp/server/launch_server.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/personality.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <sstream>
#include <stdexcept>

namespace kvsim::cpp {

using wire::Op;

namespace {

constexpr std::size_t kReadChunk = 1 << 20;   // a connection's requests
constexpr std::size_t kSmallChunk = 1 << 16;  // output pipes, hellos
constexpr int kFrameRestMs = 100;

// Bytes still to come of the request frame that `in` starts with (0: none started, or complete).
std::size_t missing_bytes(const std::string& in) {
  if (in.size() < 4) return in.empty() ? 0 : 4 - in.size();
  std::uint32_t size = 0;
  for (int i = 0; i < 4; ++i) {
    size |= static_cast<std::uint32_t>(static_cast<unsigned char>(in[i])) << (8 * i);
  }
  if (size > wire::kMaxFrame + 4) return 0;  // take_request refuses it
  const std::size_t total = 4 + static_cast<std::size_t>(size);
  return in.size() >= total ? 0 : total - in.size();
}

std::string seconds(std::uint64_t ps) {
  std::ostringstream out;
  out.precision(6);
  out << std::fixed << static_cast<double>(ps) * 1e-12 << " s";
  return out.str();
}

// A wait key with this bit names memory shared between processes (cpp/preload/waits.h
// kSharedKey): its waiters are the launch's, not one program's.
constexpr std::uint64_t kSharedWaitKey = std::uint64_t{1} << 63;

// The launch's pids: 4000 + rank for the launched programs (kvsim.launch.run's PID_BASE), then
// 4000 + n for the n-th program of the launch, children included.
constexpr std::int64_t kFirstLaunchPid = 4000;

std::string random_token() {
  unsigned char bytes[16];
  std::size_t got = 0;
  while (got < sizeof(bytes)) {
    const ssize_t n = getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error("kvsim launch: no random bytes for a process token");
    got += static_cast<std::size_t>(n);
  }
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out.push_back(hex[b >> 4]);
    out.push_back(hex[b & 15]);
  }
  return out;
}

void set_nonblocking(int fd) {
  const int flags = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

// argv[0] as execve needs it: a name without '/' is looked up in the program's own PATH.
std::string resolve(const std::string& program, const std::vector<std::string>& env,
                    const std::string& cwd) {
  if (program.find('/') != std::string::npos) return program;
  std::string path = "/usr/local/bin:/usr/bin:/bin";
  for (const std::string& e : env) {
    if (e.rfind("PATH=", 0) == 0) path = e.substr(5);
  }
  std::stringstream dirs(path);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    std::filesystem::path candidate = std::filesystem::path(dir.empty() ? "." : dir) / program;
    if (candidate.is_relative() && !cwd.empty()) candidate = std::filesystem::path(cwd) / candidate;
    if (access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return program;  // posix_spawn reports ENOENT
}

std::string hex(std::uint64_t v) {
  std::ostringstream out;
  out << std::hex << v;
  return out.str();
}

std::string wait_kind_name(wire::WaitKind kind) {
  switch (kind) {
    case wire::WaitKind::kMutex:
      return "a mutex";
    case wire::WaitKind::kCondition:
      return "a condition variable";
    case wire::WaitKind::kSemaphore:
      return "a semaphore";
    case wire::WaitKind::kRwLock:
      return "a read-write lock";
    case wire::WaitKind::kBarrier:
      return "a barrier";
    case wire::WaitKind::kFutex:
      return "a futex";
  }
  return "a wait";
}

std::string op_name(Op op) {
  switch (op) {
    case Op::kSleep:
      return "a sleep";
    case Op::kAcl:
      return "an ACL call";
    case Op::kDistCreate:
    case Op::kDistDestroy:
    case Op::kFinalize:
      return "LlmDataDist construction or Finalize";
    case Op::kInitialize:
      return "Initialize";
    case Op::kSetRole:
      return "SetRole";
    case Op::kLink:
      return "LinkLlmClusters";
    case Op::kUnlink:
      return "UnlinkLlmClusters";
    case Op::kRegister:
      return "RegisterKvCache";
    case Op::kUnregister:
      return "UnregisterKvCache";
    case Op::kPullCache:
      return "PullKvCache";
    case Op::kPullBlocks:
      return "PullKvBlocks";
    case Op::kPushCache:
      return "PushKvCache";
    case Op::kPushBlocks:
      return "PushKvBlocks";
    default:
      return "a call";
  }
}

// The lifecycle name of an llm_datadist call (LaunchServer::set_call_hook), "" for other requests.
// A Python program's request names its call on its first line ("LLMDataDist.link_clusters").
std::string lifecycle_call(Op op, const std::string& payload) {
  switch (op) {
    case Op::kInitialize:
      return "init";
    case Op::kFinalize:
      return "finalize";
    case Op::kLink:
      return "link_clusters";
    case Op::kUnlink:
      return "unlink_clusters";
    case Op::kRegister:
      return "register";
    case Op::kUnregister:
      return "unregister";
    case Op::kPullCache:
      return "pull_cache";
    case Op::kPullBlocks:
      return "pull_blocks";
    case Op::kPushCache:
      return "push_cache";
    case Op::kPushBlocks:
      return "push_blocks";
    case Op::kPython: {
      const std::string label = payload.substr(0, std::min(payload.find('\n'), payload.size()));
      const std::size_t dot = label.rfind('.');
      const std::string owner = dot == std::string::npos ? "" : label.substr(0, dot);
      if (owner != "LLMDataDist" && owner != "CacheManager" && owner != "KvCacheManager") {
        return "";
      }
      const std::string name = label.substr(dot + 1);
      // register_cache, register_blocks_cache, register_kv_cache: one lifecycle point.
      return name.compare(0, 9, "register_") == 0 ? "register" : name;
    }
    default:
      return "";
  }
}

}  // namespace

// A program's stdout or stderr: read from its pipe whenever there is something (so that the
// program never blocks on a full pipe), held line by line with its prefix at each barrier of the
// world (everything a waiting program wrote before its request is in the pipe by then), and
// written out once simulated time has moved on: an instant's lines go out program by program.
// How many barriers each program passes within one instant may vary between launches (a
// replay once put p1's line of an instant before p0's under load), so the order of the lines
// of one instant must not depend on it.
struct Output {
  int fd = -1;
  int sink = 1;
  std::string prefix;
  std::string pending;  ///< read, not yet held
  std::string held;     ///< complete lines of the current instant, prefixed
  std::FILE* copy = nullptr;

  // Reads what is there; false at end of file.
  bool drain() {
    if (fd < 0) return false;
    char buf[kSmallChunk];
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n > 0) {
        pending.append(buf, static_cast<std::size_t>(n));
        if (copy != nullptr) {
          std::fwrite(buf, 1, static_cast<std::size_t>(n), copy);
          std::fflush(copy);
        }
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      ::close(fd);
      fd = -1;
      return false;
    }
  }
  // Moves the complete lines read so far, prefixed, to the lines held for the current instant.
  void hold() {
    drain();
    std::size_t start = 0;
    for (std::size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1) {
      held += prefix;
      held.append(pending, start, nl + 1 - start);
    }
    pending.erase(0, start);
  }
  // Writes the held lines.
  void release() {
    std::size_t done = 0;
    while (done < held.size()) {
      const ssize_t w = ::write(sink, held.data() + done, held.size() - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) break;
      done += static_cast<std::size_t>(w);
    }
    held.clear();
  }
  // Writes everything read: the held lines, the complete ones since and the rest as a line.
  void emit_all() {
    hold();
    if (!pending.empty()) {
      held += prefix + pending + "\n";
      pending.clear();
    }
    release();
  }
  void close_now() {
    emit_all();
    if (fd >= 0) ::close(fd);
    fd = -1;
    if (copy != nullptr) std::fclose(copy);
    copy = nullptr;
  }
};

struct LaunchServer::Thread {
  // kReady: connected, its answer (or hello) waits in `pending` for the thread's turn.
  enum class State { kAnnounced, kRunning, kQueued, kServing, kAnswered, kReady, kGone };
  Program* program = nullptr;
  int slot = 0;
  int fd = -1;
  State state = State::kAnnounced;
  std::string in;
  std::string out;  ///< answers not yet sent, from out[sent]
  std::size_t sent = 0;
  wire::Request request;
  std::string reply;
  std::string fault;
  std::unique_ptr<impl::Signal> wake;
  bool quit = false;
  std::string what;
  std::uint64_t since = 0;
  std::string pending;                 ///< an answer waiting for the thread's turn
  std::unique_ptr<impl::Signal> woke;  ///< set by the kWake or thread end that ends its wait
  bool woken = false;
  std::uint64_t wait_key = 0;
  std::vector<Thread*> joiners;  ///< threads in kJoin on this one
  std::string prepared;          ///< the reply of a request done at once that preempt() queued
};

struct LaunchServer::Program {
  ProgramSpec spec;
  int node = 0;
  std::string token;
  pid_t pid = -1;
  int pidfd = -1;
  Output out;
  Output err;
  std::vector<std::unique_ptr<Thread>> threads;
  std::unique_ptr<Session> session;
  // One thread of a program runs at a time, so that what its threads do to shared memory follows
  // the order the world gives them (as Shadow runs one thread of a managed process at a time).
  Thread* running = nullptr;
  std::deque<Thread*> ready;                             ///< in the order their answers came
  std::map<std::uint64_t, std::deque<Thread*>> waiters;  ///< kWait's threads by key, FIFO
  bool exiting = false;  ///< its main thread said kBye: it runs until its process ends
  bool exited = false;
  std::optional<int> exit_code;
  std::uint64_t ended_ps = 0;
  std::string waiting;
  // A program that a launched program forked (cpp/preload/child_calls.cpp): its parent, which
  // reaps it; its exit status is what the parent's wait saw (0 until then).
  Program* parent = nullptr;
  int children = 0;                           ///< forks so far, for its children's names
  std::unique_ptr<impl::Signal> child_ended;  ///< set when one of its children ends
  bool waited = false;                        ///< its parent's wait has returned it
  std::int64_t launch_pid = 0;                ///< a child's getpid (a launched one's: KVSIM_PID)
};

LaunchServer::LaunchServer(sim::SystemcPlatform& platform, impl::Directory& directory,
                           Options options)
    : platform_(platform),
      directory_(directory),
      options_(std::move(options)),
      schedule_(options_.schedule_seed),
      net_(platform, directory) {}

LaunchServer::~LaunchServer() {
  stop_everything();
  // Its jobs still waiting (a stalled launch's, a killed program's) end here, while what they
  // use is alive: their stacks unwind and free what they hold.
  try {
    platform_.end_jobs();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvsim launch: ending the world's jobs failed: %s\n", e.what());
  }
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (!socket_path_.empty()) ::unlink(socket_path_.c_str());
  if (!dir_.empty()) ::rmdir(dir_.c_str());
}

void LaunchServer::add(ProgramSpec spec) {
  if (spec.argv.empty()) {
    throw std::invalid_argument("program '" + spec.name + "': no command");
  }
  auto p = std::make_unique<Program>();
  p->node = platform_.process(spec.process).node;  // std::out_of_range for an unknown one
  p->token = random_token();
  p->session = std::make_unique<Session>(platform_, directory_);
  net_.add_process(spec.process, p->node);
  p->spec = std::move(spec);
  programs_.push_back(std::move(p));
}

LaunchServer::Program& LaunchServer::add_child(Program& parent) {
  const sim::HostProcess& host = platform_.process(parent.spec.process);
  auto c = std::make_unique<Program>();
  c->spec = parent.spec;
  c->spec.name = parent.spec.name + "_" + std::to_string(++parent.children);  // SystemC-safe
  c->spec.process = platform_.add_process({c->spec.name, host.node, host.visible_devices});
  c->node = parent.node;
  c->token = random_token();
  c->session = std::make_unique<Session>(platform_, directory_);
  c->parent = &parent;
  c->launch_pid = kFirstLaunchPid + static_cast<std::int64_t>(programs_.size());
  net_.add_process(c->spec.process, c->node);
  net_.fork_process(parent.spec.process, c->spec.process);
  programs_.push_back(std::move(c));
  return *programs_.back();
}

void LaunchServer::know_child_pid(Program& c, std::uint64_t pid) {
  c.pid = static_cast<pid_t>(pid);
  c.pidfd = static_cast<int>(syscall(SYS_pidfd_open, c.pid, 0));
  if (c.pidfd < 0) program_ended(c, std::nullopt);  // it is gone already
}

void LaunchServer::kill_at(const std::string& name, std::uint64_t at) {
  for (auto& p : programs_) {
    if (p->spec.name != name) continue;
    if (running_) {
      spawn_kill(at, p.get());
    } else {
      kills_.emplace_back(at, p.get());
    }
    return;
  }
  throw std::invalid_argument("no program named '" + name + "' to kill");
}

void LaunchServer::kill_due_programs() {
  for (Program* p : kills_due_) {
    if (p->exited || p->pid <= 0) continue;
    ::kill(p->pid, SIGKILL);
    int status = 0;
    while (::waitpid(p->pid, &status, 0) < 0 && errno == EINTR) {
    }
    program_ended(*p, status);
    platform_.release_process_memory(p->spec.process);  // the driver frees a killed one's
  }
  kills_due_.clear();
}

void LaunchServer::start(Program& p) {
  // Without address-space randomisation a program's addresses (pthread_self, which logging and
  // stack dumps print; a heap object's id) are the same in every replay. Inherited across exec;
  // where the system refuses it the launch runs randomised.
  static const bool fixed_layout = [] {
    const int current = ::personality(0xffffffff);
    return current != -1 && ::personality(static_cast<unsigned long>(current) |  // NOLINT
                                          ADDR_NO_RANDOMIZE) != -1;
  }();
  (void)fixed_layout;
  int out[2];
  int err[2];
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
    throw std::runtime_error("kvsim launch: no pipe for program '" + p.spec.name + "'");
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  if (!p.spec.cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions, p.spec.cwd.c_str());
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);  // a Python launcher ignores it; programs expect the default
  sigaddset(&defaults, SIGXFSZ);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setpgroup(&attr, 0);  // its own group: its children end with it
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);

  std::vector<std::string> env = p.spec.env;
  env.push_back("KVSIM_WORLD_SOCKET=" + socket_path_);
  env.push_back("KVSIM_PROCESS_TOKEN=" + p.token);
  // Its output pipes lead to the launcher, not to a program: writes to them need not wake
  // anyone (cpp/preload/socket_calls.cpp adopts the other pipes a new image inherits).
  struct stat out_stat {};
  struct stat err_stat {};
  if (::fstat(out[1], &out_stat) == 0 && ::fstat(err[1], &err_stat) == 0) {
    env.push_back("KVSIM_LAUNCH_PIPES=" + std::to_string(out_stat.st_ino) + "," +
                  std::to_string(err_stat.st_ino));
  }
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = p.spec.argv;
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string path = resolve(p.spec.argv[0], p.spec.env, p.spec.cwd);

  const int rc = posix_spawn(&p.pid, path.c_str(), &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(out[1]);
  ::close(err[1]);
  if (rc != 0) {
    ::close(out[0]);
    ::close(err[0]);
    throw std::runtime_error("kvsim launch: program '" + p.spec.name + "': cannot start '" +
                             p.spec.argv[0] + "': " + std::strerror(rc));
  }
  const std::string prefix = "[" + p.spec.name + "] ";
  p.out.fd = out[0];
  p.out.sink = 1;
  p.out.prefix = prefix;
  p.err.fd = err[0];
  p.err.sink = 2;
  p.err.prefix = prefix;
  if (!options_.output_dir.empty()) {
    p.out.copy = std::fopen((options_.output_dir + "/" + p.spec.name + ".out").c_str(), "w");
    p.err.copy = std::fopen((options_.output_dir + "/" + p.spec.name + ".err").c_str(), "w");
  }
  set_nonblocking(p.out.fd);
  set_nonblocking(p.err.fd);
  p.pidfd = static_cast<int>(syscall(SYS_pidfd_open, p.pid, 0));  // -1: polled with waitpid
}

bool LaunchServer::run() {
  char templ[] = "/tmp/kvsim-world-XXXXXX";
  if (mkdtemp(templ) == nullptr) {  // mode 0700: the launching user's alone
    throw std::runtime_error("kvsim launch: cannot make the world's socket directory");
  }
  dir_ = templ;
  socket_path_ = dir_ + "/world.sock";
  listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, socket_path_.c_str(), socket_path_.size() + 1);
  if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(listen_fd_, 128) != 0) {
    throw std::runtime_error("kvsim launch: cannot listen at " + socket_path_ + ": " +
                             std::strerror(errno));
  }
  for (auto& p : programs_) start(*p);
  running_ = true;
  for (const auto& [at, program] : kills_) spawn_kill(at, program);

  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<long>(options_.wall_limit_s * 1000));
  for (;;) {
    if (all_ended()) break;
    if (!any_program_runs()) {
      emit_output();
      dispatch();
      if (!advance()) {
        stall_ = "every program left waits for something that cannot happen";
        break;
      }
      kill_due_programs();
      send_answers();
      continue;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) {
      stall_ = "the wall-clock limit of " + std::to_string(options_.wall_limit_s) + " s passed";
      break;
    }
    poll_once(static_cast<int>(std::min<long>(left, 1000)));
    if (!stall_.empty()) break;
  }
  const bool clean = stall_.empty();
  stop_everything();
  if (clean) platform_.run_until_idle();  // the ended programs' Session ends
  return clean;
}

bool LaunchServer::all_ended() const {
  for (const auto& p : programs_) {
    if (!p->exited) return false;
  }
  return true;
}

bool LaunchServer::any_program_runs() const {
  for (const auto& p : programs_) {
    if (p->exited) continue;
    if (p->running != nullptr) return true;  // give_turn leaves no ready thread without one
    if (p->exiting) return true;
    bool waits = false;
    for (const auto& t : p->threads) {
      if (t->state == Thread::State::kAnswered) return true;
      if ((t->state == Thread::State::kQueued || t->state == Thread::State::kServing) &&
          t->fd >= 0) {
        waits = true;
      }
    }
    if (!waits) return true;  // not connected yet, or computing without kvsim
  }
  return false;
}

void LaunchServer::emit_output() {
  // At the first barrier of a new instant nobody has run since the last barrier of the old one:
  // what is held is exactly the old instant's lines.
  if (platform_.now() != output_instant_) {
    for (auto& p : programs_) {
      p->out.release();
      p->err.release();
    }
    output_instant_ = platform_.now();
  }
  for (auto& p : programs_) {
    p->out.hold();
    p->err.hold();
  }
}

void LaunchServer::spawn_kill(std::uint64_t at, Program* program) {
  platform_.spawn("kill_" + program->spec.name, [this, at, program] {
    if (at > platform_.now()) platform_.sleep(at - platform_.now());
    kills_due_.push_back(program);
    platform_.wake_driver();
  });
}

void LaunchServer::dispatch() {
  for (auto& p : programs_) {
    for (auto& t : p->threads) {
      if (t->state != Thread::State::kQueued) continue;
      if (call_hook_) {
        const std::string call = lifecycle_call(t->request.op, t->request.payload);
        if (!call.empty()) call_hook_(p->spec.name, call);
      }
      t->state = Thread::State::kServing;
      t->what = describe(*p, t->request.op, t->request.payload);
      t->since = platform_.now();
      t->wake->set();
    }
  }
}

bool LaunchServer::advance() {
  if (!platform_.drive_until([this] { return answered_ > 0 || !kills_due_.empty(); },
                             impl::kForever)) {
    return false;
  }
  platform_.finish_current_time();
  return true;
}

void LaunchServer::send_answers() {
  const std::uint64_t now = platform_.now();
  for (auto& p : programs_) {
    for (auto& t : p->threads) {
      if (t->state != Thread::State::kAnswered) continue;
      --answered_;
      if (t->fd < 0) {  // it hung up meanwhile
        end_thread(*t);
        continue;
      }
      if (!t->fault.empty()) {
        drop(*p, *t, t->fault);
        continue;
      }
      become_ready(*t, wire::reply_frame(now, t->reply));
      t->reply.clear();
    }
    give_turn(*p);
  }
  answered_ = 0;
}

void LaunchServer::become_ready(Thread& t, std::string answer) {
  Program& p = *t.program;
  if (p.running == nullptr && options_.schedule_seed == 0) {
    p.running = &t;
    t.state = Thread::State::kRunning;
    t.out += answer;
    flush(t);
    return;
  }
  t.state = Thread::State::kReady;
  t.pending = std::move(answer);
  p.ready.push_back(&t);
}

void LaunchServer::give_turn(Program& p) {
  while (p.running == nullptr && !p.ready.empty()) {
    // A seeded schedule draws the next thread among the ready ones (become_ready queues every
    // answer then, so that threads answered at one time all compete).
    const std::size_t pick = options_.schedule_seed == 0 ? 0 : schedule_() % p.ready.size();
    Thread* t = p.ready[pick];
    p.ready.erase(p.ready.begin() + static_cast<std::ptrdiff_t>(pick));
    if (t->state == Thread::State::kAnnounced) {
      p.running = t;  // it runs until its hello, which is answered at once
    } else if (t->state == Thread::State::kReady && t->fd >= 0) {
      p.running = t;
      t->state = Thread::State::kRunning;
      t->out += t->pending;
      t->pending.clear();
      flush(*t);
    }
  }
}

std::map<std::uint64_t, std::deque<LaunchServer::Thread*>>& LaunchServer::waiters_of(
    Program& p, std::uint64_t key) {
  return (key & kSharedWaitKey) != 0 ? shared_waiters_ : p.waiters;
}

std::uint32_t LaunchServer::wake_waiters(Program& p, std::uint64_t key, std::uint32_t n) {
  std::uint32_t woken = 0;
  auto& waiters = waiters_of(p, key);
  if (auto it = waiters.find(key); it != waiters.end()) {
    auto& queue = it->second;
    while (woken < n && !queue.empty()) {
      wake_one(*queue.front());
      queue.pop_front();
      ++woken;
    }
    if (queue.empty()) waiters.erase(it);
  }
  return woken;
}

void LaunchServer::answer_now(Thread& t, const std::string& payload) {
  t.out += wire::reply_frame(platform_.now(), payload);
  flush(t);
}

bool LaunchServer::preempt() {
  return options_.schedule_seed != 0 && (schedule_() & 1U) != 0;
}

void LaunchServer::stop_running(Thread& t) {
  Program& p = *t.program;
  if (p.running != &t) return;
  p.running = nullptr;
  give_turn(p);
}

void LaunchServer::flush(Thread& t) {
  while (t.sent < t.out.size() && t.fd >= 0) {
    const ssize_t n = ::send(t.fd, t.out.data() + t.sent, t.out.size() - t.sent, MSG_NOSIGNAL);
    if (n > 0) {
      t.sent += static_cast<std::size_t>(n);
      if (t.sent == t.out.size()) {
        t.out.clear();
        t.sent = 0;
      }
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    t.out.clear();  // the program hung up; its EOF is read next
    t.sent = 0;
    return;
  }
}

void LaunchServer::drop(Program& p, Thread& t, const std::string& why) {
  std::fprintf(stderr, "kvsim launch: %s thread %d: %s; its calls end\n", p.spec.name.c_str(),
               t.slot, why.c_str());
  hang_up(t);
  if (t.state != Thread::State::kServing) end_thread(t);
}

void LaunchServer::hang_up(Thread& t) {
  if (t.fd >= 0) ::close(t.fd);
  t.fd = -1;
  t.out.clear();
  t.sent = 0;
  t.pending.clear();
}

void LaunchServer::end_thread(Thread& t) {
  t.state = Thread::State::kGone;
  t.quit = true;
  if (t.wake) t.wake->set();
  Program& p = *t.program;
  // A thread that ended no longer takes a wake meant for a live one.
  auto& waiters = waiters_of(p, t.wait_key);
  if (auto it = waiters.find(t.wait_key); it != waiters.end()) {
    auto& queue = it->second;
    queue.erase(std::remove(queue.begin(), queue.end(), &t), queue.end());
    if (queue.empty()) waiters.erase(it);
  }
  for (Thread* joiner : t.joiners) wake_one(*joiner);
  t.joiners.clear();
  stop_running(t);
}

void LaunchServer::wake_one(Thread& t) {
  t.woken = true;
  if (t.woke) t.woke->set();
}

void LaunchServer::poll_once(int timeout_ms) {
  std::vector<pollfd> fds;
  enum class Kind { kListen, kUnknown, kThread, kOut, kErr, kExit };
  struct Ref {
    Kind kind;
    Program* program;
    Thread* thread;
    std::size_t index;
  };
  std::vector<Ref> refs;
  fds.push_back({listen_fd_, POLLIN, 0});
  refs.push_back({Kind::kListen, nullptr, nullptr, 0});
  for (std::size_t i = 0; i < unknown_.size(); ++i) {
    fds.push_back({unknown_[i].fd, POLLIN, 0});
    refs.push_back({Kind::kUnknown, nullptr, nullptr, i});
  }
  bool reap_by_polling = false;
  for (auto& p : programs_) {
    for (auto& t : p->threads) {
      if (t->fd < 0) continue;
      fds.push_back({t->fd, static_cast<short>(POLLIN | (t->out.empty() ? 0 : POLLOUT)), 0});
      refs.push_back({Kind::kThread, p.get(), t.get(), 0});
    }
    if (p->out.fd >= 0) {
      fds.push_back({p->out.fd, POLLIN, 0});
      refs.push_back({Kind::kOut, p.get(), nullptr, 0});
    }
    if (p->err.fd >= 0) {
      fds.push_back({p->err.fd, POLLIN, 0});
      refs.push_back({Kind::kErr, p.get(), nullptr, 0});
    }
    if (!p->exited && p->pidfd >= 0) {
      fds.push_back({p->pidfd, POLLIN, 0});
      refs.push_back({Kind::kExit, p.get(), nullptr, 0});
    } else if (!p->exited && p->parent == nullptr) {
      reap_by_polling = true;
    }
  }
  if (reap_by_polling) timeout_ms = std::min(timeout_ms, 20);
  const int n = ::poll(fds.data(), fds.size(), timeout_ms);
  if (n < 0 && errno != EINTR) throw std::runtime_error("kvsim launch: poll failed");
  if (n < 0 && options_.interrupted && options_.interrupted()) {
    stall_ = "interrupted";
    return;
  }
  std::vector<std::size_t> closed_unknown;
  for (std::size_t i = 0; n > 0 && i < fds.size(); ++i) {
    if (fds[i].revents == 0) continue;
    const Ref& r = refs[i];
    switch (r.kind) {
      case Kind::kListen:
        accept_connections();
        break;
      case Kind::kUnknown: {
        Unknown& u = unknown_[r.index];
        char buf[kSmallChunk];
        const ssize_t got = ::read(u.fd, buf, sizeof(buf));
        if (got <= 0) {
          if (got < 0 && (errno == EAGAIN || errno == EINTR)) break;
          ::close(u.fd);
          closed_unknown.push_back(r.index);
          break;
        }
        u.in.append(buf, static_cast<std::size_t>(got));
        try {
          if (auto req = wire::take_request(u.in)) {
            closed_unknown.push_back(r.index);
            if (req->op != Op::kHello) {
              ::close(u.fd);
              std::fprintf(stderr, "kvsim launch: refused a connection that did not say hello\n");
            } else {
              hello(u.fd, req->payload, std::move(u.in));
            }
          }
        } catch (const wire::WireError& e) {
          ::close(u.fd);
          closed_unknown.push_back(r.index);
          std::fprintf(stderr, "kvsim launch: refused a connection: %s\n", e.what());
        }
        break;
      }
      case Kind::kThread:
        if (fds[i].revents & POLLOUT) flush(*r.thread);
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR))
          read_connection(r.program, r.thread, r.thread->fd);
        break;
      case Kind::kOut:
        r.program->out.drain();
        break;
      case Kind::kErr:
        r.program->err.drain();
        break;
      case Kind::kExit: {
        int status = 0;
        if (r.program->parent != nullptr) {  // its parent reaps it; the world sees it gone
          program_ended(*r.program, std::nullopt);
        } else if (waitpid(r.program->pid, &status, WNOHANG) == r.program->pid) {
          program_ended(*r.program, status);
        }
        break;
      }
    }
  }
  std::sort(closed_unknown.begin(), closed_unknown.end());
  for (auto it = closed_unknown.rbegin(); it != closed_unknown.rend(); ++it) {
    unknown_.erase(unknown_.begin() + static_cast<std::ptrdiff_t>(*it));
  }
  if (reap_by_polling) {
    for (auto& p : programs_) {
      int status = 0;
      if (!p->exited && p->pidfd < 0 && p->parent == nullptr && p->pid > 0 &&
          waitpid(p->pid, &status, WNOHANG) == p->pid) {
        program_ended(*p, status);
      }
    }
  }
}

void LaunchServer::accept_connections() {
  for (;;) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    unknown_.push_back({fd, {}});
  }
}

void LaunchServer::hello(int fd, const std::string& payload, std::string rest) {
  auto refuse = [&](const std::string& why) {
    const std::string frame =
        wire::reply_frame(platform_.now(), wire::Writer().boolean(false).str(why).take());
    (void)::send(fd, frame.data(), frame.size(), MSG_NOSIGNAL);
    ::close(fd);
  };
  std::string token;
  std::uint64_t pid = 0;
  std::int64_t slot = -1;
  try {
    wire::Reader in(payload);
    token = in.str();
    pid = in.u64();
    slot = in.i64();
    in.end();
  } catch (const wire::WireError& e) {
    refuse(std::string("a malformed hello: ") + e.what());
    return;
  }
  Program* p = nullptr;
  for (auto& candidate : programs_) {
    if (candidate->token == token) p = candidate.get();
  }
  if (p == nullptr) return refuse("an unknown process token");
  if (p->parent != nullptr && p->pid < 0 && !p->exited) know_child_pid(*p, pid);
  if (p->exited || static_cast<std::uint64_t>(p->pid) != pid) {
    // A child the program forked or started inherits the token, not a place in the launch.
    return refuse("process " + std::to_string(pid) + " is not the launched program '" +
                  p->spec.name + "' (pid " + std::to_string(p->pid) + ")");
  }
  Thread* t = nullptr;
  if (slot < 0) {
    // A new image after exec: the descriptors it closed on exec may be pipes others wait on.
    if (!p->threads.empty()) net_.ring_doorbells();
    p->threads.push_back(std::make_unique<Thread>());
    t = p->threads.back().get();
    t->program = p;
    t->slot = static_cast<int>(p->threads.size()) - 1;
  } else if (static_cast<std::size_t>(slot) < p->threads.size() &&
             p->threads[static_cast<std::size_t>(slot)]->state == Thread::State::kAnnounced) {
    t = p->threads[static_cast<std::size_t>(slot)].get();
  } else {
    return refuse("thread slot " + std::to_string(slot) + " was not announced");
  }
  t->fd = fd;
  t->wake = platform_.make_signal();
  Program& program = *p;
  platform_.spawn_as(program.spec.process, program.spec.name + "_thread" + std::to_string(t->slot),
                     [this, &program, t] {
                       for (;;) {
                         while (!t->wake->is_set()) (void)t->wake->wait_for(impl::kForever);
                         t->wake = platform_.make_signal();
                         if (t->quit) return;
                         try {
                           t->reply = serve(program, *t);
                         } catch (const wire::WireError& e) {
                           t->fault = std::string("a malformed request: ") + e.what();
                         } catch (const std::exception& e) {
                           t->fault = std::string("the world failed its request: ") + e.what();
                         }
                         if (t->quit) {  // its process ended while the request waited
                           t->state = Thread::State::kGone;
                           return;
                         }
                         t->state = Thread::State::kAnswered;
                         ++answered_;
                         platform_.wake_driver();
                       }
                     });
  std::string welcome =
      wire::reply_frame(platform_.now(), wire::Writer().boolean(true).str("").take());
  if (p->running == t) {  // an announced thread whose turn came
    t->state = Thread::State::kRunning;
    t->out += welcome;
    flush(*t);
  } else if (slot >= 0) {  // an announced thread still in the ready queue
    t->state = Thread::State::kReady;
    t->pending = std::move(welcome);
  } else {
    become_ready(*t, std::move(welcome));
    give_turn(*p);
  }
  t->in = std::move(rest);
  read_connection(p, t, -1);  // frames that came with the hello
}

void LaunchServer::read_connection(Program* owner, Thread* t, int fd) {
  Program& p = *owner;
  bool ended = false;
  if (fd >= 0) {
    static std::vector<char> chunk(kReadChunk);
    for (;;) {
      t->in.reserve(t->in.size() + missing_bytes(t->in));  // the frame in progress, at once
      const ssize_t n = ::read(fd, chunk.data(), chunk.size());
      if (n > 0) {
        t->in.append(chunk.data(), static_cast<std::size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        // A frame cut in the middle is being written right now: wait for its rest briefly
        // rather than going round the whole loop for every piece (a program that stops
        // mid-frame is served again after this pause, as any other).
        if (missing_bytes(t->in) == 0) break;
        pollfd more{fd, POLLIN, 0};
        if (::poll(&more, 1, kFrameRestMs) <= 0) break;
        continue;
      }
      ended = true;  // end of file: the thread ended (or the program)
      break;
    }
  }
  // What came before an end of file is still read, so a bad last frame is reported.
  try {
    while (t->fd >= 0) {
      std::optional<wire::Request> r = wire::take_request(t->in);
      if (!r) break;
      request(p, *t, std::move(*r));
    }
  } catch (const wire::WireError& e) {
    drop(p, *t, std::string("a malformed frame: ") + e.what());
  }
  if (!ended || t->fd < 0) return;
  hang_up(*t);  // a request being served ends when its answer finds no connection
  if (t->state != Thread::State::kServing && t->state != Thread::State::kAnswered) end_thread(*t);
}

void LaunchServer::request(Program& p, Thread& t, wire::Request r) {
  if (r.op == Op::kBye) {  // no answer: its connection closes next
    p.exiting = true;
    return;
  }
  if (t.state != Thread::State::kRunning) {
    drop(p, t,
         "a request while its last one is unanswered (op " +
             std::to_string(static_cast<int>(r.op)) + ", state " +
             std::to_string(static_cast<int>(t.state)) + ", last op " +
             std::to_string(static_cast<int>(t.request.op)) + ")");
    return;
  }
  try {
    switch (r.op) {
      case Op::kHello:
        drop(p, t, "a second hello");
        return;
      case Op::kNow:
        wire::Reader(r.payload).end();
        answer_now(t, {});
        return;
      case Op::kThreadNew: {
        wire::Reader(r.payload).end();
        p.threads.push_back(std::make_unique<Thread>());
        Thread& fresh = *p.threads.back();
        fresh.program = &p;
        fresh.slot = static_cast<int>(p.threads.size()) - 1;
        fresh.state = Thread::State::kAnnounced;
        fresh.wake = platform_.make_signal();
        // Its turn comes after the threads ready before it (never preempted here: the thread
        // cannot start before its creator has this answer).
        p.ready.push_back(&fresh);
        answer_now(t, wire::Writer().i64(fresh.slot).take());
        return;
      }
      case Op::kThreadCancel: {
        wire::Reader in(r.payload);
        const std::int64_t slot = in.i64();
        in.end();
        if (slot >= 0 && static_cast<std::size_t>(slot) < p.threads.size() &&
            p.threads[static_cast<std::size_t>(slot)]->state == Thread::State::kAnnounced) {
          p.threads[static_cast<std::size_t>(slot)]->state = Thread::State::kGone;
        }
        answer_now(t, {});
        return;
      }
      case Op::kFork: {
        wire::Reader(r.payload).end();
        Program& child = add_child(p);
        answer_now(t, wire::Writer().str(child.token).i64(child.launch_pid).take());
        return;
      }
      case Op::kForked: {
        wire::Reader in(r.payload);
        const std::string token = in.str();
        const std::int64_t pid = in.i64();
        in.end();
        for (auto& c : programs_) {
          if (c->parent != &p || c->token != token || c->exited) continue;
          if (pid < 0) {
            program_ended(*c, std::nullopt);  // the fork failed: no such child
            c->waited = true;
          } else if (c->pid < 0) {
            know_child_pid(*c, static_cast<std::uint64_t>(pid));
          }
        }
        answer_now(t, {});
        return;
      }
      case Op::kReaped: {
        wire::Reader in(r.payload);
        const std::int64_t pid = in.i64();
        const int status = in.i32();
        in.end();
        for (auto& c : programs_) {
          if (c->parent == &p && c->pid == pid) {
            c->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
          }
        }
        answer_now(t, {});
        return;
      }
      case Op::kRingPipes:
        wire::Reader(r.payload).end();
        net_.ring_doorbells();
        answer_now(t, {});
        return;
      case Op::kWake: {
        wire::Reader in(r.payload);
        const std::uint64_t key = in.u64();
        const std::uint32_t n = in.u32();
        in.end();
        // Memory shared with other processes: they run beside this one, so a waiter's wait may
        // still be on its way; the wake is served when every program waits (serve), by which
        // time each waiter has registered.
        if ((key & kSharedWaitKey) != 0) break;
        const std::uint32_t woken = wake_waiters(p, key, n);
        if (preempt()) {
          t.prepared = wire::Writer().u32(woken).take();
          break;
        }
        answer_now(t, wire::Writer().u32(woken).take());
        return;
      }
      case Op::kWait: {
        wire::Reader in(r.payload);
        t.wait_key = in.u64();
        (void)in.u8();
        (void)in.i64();
        in.end();
        // Registered now, before another thread of the program runs: a wake cannot be missed.
        t.woken = false;
        t.woke = platform_.make_signal();
        waiters_of(p, t.wait_key)[t.wait_key].push_back(&t);
        break;
      }
      case Op::kJoin: {
        wire::Reader in(r.payload);
        const std::int64_t slot = in.i64();
        in.end();
        t.woken = false;
        t.woke = platform_.make_signal();
        if (slot >= 0 && static_cast<std::size_t>(slot) < p.threads.size() &&
            p.threads[static_cast<std::size_t>(slot)]->state != Thread::State::kGone &&
            p.threads[static_cast<std::size_t>(slot)].get() != &t) {
          p.threads[static_cast<std::size_t>(slot)]->joiners.push_back(&t);
        } else {
          t.woken = true;  // it has ended already (or is no thread to wait for)
        }
        break;
      }
      default:
        break;
    }
    t.request = std::move(r);
    t.state = Thread::State::kQueued;
    stop_running(t);
  } catch (const wire::WireError& e) {
    drop(p, t, std::string("a malformed request: ") + e.what());
  }
}

std::string LaunchServer::serve(Program& p, Thread& t) {
  const Op op = t.request.op;
  const std::string& payload = t.request.payload;
  switch (op) {
    case Op::kSocket:
      return net_.handle(p.spec.process, payload);
    case Op::kWait: {
      wire::Reader in(payload);
      (void)in.u64();
      (void)in.u8();
      const std::int64_t timeout = in.i64();
      if (!t.woken) {
        (void)t.woke->wait_for(timeout < 0 ? impl::kForever : static_cast<impl::Time>(timeout));
      }
      if (!t.woken) {  // timed out: it leaves the queue
        auto& waiters = waiters_of(p, t.wait_key);
        auto it = waiters.find(t.wait_key);
        if (it != waiters.end()) {
          auto& queue = it->second;
          queue.erase(std::remove(queue.begin(), queue.end(), &t), queue.end());
          if (queue.empty()) waiters.erase(it);
        }
      }
      return wire::Writer().boolean(t.woken).take();
    }
    case Op::kJoin:
      while (!t.woken && !t.quit) (void)t.woke->wait_for(impl::kForever);
      return {};
    case Op::kWake: {
      wire::Reader in(payload);
      const std::uint64_t key = in.u64();
      const std::uint32_t n = in.u32();
      if ((key & kSharedWaitKey) != 0) return wire::Writer().u32(wake_waiters(p, key, n)).take();
      return std::move(t.prepared);  // done when it came (preempt): it competes for the turn
    }
    case Op::kWaitChild: {
      wire::Reader in(payload);
      const std::int64_t pid = in.i64();
      const bool nohang = in.boolean();
      in.end();
      for (;;) {
        bool known = false;
        for (auto& c : programs_) {
          if (c->parent != &p || c->waited || (pid > 0 && c->pid != pid)) continue;
          known = true;
          if (c->exited) {
            c->waited = true;
            return wire::Writer().i64(c->pid).take();
          }
        }
        if (!known) return wire::Writer().i64(-1).take();
        if (nohang) return wire::Writer().i64(0).take();
        p.child_ended = platform_.make_signal();
        (void)p.child_ended->wait_for(impl::kForever);
        if (t.quit) return {};
      }
    }
    case Op::kPython:
      if (!options_.python_call) throw std::runtime_error("this launch serves no Python calls");
      return options_.python_call(p.spec.process, payload);
    default:
      return p.session->handle(op, payload);
  }
}

std::string LaunchServer::describe(const Program& p, Op op, const std::string& payload) const {
  if (op == Op::kSocket) return net_.describe(p.spec.process, payload);
  if (op == Op::kWait) {
    try {
      wire::Reader in(payload);
      const std::uint64_t key = in.u64();
      return wait_kind_name(static_cast<wire::WaitKind>(in.u8())) + " at 0x" + hex(key);
    } catch (const wire::WireError&) {
    }
  }
  if (op == Op::kJoin) {
    try {
      return "pthread_join of thread " + std::to_string(wire::Reader(payload).i64());
    } catch (const wire::WireError&) {
    }
  }
  if (op == Op::kPython) return payload.substr(0, std::min<std::size_t>(payload.find('\n'), 200));
  if (op == Op::kSleep) {
    try {
      return "a sleep of " + seconds(wire::Reader(payload).u64());
    } catch (const wire::WireError&) {
    }
  }
  return op_name(op);
}

void LaunchServer::program_ended(Program& p, std::optional<int> wait_status) {
  const int status = wait_status.value_or(0);
  p.exited = true;
  p.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  p.ended_ps = platform_.now();
  if (p.pidfd >= 0) ::close(p.pidfd);
  p.pidfd = -1;
  p.out.drain();
  p.err.drain();
  for (auto& t : p.threads) {
    hang_up(*t);
    if (t->state != Thread::State::kServing && t->state != Thread::State::kAnswered) {
      end_thread(*t);
    } else if (t->state == Thread::State::kServing) {
      // A request waiting on a futex or a join ends with the process (the kernel's wait ends
      // with its thread); waits on sockets end as net_.end_process resets them.
      t->quit = true;
      if (t->woke) t->woke->set();
    }
  }
  const std::string why =
      "the process of program '" + p.spec.name + "' " +
      (!wait_status        ? std::string("ended")
       : WIFEXITED(status) ? "exited with status " + std::to_string(WEXITSTATUS(status))
                           : "was killed by signal " + std::to_string(WTERMSIG(status))) +
      " at t=" + seconds(p.ended_ps);
  net_.end_process(p.spec.process);
  net_.ring_doorbells();  // its pipe ends closed with it
  if (p.parent != nullptr && p.parent->child_ended) p.parent->child_ended->set();
  Session* session = p.session.get();
  const int process = p.spec.process;
  platform_.spawn_as(process, p.spec.name + "_end", [this, session, process, why] {
    if (options_.python_ended) options_.python_ended(process, why);
    session->end(why);
  });
}

int stack_signal() {
  return SIGRTMIN + 7;  // glibc keeps the first real-time signals; engines use SIGUSR1/2
}

// Asks every program still running for its threads' stacks before a stalled launch ends it:
// a Python program's bootstrap registers faulthandler for stack_signal() (kvsim.launched), which
// writes every thread's Python stack to its stderr, the program's own lines included. Waits in
// real time, until the programs' stderr has been quiet for 100 ms (at most 1 s).
void LaunchServer::dump_stacks() {
  bool any = false;
  for (auto& p : programs_) {
    if (p->pid > 0 && !p->exited && p->err.fd >= 0) {
      ::kill(p->pid, stack_signal());
      any = true;
    }
  }
  if (!any) return;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (std::chrono::steady_clock::now() < until) {
    std::vector<pollfd> fds;
    std::vector<Program*> owners;
    for (auto& p : programs_) {
      if (p->err.fd < 0) continue;
      fds.push_back({p->err.fd, POLLIN, 0});
      owners.push_back(p.get());
    }
    if (fds.empty() || ::poll(fds.data(), fds.size(), 100) <= 0) break;
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents != 0) owners[i]->err.drain();
    }
  }
}

void LaunchServer::stop_everything() {
  if (!stall_.empty()) dump_stacks();
  for (auto& p : programs_) {
    if (p->pid > 0 && !p->exited) {
      std::string waits;
      for (const auto& t : p->threads) {
        if (t->state == Thread::State::kServing || t->state == Thread::State::kQueued) {
          if (!waits.empty()) waits += "; ";
          waits += "thread " + std::to_string(t->slot) + ": " +
                   (t->what.empty() ? op_name(t->request.op) : t->what) +
                   " since t=" + seconds(t->since);
        }
      }
      p->waiting =
          waits.empty() ? "nothing kvsim knows of (it runs outside any kvsim call)" : waits;
      ::kill(-p->pid, SIGKILL);
      ::kill(p->pid, SIGKILL);
      int status = 0;
      while (waitpid(p->pid, &status, 0) < 0 && errno == EINTR) {
      }
      p->exited = true;
      if (p->pidfd >= 0) ::close(p->pidfd);
      p->pidfd = -1;
    }
    p->out.close_now();
    p->err.close_now();
    for (auto& t : p->threads) {
      if (t->fd >= 0) ::close(t->fd);
      t->fd = -1;
      if (t->state != Thread::State::kServing && t->wake) {
        t->quit = true;
        t->wake->set();
      }
    }
  }
  for (Unknown& u : unknown_) ::close(u.fd);
  unknown_.clear();
}

std::vector<ProgramEnd> LaunchServer::ends() const {
  std::vector<ProgramEnd> out;
  for (const auto& p : programs_) {
    out.push_back({p->spec.name, p->exit_code, p->ended_ps, p->waiting});
  }
  return out;
}

std::string LaunchServer::stall_report() const {
  if (stall_.empty()) return {};
  std::string out = "stopped at t=" + seconds(platform_.now()) + ": " + stall_ + "\n";
  for (const auto& p : programs_) {
    if (p->exit_code) continue;
    out += "  [" + p->spec.name + "] waits for " + p->waiting + "\n";
  }
  return out;
}

}  // namespace kvsim::cpp
