// What the shim's other calls use of its simulated descriptors (cpp/preload/socket_calls.cpp):
// TCP sockets, socketpairs and eventfds that live in the world.
#pragma once

#include <poll.h>

#include <cstdint>

namespace kvsim::cpp::preload {

/// True if `fd` is a simulated descriptor of this program.
bool emulated(int fd);
/// poll(2) over simulated and other descriptors: the others are looked at once, without waiting;
/// the simulated ones are waited for up to `timeout_ps` of simulated time (-1: no limit).
int poll_mixed(pollfd* fds, nfds_t n, std::int64_t timeout_ps);
/// A simulated descriptor was read or written (epoll's edge-triggered entries report it again).
void touched(int fd);
/// True if `fd` was read or written since the last call for it.
bool take_touched(int fd);
/// Wakes the launch's threads that wait on real descriptors (cpp/preload/socket_calls.cpp).
void ring_doorbell();
/// In a fork's child: the program's doorbell is made anew (the parent keeps its own).
void forget_doorbell();
/// The simulated host's IPv4 address, host order; 0 outside a launch (cpp/preload/name_calls.cpp).
std::uint32_t own_ipv4();
/// `fd` is closed: epoll sets forget it (cpp/preload/epoll_calls.cpp).
void forget_in_epolls(int fd);

}  // namespace kvsim::cpp::preload
