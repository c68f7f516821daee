// The messages between a C++ program's kvsim libraries and the world that serves them: one
// request at a time, each a length-prefixed frame [u32 size][u32 op][payload], answered by
// [u32 size][u64 simulated time in ps][payload]. Little-endian fixed-width integers, strings and
// vectors length-prefixed. A frame that does not decode is a WireError: the world ends that
// program's calls and goes on.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "cpp/engine/api_types.h"

namespace kvsim::cpp::wire {

/// What a request asks for.
enum class Op : std::uint32_t {
  kHello = 1,     // token, pid, slot (i64, -1: a thread not announced) -> u8 accepted, why
  kThreadNew,     // -> i64 slot: a thread about to start (its process runs until it calls)
  kThreadCancel,  // i64 slot: the announced thread did not start
  kSleep,         // ps -> (the caller waits that long in simulated time)
  kNow,           // -> (the reply's time)
  kAcl,           // an ACL runtime call (AclOp, args)
  kDistCreate,    // cluster_id, role -> handle
  kDistDestroy,   // handle
  // The LlmDataDist calls answer their results, then why they failed ("" on success).
  kInitialize,  // handle, options -> status, why
  kFinalize,    // handle
  kSetRole,     // handle, role, options -> status, why
  kLink,        // handle, clusters, timeout -> status, rets, why
  kUnlink,      // handle, clusters, timeout, force -> status, rets, why
  kRegister,    // handle, desc, addrs -> status, cache_id, why
  kUnregister,  // handle, cache_id -> status, why
  kPullCache,   // handle, index, cache, batch_index, size, ext -> status, why
  kPullBlocks,  // handle, index, cache, src_blocks, dst_blocks, ext -> status, why
  kPushCache,   // handle, cache, index, src_batch_index, size, ext -> status, why
  kPushBlocks,  // handle, cache, index, src_blocks, dst_blocks, ext -> status, why
  kSocket,      // a control-plane TCP call (SockOp, args) -> i64 result, i32 errno, results
  // Thread synchronisation of a launched program (cpp/preload/sync_calls.cpp): a wait is keyed by
  // an address of the program, woken in FIFO order.
  kWait,  // u64 key, u8 WaitKind, i64 timeout_ps (-1: none) -> u8 woken (0: timed out)
  kWake,  // u64 key, u32 n -> u32 woken (answered at once: the caller keeps running)
  kJoin,  // i64 slot -> (when that thread of the program has ended)
  kBye,   // (no reply) the main thread's last message: the process is exiting
  // A call of a Python program's llm_datadist or kvsim module (python/kvsim/launched/): a line
  // that names the call for reports, then bytes the launcher's Python serves
  // (python/kvsim/launch/python_calls.py) -> bytes.
  kPython,
  // Child processes (cpp/preload/child_calls.cpp): a fork's child joins the world as a program
  // of its own on its parent's node.
  kFork,       // -> token, i64 launch pid: the child's place, made before the real fork
  kForked,     // token, i64 real pid (-1: the fork failed) -> (answered at once)
  kWaitChild,  // i64 real pid (-1: any), bool nohang -> i64 real pid of an ended child, 0 (none
               // yet, nohang), -1 (no such child in the world)
  kReaped,     // i64 real pid, i32 wait status -> (answered at once): the child's exit status
  kRingPipes,  // -> (answered at once): a pipe was written or closed; wake every pipe waiter
  kLast,
};

/// The ACL runtime calls of Op::kAcl (the first u32 of its payload).
enum class AclOp : std::uint32_t {
  kInit = 1,        // -> code
  kFinalize,        // -> code
  kSetDevice,       // i32 device -> code
  kResetDevice,     // i32 device -> code
  kGetDevice,       // -> code, i32 device
  kGetDeviceCount,  // -> code, u32 count
  kMalloc,          // u64 size -> code, u64 address
  kFree,            // u64 address -> code
  kWrite,           // u64 address, bytes -> code (host to device)
  kRead,            // u64 address, u64 size -> code, bytes (device to host)
  kCopy,            // u64 dst, u64 src, u64 size -> code (device to device)
  kMemset,          // u64 address, i32 value, u64 size -> code
};

/// The socket calls of Op::kSocket (the first u32 of its payload), on a socket the program knows
/// by its file descriptor. Addresses are IPv4 in host order. Blocking calls wait in simulated time.
enum class SockOp : std::uint32_t {
  kOpen = 1,  // i32 fd -> 0
  kBind,      // i32 fd, u32 ip, u16 port -> 0
  kListen,    // i32 fd, i32 backlog -> 0
  kAccept,    // i32 fd, i32 new_fd, bool nonblocking -> 0, u32 ip, u16 port
  kConnect,   // i32 fd, u32 ip, u16 port, bool nonblocking -> 0
  // A send carries its thread's happens-before stamp, a receive answers the stamps of the bytes
  // it took, joined (cpp/wire/vector_clock.h; eventfds alike).
  kSend,        // i32 fd, bytes, bool nonblocking, stamp -> bytes sent
  kRecv,        // i32 fd, u64 max, u32 flags (kPeek, kWaitAll), bool nonblocking -> n, bytes, stamp
  kShutdown,    // i32 fd, i32 how -> 0
  kClose,       // i32 fd -> 0
  kPoll,        // u64 n, n x (i32 fd, i16 events), i64 timeout_ps (-1: none) -> n ready, revents
  kSetTimeout,  // i32 fd, bool send, i64 ps (0: none) -> 0
  kName,        // i32 fd, bool peer -> 0, u32 ip, u16 port
  kTakeError,   // i32 fd -> 0, i32 pending error (SO_ERROR)
  // Descriptors between threads of one program, in the same world so that one poll waits on all.
  kPair,     // i32 fd_a, i32 fd_b -> 0: a connected stream pair without latency (socketpair)
  kEventFd,  // i32 fd, u64 initial value, bool semaphore -> 0 (eventfd)
  kDup,      // i32 fd, i32 new_fd -> 0: new_fd names the same socket (dup, dup2, dup3)
  // i32 fd -> 0: this eventfd is the program's doorbell for real pipes; Op::kRingPipes adds 1 to
  // every doorbell of the launch (a pipe may join two processes).
  kDoorbell,
  // i32 fd (ignored) -> n, n x (i32 fd, bool inet6): the process's simulated descriptors (a new
  // image after exec learns which of those it inherited are simulated).
  kList,
};

/// What a kWait waits on, for stall reports.
enum class WaitKind : std::uint8_t {
  kMutex = 1,
  kCondition,
  kSemaphore,
  kRwLock,
  kBarrier,
  kFutex
};

/// Flags of SockOp::kRecv.
inline constexpr std::uint32_t kRecvPeek = 1;
inline constexpr std::uint32_t kRecvWaitAll = 2;

/// A frame that does not decode (truncated, oversized, unknown op).
class WireError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The largest frame either side accepts (a memcpy of a big tensor travels in pieces).
inline constexpr std::uint32_t kMaxFrame = 64u << 20;

/// Appends values to a payload.
class Writer {
 public:
  Writer& u8(std::uint8_t v) { return raw(&v, 1); }
  Writer& u16(std::uint16_t v) { return le(v, 2); }
  Writer& u32(std::uint32_t v) { return le(v, 4); }
  Writer& u64(std::uint64_t v) { return le(v, 8); }
  Writer& i32(std::int32_t v) { return u32(static_cast<std::uint32_t>(v)); }
  Writer& i64(std::int64_t v) { return u64(static_cast<std::uint64_t>(v)); }
  Writer& boolean(bool v) { return u8(v ? 1 : 0); }
  Writer& bytes(const void* data, std::size_t n) {
    u64(n);
    return raw(data, n);
  }
  Writer& str(const std::string& s) { return bytes(s.data(), s.size()); }
  Writer& u64s(const std::vector<std::uint64_t>& v);
  Writer& i64s(const std::vector<std::int64_t>& v);
  Writer& u32s(const std::vector<std::uint32_t>& v);
  Writer& options(const Options& o);
  Writer& desc(const Desc& d);
  Writer& cache(const CacheRef& c);
  Writer& index(const Index& i);
  Writer& ext(const ExtParam& e);
  Writer& clusters(const std::vector<Cluster>& c);
  const std::string& data() const { return data_; }
  std::string take() { return std::move(data_); }

 private:
  Writer& raw(const void* data, std::size_t n) {
    data_.append(static_cast<const char*>(data), n);
    return *this;
  }
  Writer& le(std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) data_.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
    return *this;
  }
  std::string data_;
};

/// Reads values from a payload; WireError past its end.
class Reader {
 public:
  explicit Reader(const std::string& data) : data_(data) {}
  std::uint8_t u8() { return static_cast<std::uint8_t>(le(1)); }
  std::uint16_t u16() { return static_cast<std::uint16_t>(le(2)); }
  std::uint32_t u32() { return static_cast<std::uint32_t>(le(4)); }
  std::uint64_t u64() { return le(8); }
  std::int32_t i32() { return static_cast<std::int32_t>(u32()); }
  std::int64_t i64() { return static_cast<std::int64_t>(u64()); }
  bool boolean() { return u8() != 0; }
  std::string str();
  std::vector<std::uint64_t> u64s();
  std::vector<std::int64_t> i64s();
  std::vector<std::uint32_t> u32s();
  Options options();
  Desc desc();
  CacheRef cache();
  Index index();
  ExtParam ext();
  std::vector<Cluster> clusters();
  /// WireError unless every byte was read.
  void end() const;

 private:
  std::uint64_t le(int n);
  std::size_t count();  // a length prefix, bounded by what is left
  const std::string& data_;
  std::size_t pos_ = 0;
};

/// A request frame: [u32 size][u32 op][payload].
std::string request_frame(Op op, const std::string& payload);

/// A decoded request frame.
struct Request {
  Op op = Op::kNow;
  std::string payload;
};
/// Takes the first complete request frame off `buffer` (bytes as read from a connection):
/// nullopt until one is complete; WireError for a size or an op that no request has.
std::optional<Request> take_request(std::string& buffer);
/// A reply frame: [u32 size][u64 now_ps][payload].
std::string reply_frame(std::uint64_t now_ps, const std::string& payload);

}  // namespace kvsim::cpp::wire
