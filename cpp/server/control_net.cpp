#include "cpp/server/control_net.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <deque>
#include <vector>

#include "impl/data_dist_core.h"
#include "impl/types.h"

namespace kvsim::cpp {

using impl::Time;
using wire::Reader;
using wire::SockOp;
using wire::Writer;

namespace {

constexpr std::uint32_t kAny = 0;

// A sender's stamp; one that does not decode orders nothing (a program's bug, not the world's).
wire::VectorClock decode_stamp(const std::string& stamp) {
  try {
    return wire::VectorClock::decode(stamp);
  } catch (const wire::WireError&) {
    return {};
  }
}
constexpr std::uint16_t kFirstEphemeral = 32768;  // Linux's ip_local_port_range

bool loopback(std::uint32_t ip) {
  return (ip >> 24) == 127;
}

std::string dotted(std::uint32_t ip) {
  return std::to_string(ip >> 24) + "." + std::to_string((ip >> 16) & 0xFF) + "." +
         std::to_string((ip >> 8) & 0xFF) + "." + std::to_string(ip & 0xFF);
}

std::uint32_t parse(const std::string& ip) {
  std::uint32_t out = 0;
  std::size_t pos = 0;
  for (int i = 0; i < 4; ++i) {
    const std::size_t dot = ip.find('.', pos);
    out = (out << 8) | static_cast<std::uint32_t>(std::stoul(ip.substr(pos, dot - pos)) & 0xFF);
    pos = dot + 1;
  }
  return out;
}

std::string endpoint(std::uint32_t ip, std::uint16_t port) {
  return dotted(ip) + ":" + std::to_string(port);
}

}  // namespace

struct ControlNet::Result {
  std::int64_t value = 0;
  std::int32_t error = 0;
  static Result ok(std::int64_t v = 0) { return {v, 0}; }
  static Result fail(int e) { return {-1, e}; }
};

struct ControlNet::Socket : std::enable_shared_from_this<ControlNet::Socket> {
  // kEventFd: an eventfd's counter, not a stream.
  enum class State { kFresh, kListening, kConnecting, kConnected, kClosed, kEventFd };
  struct Segment {
    Time arrival = 0;
    std::string data;  ///< empty for a FIN
    bool fin = false;
    std::string stamp;  ///< the sender's happens-before clock (cpp/wire/vector_clock.h)
  };

  int process = 0;
  int fd = -1;
  int node = 0;
  State state = State::kFresh;
  bool bound = false;  ///< holds its local port (bind, listen, connect); accepted ones do not
  std::uint32_t local_ip = 0;
  std::uint16_t local_port = 0;
  std::uint32_t peer_ip = 0;
  std::uint16_t peer_port = 0;
  std::deque<std::pair<Time, std::shared_ptr<Socket>>> backlog;  ///< SYN arrival, server side
  std::weak_ptr<Socket> remote;
  std::deque<Segment> inbox;
  std::size_t consumed = 0;  ///< bytes of inbox.front() already read
  Time established = 0;      ///< a connecting socket's outcome is known then
  int connect_error = 0;     ///< ...and is this (0: connected)
  int pending_error = 0;     ///< SO_ERROR
  bool write_shut = false;
  Time recv_timeout = 0;      ///< SO_RCVTIMEO (0: none)
  bool local = false;         ///< one end of a socketpair: segments arrive at once
  int names = 1;              ///< descriptors naming it (dup): closed with the last
  std::uint64_t counter = 0;  ///< an eventfd's value
  bool semaphore = false;     ///< EFD_SEMAPHORE: a read takes 1
  wire::VectorClock written;  ///< an eventfd's writers' clocks, joined
  bool doorbell = false;      ///< a program's doorbell for real pipes (SockOp::kDoorbell)
  std::vector<impl::Signal*> waiters;

  /// A connecting socket whose outcome is due becomes connected (or fresh, with its error).
  void settle(Time now) {
    if (state != State::kConnecting || now < established) return;
    if (connect_error == 0) {
      state = State::kConnected;
    } else {
      state = State::kFresh;
      pending_error = connect_error;
    }
  }
  bool readable(Time now) const { return !inbox.empty() && inbox.front().arrival <= now; }
};

ControlNet::ControlNet(impl::Platform& platform, impl::Directory& directory)
    : platform_(platform), directory_(directory) {}

ControlNet::~ControlNet() = default;

void ControlNet::add_process(int process, int node) {
  process_node_[process] = node;
}

int ControlNet::node_of(int process) const {
  const auto it = process_node_.find(process);
  return it == process_node_.end() ? 0 : it->second;
}

int ControlNet::node_named(std::uint32_t ip, int from) const {
  if (ip == kAny || loopback(ip)) return from;
  return platform_.node_by_host_ip(dotted(ip));
}

Time ControlNet::one_way(int node_a, int node_b) const {
  auto first_device = [this](int node) {
    for (int d = 0; d < platform_.device_count(); ++d) {
      if (platform_.node_of(d) == node) return d;
    }
    return 0;
  };
  return platform_.round_trip(first_device(node_a), first_device(node_b)) / 2;
}

Time ControlNet::delay(const Socket& from, const Socket& to) const {
  return from.local ? 0 : one_way(from.node, to.node);
}

std::shared_ptr<ControlNet::Socket> ControlNet::find(int process, int fd) const {
  const auto it = sockets_.find({process, fd});
  return it == sockets_.end() ? nullptr : it->second;
}

bool ControlNet::port_taken(int node, std::uint32_t ip, std::uint16_t port,
                            const Socket* except) const {
  for (const auto& [key, s] : sockets_) {
    if (s.get() == except || !s->bound || s->node != node || s->local_port != port) continue;
    if (s->local_ip == ip || s->local_ip == kAny || ip == kAny) return true;
  }
  // An llm_datadist listener of the node holds its port too (LLMLinkManager binds it).
  for (const auto& [id, core] : directory_.members()) {
    const auto& listen = core->options().listen_ip_info;
    if (!listen || core->node() != node || listen->port != port) continue;
    const std::uint32_t held = parse(impl::int_to_ip(listen->ip));
    if (held == ip || held == kAny || ip == kAny) return true;
  }
  return false;
}

std::uint16_t ControlNet::ephemeral_port(int node, std::uint32_t ip) {
  std::uint16_t& next = next_ephemeral_.try_emplace(node, kFirstEphemeral).first->second;
  while (port_taken(node, ip, next, nullptr)) ++next;
  return next++;
}

void ControlNet::notify(Socket& s) {
  for (impl::Signal* w : s.waiters) w->set();
}

void ControlNet::deliver_fin(Socket& s) {
  if (s.write_shut) return;
  s.write_shut = true;
  if (const auto remote = s.remote.lock()) {
    remote->inbox.push_back({platform_.now() + delay(s, *remote), {}, true, {}});
    notify(*remote);
  }
}

namespace {

// Waits until `until` or until one of `sockets` changes.
void wait_for_change(impl::Platform& platform,
                     const std::vector<std::shared_ptr<ControlNet::Socket>>& sockets, Time until) {
  const std::unique_ptr<impl::Signal> signal = platform.make_signal();
  for (const auto& s : sockets) s->waiters.push_back(signal.get());
  const Time now = platform.now();
  (void)signal->wait_for(until == impl::kForever ? impl::kForever : until - now);
  for (const auto& s : sockets) {
    s->waiters.erase(std::remove(s->waiters.begin(), s->waiters.end(), signal.get()),
                     s->waiters.end());
  }
}

}  // namespace

ControlNet::Result ControlNet::open(int process, int fd) {
  auto s = std::make_shared<Socket>();
  s->process = process;
  s->fd = fd;
  s->node = node_of(process);
  sockets_[{process, fd}] = s;  // a stale entry under a reused fd is forgotten
  return Result::ok();
}

ControlNet::Result ControlNet::bind(Socket& s, std::uint32_t ip, std::uint16_t port) {
  if (s.bound || s.state != Socket::State::kFresh) return Result::fail(EINVAL);
  const std::uint32_t host = parse(platform_.host_ip(s.node));
  if (ip != kAny && !loopback(ip) && ip != host) return Result::fail(EADDRNOTAVAIL);
  if (port == 0) port = ephemeral_port(s.node, ip);
  if (port_taken(s.node, ip, port, &s)) return Result::fail(EADDRINUSE);
  s.bound = true;
  s.local_ip = ip;
  s.local_port = port;
  return Result::ok();
}

ControlNet::Result ControlNet::listen(Socket& s) {
  if (s.state == Socket::State::kListening) return Result::ok();
  if (s.state != Socket::State::kFresh) return Result::fail(EINVAL);
  if (!s.bound) {
    s.bound = true;
    s.local_ip = kAny;
    s.local_port = ephemeral_port(s.node, kAny);
  }
  s.state = Socket::State::kListening;
  return Result::ok();
}

ControlNet::Result ControlNet::accept(Socket& s, int process, int new_fd, bool nonblocking,
                                      Writer& out) {
  if (s.state != Socket::State::kListening) return Result::fail(EINVAL);
  const Time deadline = s.recv_timeout == 0 ? impl::kForever : platform_.now() + s.recv_timeout;
  auto self = s.shared_from_this();
  for (;;) {
    const Time now = platform_.now();
    if (s.state != Socket::State::kListening) return Result::fail(EBADF);  // closed meanwhile
    if (!s.backlog.empty() && s.backlog.front().first <= now) {
      std::shared_ptr<Socket> c = s.backlog.front().second;
      s.backlog.pop_front();
      c->process = process;
      c->fd = new_fd;
      sockets_[{process, new_fd}] = c;
      out.u32(c->peer_ip).u16(c->peer_port);
      return Result::ok();
    }
    if (nonblocking) return Result::fail(EAGAIN);
    if (now >= deadline) return Result::fail(EAGAIN);
    const Time next = s.backlog.empty() ? deadline : std::min(deadline, s.backlog.front().first);
    wait_for_change(platform_, {self}, next);
  }
}

ControlNet::Result ControlNet::connect(Socket& s, std::uint32_t ip, std::uint16_t port,
                                       bool nonblocking) {
  const Time now = platform_.now();
  s.settle(now);
  if (s.state == Socket::State::kConnected) return Result::fail(EISCONN);
  if (s.state == Socket::State::kConnecting) return Result::fail(EALREADY);
  if (s.state != Socket::State::kFresh) return Result::fail(EINVAL);
  const int target = node_named(ip, s.node);
  if (target < 0) return Result::fail(ENETUNREACH);  // no simulated host has that address
  if (!s.bound) {
    s.local_ip = loopback(ip) ? ip : parse(platform_.host_ip(s.node));
    s.local_port = ephemeral_port(s.node, s.local_ip);
    s.bound = true;
  }
  const Time there = one_way(s.node, target);
  std::shared_ptr<Socket> listener;
  for (const auto& [key, l] : sockets_) {
    if (l->state != Socket::State::kListening || l->node != target || l->local_port != port) {
      continue;
    }
    if (l->local_ip == kAny || l->local_ip == ip || (loopback(ip) && loopback(l->local_ip))) {
      listener = l;
      break;
    }
  }
  s.state = Socket::State::kConnecting;
  s.established = now + 2 * there;
  s.peer_ip = ip;
  s.peer_port = port;
  if (!listener) {
    s.connect_error = ECONNREFUSED;
  } else {
    s.connect_error = 0;
    auto accepted = std::make_shared<Socket>();
    accepted->process = listener->process;
    accepted->node = target;
    accepted->state = Socket::State::kConnected;
    accepted->local_ip = ip;
    accepted->local_port = port;
    accepted->peer_ip = s.local_ip;
    accepted->peer_port = s.local_port;
    accepted->remote = s.shared_from_this();
    s.remote = accepted;
    listener->backlog.emplace_back(now + there, accepted);
    notify(*listener);
  }
  if (nonblocking) return Result::fail(EINPROGRESS);
  platform_.sleep(2 * there);
  s.settle(platform_.now());
  if (s.state == Socket::State::kConnected) return Result::ok();
  s.pending_error = 0;
  return Result::fail(s.connect_error);
}

ControlNet::Result ControlNet::send(Socket& s, const std::string& bytes, const std::string& stamp) {
  if (s.state == Socket::State::kEventFd) return add_to_counter(s, bytes, stamp);
  s.settle(platform_.now());
  if (s.state != Socket::State::kConnected) {
    return Result::fail(s.state == Socket::State::kConnecting ? EAGAIN : ENOTCONN);
  }
  const auto remote = s.remote.lock();
  if (s.write_shut || !remote || remote->state == Socket::State::kClosed) {
    return Result::fail(EPIPE);
  }
  if (bytes.empty()) return Result::ok();
  remote->inbox.push_back({platform_.now() + delay(s, *remote), bytes, false, stamp});
  notify(*remote);
  return Result::ok(static_cast<std::int64_t>(bytes.size()));
}

ControlNet::Result ControlNet::recv(Socket& s, std::uint64_t max, std::uint32_t flags,
                                    bool nonblocking, Writer& out) {
  if (s.state == Socket::State::kEventFd) return take_counter(s, max, nonblocking, out);
  s.settle(platform_.now());
  if (s.state != Socket::State::kConnected) return Result::fail(ENOTCONN);
  const bool peek = (flags & wire::kRecvPeek) != 0;
  const bool wait_all = (flags & wire::kRecvWaitAll) != 0 && !peek;
  const Time deadline = s.recv_timeout == 0 ? impl::kForever : platform_.now() + s.recv_timeout;
  auto self = s.shared_from_this();
  std::string got;
  wire::VectorClock senders;  // the clocks of the segments `got` takes bytes from
  for (;;) {
    const Time now = platform_.now();
    if (s.state == Socket::State::kClosed) return Result::fail(EBADF);
    // What has arrived, in order, up to max bytes or a FIN; nothing is consumed yet.
    got.clear();
    senders = wire::VectorClock();
    bool eof = false;
    Time next = deadline;
    std::size_t offset = s.consumed;
    for (const Socket::Segment& seg : s.inbox) {
      if (seg.arrival > now) {
        next = std::min(next, seg.arrival);
        break;
      }
      if (seg.fin) {
        eof = true;
        break;
      }
      if (got.size() == max) break;
      if (!seg.stamp.empty()) senders.join(decode_stamp(seg.stamp));
      got.append(seg.data, offset,
                 std::min<std::size_t>(seg.data.size() - offset, max - got.size()));
      offset = 0;
    }
    const bool enough = !got.empty() && (!wait_all || got.size() == max || eof);
    if (enough || (got.empty() && (eof || max == 0))) break;
    if (nonblocking || now >= deadline) {
      if (got.empty()) return Result::fail(EAGAIN);
      break;
    }
    wait_for_change(platform_, {self}, next);
  }
  if (!peek) {
    std::size_t left = got.size();
    while (left > 0) {
      Socket::Segment& front = s.inbox.front();
      const std::size_t n = std::min(left, front.data.size() - s.consumed);
      s.consumed += n;
      left -= n;
      if (s.consumed == front.data.size()) {
        s.inbox.pop_front();
        s.consumed = 0;
      }
    }
  }
  out.str(got).str(senders.encode());
  return Result::ok(static_cast<std::int64_t>(got.size()));
}

ControlNet::Result ControlNet::shutdown(Socket& s, int how) {
  s.settle(platform_.now());
  if (s.state != Socket::State::kConnected) return Result::fail(ENOTCONN);
  if (how == SHUT_WR || how == SHUT_RDWR) deliver_fin(s);
  return Result::ok();
}

ControlNet::Result ControlNet::close(int process, int fd) {
  const auto s = find(process, fd);
  if (!s) return Result::fail(EBADF);
  if (--s->names > 0) {  // another descriptor still names it
    sockets_.erase({process, fd});
    return Result::ok();
  }
  if (s->state == Socket::State::kConnected || s->state == Socket::State::kConnecting) {
    deliver_fin(*s);
  }
  for (auto& [when, pending] : s->backlog) {  // connections never accepted are reset
    deliver_fin(*pending);
    pending->state = Socket::State::kClosed;
  }
  s->backlog.clear();
  s->state = Socket::State::kClosed;
  s->bound = false;
  sockets_.erase({process, fd});
  notify(*s);
  return Result::ok();
}

// eventfd(2): a write adds its 8-byte value; a read takes the counter (or 1 in semaphore mode),
// waiting while it is 0.
ControlNet::Result ControlNet::add_to_counter(Socket& s, const std::string& bytes,
                                              const std::string& stamp) {
  if (bytes.size() != 8) return Result::fail(EINVAL);
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) {
    v |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]))
         << (8 * i);
  }
  constexpr std::uint64_t kMax = ~std::uint64_t{0} - 1;  // the counter's largest value
  if (v == ~std::uint64_t{0}) return Result::fail(EINVAL);
  if (v > kMax - s.counter) return Result::fail(EAGAIN);  // a blocking writer would wait
  s.counter += v;
  if (!stamp.empty()) s.written.join(decode_stamp(stamp));
  notify(s);
  return Result::ok(8);
}

ControlNet::Result ControlNet::take_counter(Socket& s, std::uint64_t max, bool nonblocking,
                                            Writer& out) {
  if (max < 8) return Result::fail(EINVAL);
  auto self = s.shared_from_this();
  while (s.counter == 0) {
    if (nonblocking) return Result::fail(EAGAIN);
    wait_for_change(platform_, {self}, impl::kForever);
    if (s.state != Socket::State::kEventFd) return Result::fail(EBADF);  // closed meanwhile
  }
  const std::uint64_t v = s.semaphore ? 1 : s.counter;
  s.counter -= v;
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[static_cast<std::size_t>(i)] = static_cast<char>(v >> (8 * i));
  out.str(bytes).str(s.written.encode());
  return Result::ok(8);
}

ControlNet::Result ControlNet::pair(int process, int fd_a, int fd_b) {
  if (fd_a == fd_b) return Result::fail(EINVAL);
  auto a = std::make_shared<Socket>();
  auto b = std::make_shared<Socket>();
  for (const auto& [s, fd] : {std::pair{a, fd_a}, std::pair{b, fd_b}}) {
    s->process = process;
    s->fd = fd;
    s->node = node_of(process);
    s->state = Socket::State::kConnected;
    s->local = true;
    sockets_[{process, fd}] = s;
  }
  a->remote = b;
  b->remote = a;
  return Result::ok();
}

ControlNet::Result ControlNet::eventfd(int process, int fd, std::uint64_t initial, bool semaphore) {
  auto s = std::make_shared<Socket>();
  s->process = process;
  s->fd = fd;
  s->node = node_of(process);
  s->state = Socket::State::kEventFd;
  s->counter = initial;
  s->semaphore = semaphore;
  sockets_[{process, fd}] = s;
  return Result::ok();
}

ControlNet::Result ControlNet::dup(int process, int fd, int new_fd) {
  const auto s = find(process, fd);
  if (!s) return Result::fail(EBADF);
  if (new_fd == fd) return Result::ok();
  if (find(process, new_fd)) (void)close(process, new_fd);
  ++s->names;
  sockets_[{process, new_fd}] = s;
  return Result::ok();
}

ControlNet::Result ControlNet::poll(int process, Reader& in, Writer& out) {
  const std::uint64_t n = in.u64();
  if (n > 65536) throw wire::WireError("poll: too many descriptors");
  std::vector<std::pair<int, short>> fds;
  for (std::uint64_t i = 0; i < n; ++i) {
    const int fd = in.i32();
    const auto events = static_cast<short>(in.u16());
    fds.emplace_back(fd, events);
  }
  const std::int64_t timeout = in.i64();
  in.end();
  const Time start = platform_.now();
  const Time deadline = timeout < 0 ? impl::kForever : start + static_cast<Time>(timeout);
  for (;;) {
    const Time now = platform_.now();
    std::vector<short> revents(fds.size(), 0);
    std::vector<std::shared_ptr<Socket>> watched;
    Time next = deadline;
    std::int64_t ready = 0;
    for (std::size_t i = 0; i < fds.size(); ++i) {
      const auto s = find(process, fds[i].first);
      short r = 0;
      if (!s) {
        r = POLLNVAL;
      } else {
        s->settle(now);
        watched.push_back(s);
        switch (s->state) {
          case Socket::State::kListening:
            if (!s->backlog.empty() && s->backlog.front().first <= now) r |= POLLIN;
            if (!s->backlog.empty() && s->backlog.front().first > now) {
              next = std::min(next, s->backlog.front().first);
            }
            break;
          case Socket::State::kConnecting:
            next = std::min(next, s->established);
            break;
          case Socket::State::kFresh:
            r |= POLLOUT | POLLHUP;
            if (s->pending_error != 0) r |= POLLERR;
            break;
          case Socket::State::kConnected:
            if (s->readable(now)) {
              r |= POLLIN;
              if (s->inbox.front().fin) r |= POLLRDHUP;
            } else {
              for (const auto& seg : s->inbox) {
                next = std::min(next, seg.arrival);
                break;
              }
            }
            if (!s->write_shut) r |= POLLOUT;
            break;
          case Socket::State::kClosed:
            r = POLLNVAL;
            break;
          case Socket::State::kEventFd:
            if (s->counter > 0) r |= POLLIN;
            r |= POLLOUT;
            break;
        }
        r &= static_cast<short>(fds[i].second | POLLERR | POLLHUP | POLLNVAL);
      }
      revents[i] = r;
      if (r != 0) ++ready;
    }
    if (ready > 0 || now >= deadline) {
      out.u64(revents.size());
      for (short r : revents) out.u16(static_cast<std::uint16_t>(r));
      return Result::ok(ready);
    }
    wait_for_change(platform_, watched, next);
  }
}

std::string ControlNet::handle(int process, const std::string& payload) {
  Reader in(payload);
  Writer out;
  Result r;
  const auto op = static_cast<SockOp>(in.u32());
  if (op == SockOp::kPoll) {
    r = poll(process, in, out);
  } else {
    const int fd = in.i32();
    if (op == SockOp::kOpen) {
      in.end();
      r = open(process, fd);
    } else if (op == SockOp::kClose) {
      in.end();
      r = close(process, fd);
    } else if (op == SockOp::kPair) {
      const int other = in.i32();
      in.end();
      r = pair(process, fd, other);
    } else if (op == SockOp::kEventFd) {
      const std::uint64_t initial = in.u64();
      const bool semaphore = in.boolean();
      in.end();
      r = eventfd(process, fd, initial, semaphore);
    } else if (op == SockOp::kDup) {
      const int new_fd = in.i32();
      in.end();
      r = dup(process, fd, new_fd);
    } else if (op == SockOp::kList) {
      in.end();
      std::vector<int> mine;
      for (const auto& [key, sock] : sockets_) {
        if (key.first == process) mine.push_back(key.second);
      }
      out.u64(mine.size());
      for (int f : mine) out.i32(f);
    } else if (op == SockOp::kDoorbell) {
      in.end();
      const auto s = find(process, fd);
      if (s && s->state == Socket::State::kEventFd) {
        s->doorbell = true;
      } else {
        r = Result::fail(EBADF);
      }
    } else {
      const auto s = find(process, fd);
      switch (op) {
        case SockOp::kBind: {
          const std::uint32_t ip = in.u32();
          const std::uint16_t port = in.u16();
          in.end();
          r = s ? bind(*s, ip, port) : Result::fail(EBADF);
          break;
        }
        case SockOp::kListen:
          (void)in.i32();
          in.end();
          r = s ? listen(*s) : Result::fail(EBADF);
          break;
        case SockOp::kAccept: {
          const int new_fd = in.i32();
          const bool nonblocking = in.boolean();
          in.end();
          r = s ? accept(*s, process, new_fd, nonblocking, out) : Result::fail(EBADF);
          break;
        }
        case SockOp::kConnect: {
          const std::uint32_t ip = in.u32();
          const std::uint16_t port = in.u16();
          const bool nonblocking = in.boolean();
          in.end();
          r = s ? connect(*s, ip, port, nonblocking) : Result::fail(EBADF);
          break;
        }
        case SockOp::kSend: {
          const std::string bytes = in.str();
          (void)in.boolean();  // sends never block: buffers are unbounded
          const std::string stamp = in.str();
          in.end();
          r = s ? send(*s, bytes, stamp) : Result::fail(EBADF);
          break;
        }
        case SockOp::kRecv: {
          const std::uint64_t max = in.u64();
          const std::uint32_t flags = in.u32();
          const bool nonblocking = in.boolean();
          in.end();
          if (max > wire::kMaxFrame) throw wire::WireError("recv: larger than a frame");
          r = s ? recv(*s, max, flags, nonblocking, out) : Result::fail(EBADF);
          break;
        }
        case SockOp::kShutdown: {
          const int how = in.i32();
          in.end();
          r = s ? shutdown(*s, how) : Result::fail(EBADF);
          break;
        }
        case SockOp::kSetTimeout: {
          const bool for_send = in.boolean();
          const std::int64_t ps = in.i64();
          in.end();
          if (!s) {
            r = Result::fail(EBADF);
          } else {
            if (!for_send) s->recv_timeout = ps > 0 ? static_cast<Time>(ps) : 0;
            r = Result::ok();
          }
          break;
        }
        case SockOp::kName: {
          const bool peer = in.boolean();
          in.end();
          if (!s) {
            r = Result::fail(EBADF);
          } else if (peer) {
            s->settle(platform_.now());
            r = s->state == Socket::State::kConnected ? Result::ok() : Result::fail(ENOTCONN);
            out.u32(s->peer_ip).u16(s->peer_port);
          } else {
            out.u32(s->local_ip).u16(s->local_port);
          }
          break;
        }
        case SockOp::kTakeError: {
          in.end();
          if (!s) {
            r = Result::fail(EBADF);
          } else {
            s->settle(platform_.now());
            out.i32(s->pending_error);
            s->pending_error = 0;
          }
          break;
        }
        default:
          throw wire::WireError("unknown socket call " +
                                std::to_string(static_cast<std::uint32_t>(op)));
      }
    }
  }
  Writer reply;
  reply.i64(r.value).i32(r.error);
  return reply.take() + out.take();
}

void ControlNet::ring_doorbells() {
  for (const auto& [key, s] : sockets_) {
    if (!s->doorbell) continue;
    ++s->counter;
    notify(*s);
  }
}

void ControlNet::fork_process(int parent, int child) {
  std::vector<std::pair<int, std::shared_ptr<Socket>>> inherited;
  for (const auto& [key, s] : sockets_) {
    if (key.first == parent) inherited.emplace_back(key.second, s);
  }
  for (auto& [fd, s] : inherited) {  // the child's descriptors name the parent's sockets
    ++s->names;
    sockets_[{child, fd}] = s;
  }
}

void ControlNet::end_process(int process) {
  std::vector<int> fds;
  for (const auto& [key, s] : sockets_) {
    if (key.first == process) fds.push_back(key.second);
  }
  for (int fd : fds) (void)close(process, fd);
}

std::string ControlNet::describe(int process, const std::string& payload) const {
  try {
    Reader in(payload);
    const auto op = static_cast<SockOp>(in.u32());
    if (op == SockOp::kPoll) return "poll on " + std::to_string(in.u64()) + " socket(s)";
    const auto s = find(process, in.i32());
    const std::string local = s ? endpoint(s->local_ip, s->local_port) : "a closed socket";
    const std::string peer = s ? endpoint(s->peer_ip, s->peer_port) : "a closed socket";
    switch (op) {
      case SockOp::kAccept:
        return "accept on " + local;
      case SockOp::kConnect:
        return "connect to " + endpoint(in.u32(), in.u16());
      case SockOp::kRecv:
        return "recv from " + peer;
      default:
        return "a socket call";
    }
  } catch (const wire::WireError&) {
    return "a socket call";
  }
}

}  // namespace kvsim::cpp
