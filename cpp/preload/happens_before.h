// Happens-before clocks of a launched program's threads, for the API rule checker
// (python/kvsim/launch/rules.py): a vector clock per thread, joined along what orders the
// program's threads and processes. The shim adds the edges it sees itself: a thread's start
// (pthread_create), its end (pthread_join), and bytes over the world's sockets and eventfds
// (a send carries its thread's stamp, a receive joins the stamps of the bytes it takes). A
// Python program adds the edges of its threading, queue and concurrent.futures objects through
// the C functions below (python/kvsim/launched/happens_before.py). Locks are not edges: the
// checker treats a lock held across both calls as ordering them, so that a verdict does not
// depend on which thread took a lock first. Touches only the calling thread's clock and the
// clocks stored under keys.
#pragma once

#include <cstdint>
#include <string>

namespace kvsim::cpp::preload::hb {

/// The calling thread's id in every clock.
std::uint32_t thread_id();
/// In a fork's child (its only thread): threads get ids of the child's launch pid from now on.
void become_child(std::uint32_t launch_pid);
/// The calling thread's stamp for a release (a send, a thread start): its clock, after which
/// its own count moves on, so that later events of the thread are not ordered before the
/// receiver.
std::string release_stamp();
/// Joins a stamp (from release_stamp, through the world) into the calling thread's clock.
void absorb(const std::string& stamp);
/// Joins the calling thread's clock into the clock kept under `key`, then moves on.
void release(std::uint64_t key);
/// Joins the clock kept under `key` (if any) into the calling thread's clock.
void acquire(std::uint64_t key);

}  // namespace kvsim::cpp::preload::hb
