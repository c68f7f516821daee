// The simulated hosts' TCP network, for launched programs' control sockets (the official
// samples' "unlink done" byte on port 26002/26003, an engine's own handshakes). A launched
// program's AF_INET stream sockets live here, not in the kernel: each call arrives as a
// wire::SockOp request and runs in simulated time on the job of the calling thread, so a thread
// blocked in accept, recv, connect or poll waits in simulated time like any other call.
//
// Model: a host is a node of the world at its host address (127.0.0.1 and 0.0.0.0 name the
// caller's own node). A segment takes half the platform's round trip between the two nodes'
// first devices (the time impl gives a link handshake) and is never lost; buffers are unbounded,
// so send never blocks. A refused connect costs one round trip. A process that ends closes its
// sockets: peers read end-of-file, and a later send fails with EPIPE.
//
// A program's socketpairs and eventfds live here too (segments within a pair take no time), so
// that one poll or epoll_wait of a thread waits on all of its descriptors in simulated time; a
// dup'ed descriptor names the same socket, which closes with its last name.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "cpp/wire/vector_clock.h"
#include "cpp/wire/wire.h"
#include "impl/directory.h"
#include "impl/platform.h"

namespace kvsim::cpp {

class ControlNet {
 public:
  ControlNet(impl::Platform& platform, impl::Directory& directory);
  ~ControlNet();
  ControlNet(const ControlNet&) = delete;
  ControlNet& operator=(const ControlNet&) = delete;

  /// Adds a process that may open sockets, on `node`.
  void add_process(int process, int node);
  /// Runs one SockOp request (the payload of wire::Op::kSocket) of `process`; its reply
  /// payload [i64 result][i32 errno][results]. wire::WireError if it does not decode.
  std::string handle(int process, const std::string& payload);
  /// Adds 1 to every program's doorbell (a real pipe was written or closed: its reader may be
  /// in any process of the launch).
  void ring_doorbells();
  /// `child` (a fork of `parent`) holds the parent's descriptors: each names the same socket.
  void fork_process(int parent, int child);
  /// Closes every socket of `process` (it ended).
  void end_process(int process);
  /// What a thread of `process` blocked in `payload` waits for ("accept on 10.0.0.1:26002").
  std::string describe(int process, const std::string& payload) const;

  struct Socket;

 private:
  struct Result;
  Result open(int process, int fd);
  Result bind(Socket& s, std::uint32_t ip, std::uint16_t port);
  Result listen(Socket& s);
  Result accept(Socket& s, int process, int new_fd, bool nonblocking, wire::Writer& out);
  Result connect(Socket& s, std::uint32_t ip, std::uint16_t port, bool nonblocking);
  Result send(Socket& s, const std::string& bytes, const std::string& stamp);
  Result recv(Socket& s, std::uint64_t max, std::uint32_t flags, bool nonblocking,
              wire::Writer& out);
  Result shutdown(Socket& s, int how);
  Result close(int process, int fd);
  Result poll(int process, wire::Reader& in, wire::Writer& out);
  Result pair(int process, int fd_a, int fd_b);
  Result eventfd(int process, int fd, std::uint64_t initial, bool semaphore);
  Result dup(int process, int fd, int new_fd);
  Result add_to_counter(Socket& s, const std::string& bytes, const std::string& stamp);
  Result take_counter(Socket& s, std::uint64_t max, bool nonblocking, wire::Writer& out);
  /// A segment's time from `from` to `to`: none within a socketpair.
  impl::Time delay(const Socket& from, const Socket& to) const;

  std::shared_ptr<Socket> find(int process, int fd) const;
  int node_of(int process) const;
  /// The node an address names for a caller on `from`: -1 if no simulated host has it.
  int node_named(std::uint32_t ip, int from) const;
  impl::Time one_way(int node_a, int node_b) const;
  bool port_taken(int node, std::uint32_t ip, std::uint16_t port, const Socket* except) const;
  std::uint16_t ephemeral_port(int node, std::uint32_t ip);
  /// Sends a FIN to the peer (once).
  void deliver_fin(Socket& s);
  /// Wakes the threads waiting on `s`.
  void notify(Socket& s);

  impl::Platform& platform_;
  impl::Directory& directory_;
  std::map<int, int> process_node_;
  std::map<std::pair<int, int>, std::shared_ptr<Socket>> sockets_;  ///< (process, fd)
  std::map<int, std::uint16_t> next_ephemeral_;                     ///< per node
};

}  // namespace kvsim::cpp
