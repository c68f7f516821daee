#include "sim/point_runs.h"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <stdexcept>

#include "sim/child_frames.h"
#include "sim/result_codec.h"
#include "sim/world.h"

namespace kvsim::sim {
namespace {

void write_all(int fd, const char* data, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return;  // the parent is gone: nobody to tell
    }
    data += w;
    n -= static_cast<std::size_t>(w);
  }
}

void send(int fd, char tag, const std::string& body) {
  const std::string frame = encode_frame(tag, body);
  write_all(fd, frame.data(), frame.size());
}

// Runs in the forked child: simulates the point and sends its result back; never returns.
[[noreturn]] void child_main(const Scenario& scenario, const PointRunOptions& options, int fd) {
  std::signal(SIGINT, SIG_DFL);
  int code = 2;
  try {
    World::forget_inherited();
    RunOptions run;
    run.trace = options.trace;
    if (options.request_progress) {
      run.progress = [fd](std::size_t done, std::size_t total) {
        const std::uint64_t v[2] = {done, total};
        send(fd, kFrameProgress, std::string(reinterpret_cast<const char*>(v), sizeof v));
      };
    }
    const RunResult result = run_scenario(scenario, run);
    send(fd, kFrameResult, encode_result(result));
    code = result_status(result);
  } catch (const std::exception& e) {
    send(fd, kFrameError, e.what());
  } catch (...) {
    send(fd, kFrameError, "unknown error");
  }
  ::close(fd);
  _exit(code);
}

struct Child {
  std::size_t point = 0;
  int fd = -1;
  FrameReader inbox;
  std::string payload;
  bool has_result = false;
};

class Pool {
 public:
  Pool(std::vector<PointOutcome>& out, const PointRunOptions& o) : out_(out), o_(o) {}
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;
  ~Pool() {
    for (auto& [pid, c] : running_) {
      ::kill(pid, SIGKILL);
      ::close(c.fd);
      reap(pid);
    }
  }

  void run() {
    const std::size_t n = out_.size();
    std::size_t next = 0, done = 0;
    const std::size_t jobs = static_cast<std::size_t>(o_.jobs > 0 ? o_.jobs : 1);
    if (o_.progress) o_.progress(0, n);
    while (done < n) {
      // A signal that came while this loop was not in poll() (reading a child, writing a point)
      // interrupted no wait: it is seen here, at the latest when the next child ends.
      if (o_.interrupted) o_.interrupted();
      while (next < n && running_.size() < jobs) start(next++);
      std::vector<pollfd> fds;
      std::vector<pid_t> pids;
      for (const auto& [pid, c] : running_) {
        fds.push_back({c.fd, POLLIN, 0});
        pids.push_back(pid);
      }
      if (::poll(fds.data(), fds.size(), -1) < 0) {
        if (errno != EINTR)
          throw std::runtime_error("poll failed: " + std::string(strerror(errno)));
        if (o_.interrupted) o_.interrupted();
        continue;
      }
      for (std::size_t i = 0; i < fds.size(); ++i) {
        if (fds[i].revents == 0) continue;
        if (!drain(pids[i])) {
          const std::size_t point = finish(pids[i]);
          if (o_.on_point) o_.on_point(point, out_[point]);
          ++done;
          if (o_.progress) o_.progress(done, n);
        }
      }
    }
  }

 private:
  void start(std::size_t point) {
    int p[2];
    if (::pipe(p) != 0) throw std::runtime_error("pipe failed: " + std::string(strerror(errno)));
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) {
      ::close(p[0]);
      ::close(p[1]);
      throw std::runtime_error("fork failed: " + std::string(strerror(errno)));
    }
    if (pid == 0) {
      ::close(p[0]);
      child_main(out_[point].scenario, o_, p[1]);
    }
    ::close(p[1]);
    Child c;
    c.point = point;
    c.fd = p[0];
    running_.emplace(pid, std::move(c));
  }

  // Reads what the child sent; false at end of file (the child has ended).
  bool drain(pid_t pid) {
    Child& c = running_.at(pid);
    char buf[1 << 16];
    const ssize_t r = ::read(c.fd, buf, sizeof buf);
    if (r < 0) return errno == EINTR || errno == EAGAIN;
    if (r == 0) return false;
    c.inbox.feed(buf, static_cast<std::size_t>(r));
    try {
      while (std::optional<ChildFrame> f = c.inbox.next()) {
        if (f->tag == kFrameProgress && f->body.size() == 16 && o_.request_progress) {
          std::uint64_t v[2];
          std::memcpy(v, f->body.data(), sizeof v);
          o_.request_progress(c.point, v[0], v[1]);
        } else if (f->tag == kFrameResult) {
          c.payload = std::move(f->body);
          c.has_result = true;
        } else if (f->tag == kFrameError) {
          out_[c.point].error = std::move(f->body);
        }
      }
    } catch (const std::runtime_error& e) {
      out_[c.point].error = e.what();
      c.has_result = false;
      return false;  // ends the point: finish() reaps the child
    }
    return true;
  }

  static int reap(pid_t pid) {
    int st = 0;
    while (::waitpid(pid, &st, 0) < 0) {
      if (errno != EINTR) return 2;
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 2;
  }

  std::size_t finish(pid_t pid) {
    Child c = std::move(running_.at(pid));
    running_.erase(pid);
    ::close(c.fd);
    PointOutcome& o = out_[c.point];
    o.exit_code = reap(pid);
    if (c.has_result) {
      o.result = decode_result(c.payload, o.scenario);
    } else {
      o.exit_code = 2;
      if (o.error.empty()) o.error = "the simulation process ended without a result";
    }
    return c.point;
  }

  std::vector<PointOutcome>& out_;
  const PointRunOptions& o_;
  std::map<pid_t, Child> running_;
};

}  // namespace

Scenario ScenarioSource::load(const std::vector<ScenarioOverride>& overrides) const {
  if (!path.empty()) return load_scenario(path, overrides);
  return parse_scenario(text, origin, overrides, base_dir);
}

std::vector<PointOutcome> run_points(const ScenarioSource& source,
                                     const std::vector<std::vector<ScenarioOverride>>& points,
                                     const PointRunOptions& options) {
  std::vector<PointOutcome> out(points.size());
  for (std::size_t i = 0; i < points.size(); ++i) {
    out[i].overrides = points[i];
    out[i].scenario = source.load(points[i]);
  }
  Pool pool(out, options);
  pool.run();
  return out;
}

int result_status(const RunResult& result) {
  for (const RequestResult& r : result.requests) {
    if (!r.ok || (r.checked && !r.verified)) return 1;
  }
  return 0;
}

}  // namespace kvsim::sim
