// Launched programs as real OS processes of one world (DESIGN.md "Real OS processes joining one
// world", after Shadow's design_2x: the world is the manager and owns simulated time).
//
// The server starts each program with KVSIM_WORLD_SOCKET (a Unix socket in a fresh 0700
// directory, so only the launching user reaches it) and a secret KVSIM_PROCESS_TOKEN; each thread
// of a program connects once and then sends one request at a time (cpp/wire/wire.h). A request
// runs on a SystemC job of its thread, as the program's host process: its ACL and llm_datadist
// calls on the program's Session, its TCP calls on the ControlNet, its sleeps as simulated time.
//
// Time: the kernel runs only while no program runs, i.e. every live program has each of its
// connected threads waiting for an answer (and no announced thread yet to connect); a program
// that has not connected yet, or whose threads all closed, runs. Then the requests are
// dispatched in (rank, thread) order, the kernel runs until at least one answer is ready and
// every delta cycle of that time is done, and the answers go out. Nothing depends on wall-clock
// time or arrival order, so a launch replays bit for bit.
//
// Threads: one thread of a program runs at a time (as Shadow runs a managed process's threads),
// so that what they do to the memory they share follows an order the world gives. An answer for
// a thread while another thread of its program runs waits in the program's ready queue, in the
// order the answers came (by thread at one time), until the running one asks for something that
// waits or ends; a thread just created is queued when it is announced. Threads wait for each
// other with kWait/kWake keyed by an address of the program (the preloaded mutexes, conditions
// and semaphores, cpp/preload/sync_calls.cpp) and kJoin: a wait is registered as its request
// arrives, before any other thread of the program runs, so no wake is lost.
//
// Faults: a frame that does not decode, or a request while one is outstanding, ends that
// thread's connection (its calls fail); a program that exits or dies ends its Session (the
// instances it holds are abandoned) and closes its sockets. The world and the other programs go
// on. A connection must first present a launched program's token from that program's own
// process; a child it forks or starts is refused (it runs outside the launch).
#pragma once

#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "cpp/server/control_net.h"
#include "cpp/server/session.h"
#include "impl/directory.h"
#include "sim/systemc_platform.h"

namespace kvsim::cpp {

/// One program to launch.
struct ProgramSpec {
  std::string name;               ///< for output prefixes and reports
  int process = 0;                ///< its host process in the world (SystemcPlatform::add_process)
  std::vector<std::string> argv;  ///< argv[0] without '/' is looked up in env's PATH
  std::vector<std::string> env;   ///< NAME=VALUE, complete (the server adds its two)
  std::string cwd;                ///< empty: the launcher's
};

/// How a launched program ended.
struct ProgramEnd {
  std::string name;
  std::optional<int> exit_code;  ///< nullopt: it never ended (stall or wall-clock limit)
  std::uint64_t ended_ps = 0;    ///< simulated time of its end
  std::string waiting;           ///< what it waited for when the launch stopped
};

class LaunchServer {
 public:
  struct Options {
    std::string output_dir;  ///< also write each program's output to DIR/NAME.out and .err
    double wall_limit_s = 600;
    /// Asked whenever a wait for the programs is interrupted by a signal: true stops the launch
    /// (an embedding interpreter's Ctrl-C).
    std::function<bool()> interrupted;
    /// Serves Op::kPython for a program's host process: the reply to a request (a Python
    /// program's llm_datadist calls, run by the launcher's interpreter). Runs on the caller's
    /// job, so it may wait in simulated time. Unset: such requests end the thread's calls.
    std::function<std::string(int process, const std::string& request)> python_call;
    /// Told on the program's job when its process has ended, with why (before its Session ends).
    std::function<void(int process, const std::string& why)> python_ended;
    /// Which of a program's ready threads runs next: 0 the one ready longest (FIFO); any other
    /// value draws it from a generator seeded with it, and a thread that wakes another may
    /// give up its turn there (preempt), so that one launch can be replayed under
    /// many schedules (the rule checker's verdict must not change with them).
    std::uint64_t schedule_seed = 0;
  };

  LaunchServer(sim::SystemcPlatform& platform, impl::Directory& directory, Options options);
  /// Kills what still runs and removes the socket's directory.
  ~LaunchServer();
  LaunchServer(const LaunchServer&) = delete;
  LaunchServer& operator=(const LaunchServer&) = delete;

  /// Adds a program (before run); std::invalid_argument for an unknown process or empty argv.
  void add(ProgramSpec spec);
  /// Kills program `name` with SIGKILL at simulated time `at` (>= now; a fault campaign's process
  /// kill, before run or from the call hook). Time passes only while every program waits, so the
  /// kill always finds it waiting for an answer: it dies in the same call in every launch.
  /// std::invalid_argument for an unknown name.
  void kill_at(const std::string& name, std::uint64_t at);
  /// Called on the driver as each llm_datadist call of a program is dispatched, before it runs,
  /// with the program's name and the call's lifecycle name ("init", "link_clusters", "register",
  /// "pull_cache", "pull_blocks", "push_cache", "push_blocks", "unlink_clusters", "finalize"; for
  /// a Python program also its other methods by name): a fault campaign's trigger, which may
  /// schedule faults from now on and call kill_at.
  using CallHook = std::function<void(const std::string& program, const std::string& call)>;
  void set_call_hook(CallHook hook) { call_hook_ = std::move(hook); }
  /// Starts the programs and serves them until all have ended (true), or none can go on, or
  /// the wall-clock limit passes (false). Their output goes to this process's stdout and
  /// stderr, each line prefixed with "[name] ", written at the barriers in rank order (so
  /// that it interleaves alike in every launch). std::runtime_error if a program cannot start.
  bool run();
  /// Each program's end, in the order added.
  std::vector<ProgramEnd> ends() const;
  /// Why run() stopped early, with who waits on what ("" after a clean run).
  std::string stall_report() const;

  struct Program;
  struct Thread;

 private:
  void start(Program& p);
  void accept_connections();
  void read_connection(Program* owner, Thread* t, int fd);
  void hello(int fd, const std::string& payload, std::string rest);
  void request(Program& p, Thread& t, wire::Request r);
  /// Gives `t` its answer now if no thread of its program runs, else queues it for its turn.
  void become_ready(Thread& t, std::string answer);
  /// Lets the next ready thread of `p` run if none does.
  void give_turn(Program& p);
  /// Answers a request that needs no simulated time at once: the thread keeps its turn.
  void answer_now(Thread& t, const std::string& payload);
  /// With a seeded schedule, whether a thread that woke another gives up its turn there (a
  /// coin of schedule_): the other threads may then run first, as on a machine.
  bool preempt();
  /// Wakes up to `n` waiters of `key` (of `p`, or of the launch for a shared key), oldest first.
  std::uint32_t wake_waiters(Program& p, std::uint64_t key, std::uint32_t n);
  /// The waiters of `key`: the program's, or the launch's for memory shared between processes.
  std::map<std::uint64_t, std::deque<Thread*>>& waiters_of(Program& p, std::uint64_t key);
  /// `t` waits or ended: the next ready thread of its program runs.
  void stop_running(Thread& t);
  /// Ends `t`'s kWait or kJoin.
  void wake_one(Thread& t);
  void drop(Program& p, Thread& t, const std::string& why);
  /// Closes a thread's connection and forgets what it had still to send.
  void hang_up(Thread& t);
  /// Ends a thread's calls: its serving job quits.
  void end_thread(Thread& t);
  /// `p` ended with that wait status (nullopt: a forked child, whose parent reaps it).
  void program_ended(Program& p, std::optional<int> wait_status);
  /// A place in the world for a child `parent` is about to fork: a program on its node.
  Program& add_child(Program& parent);
  /// The real pid of a forked child, from its parent or its own hello.
  void know_child_pid(Program& c, std::uint64_t pid);
  void kill_due_programs();
  /// A job that marks `program` for killing at `at` (kill_due_programs kills it).
  void spawn_kill(std::uint64_t at, Program* program);
  void emit_output();
  void dispatch();
  bool advance();
  void send_answers();
  void flush(Thread& t);
  bool any_program_runs() const;
  bool all_ended() const;
  void poll_once(int timeout_ms);
  void stop_everything();
  void dump_stacks();
  std::string serve(Program& p, Thread& t);
  std::string describe(const Program& p, wire::Op op, const std::string& payload) const;

  sim::SystemcPlatform& platform_;
  impl::Directory& directory_;
  Options options_;
  /// kWait's threads on keys of memory shared between processes, FIFO.
  std::map<std::uint64_t, std::deque<Thread*>> shared_waiters_;
  std::mt19937_64 schedule_;  ///< draws the next ready thread when options_.schedule_seed != 0
  ControlNet net_;
  std::string dir_;
  std::string socket_path_;
  int listen_fd_ = -1;
  std::vector<std::unique_ptr<Program>> programs_;
  struct Unknown {
    int fd;
    std::string in;
  };
  std::vector<Unknown> unknown_;  ///< connections before their hello
  int answered_ = 0;
  std::uint64_t output_instant_ = 0;  ///< the simulated time whose output lines are held
  std::string stall_;
  std::vector<std::pair<std::uint64_t, Program*>> kills_;  ///< kill_at's (time, program)
  std::vector<Program*> kills_due_;                        ///< reached, not yet done
  CallHook call_hook_;
  bool running_ = false;  ///< run() started: kill_at spawns its job at once
};

/// The signal a stalled launch sends each program still running before it ends them, asking for
/// its threads' stacks (SIGRTMIN + 7; kvsim.launched.bootstrap registers faulthandler for it).
int stack_signal();

}  // namespace kvsim::cpp
