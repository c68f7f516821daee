// What the example programs share: argument parsing, status reporting, option and link helpers,
// device tensors filled with a recognisable pattern and checked against it, and the one-byte TCP
// control channel the paired processes use to tell each other a step is done.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "acl/acl.h"
#include "llm_datadist/llm_datadist.h"

// Prints where `cond` failed and returns false from the enclosing bool function.
#define EXAMPLE_CHECK(cond)                                                        \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      std::printf("[ERROR] %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      return false;                                                                \
    }                                                                              \
  } while (0)

namespace example {

using llm_datadist::AscendString;
using llm_datadist::Cache;
using llm_datadist::CacheDesc;
using llm_datadist::CacheIndex;
using llm_datadist::ClusterInfo;
using llm_datadist::DataType;
using llm_datadist::IpInfo;
using llm_datadist::KvCacheExtParam;
using llm_datadist::LLM_SUCCESS;
using llm_datadist::LlmDataDist;
using llm_datadist::LlmRole;
using llm_datadist::Status;

using Options = std::map<AscendString, AscendString>;

// ---- command line ------------------------------------------------------------------------------

struct Args {
  std::string device_id;
  std::string local_ip;
  std::string remote_ip;
  std::string transfer_backend;
  std::string local_comm_res;
};

// What a program accepts after argv[0]: device_id local_ip, then remote_ip if `takes_remote`, then
// [transfer_backend [local_comm_res]] if `takes_backend`. `usage` is printed on a mismatch.
inline bool ParseArgs(int argc, char** argv, bool takes_remote, bool takes_backend,
                      const char* usage, Args& args) {
  const int fixed = takes_remote ? 3 : 2;
  const int most = fixed + (takes_backend ? 2 : 0);
  const int given = argc - 1;
  if (given < fixed || given > most) {
    if (fixed == most) {
      std::printf("[ERROR] expected %d arguments, got %d; usage: %s\n", fixed, given, usage);
    } else {
      std::printf("[ERROR] expected %d to %d arguments, got %d; usage: %s\n", fixed, most, given,
                  usage);
    }
    return false;
  }
  int next = 1;
  args.device_id = argv[next++];
  args.local_ip = argv[next++];
  if (takes_remote) args.remote_ip = argv[next++];
  if (next < argc) args.transfer_backend = argv[next++];
  if (next < argc) args.local_comm_res = argv[next++];
  if (!args.transfer_backend.empty() && args.transfer_backend != "hixl") {
    std::printf("[ERROR] unsupported transfer_backend: %s (only \"hixl\")\n",
                args.transfer_backend.c_str());
    return false;
  }
  std::printf("[INFO] device_id = %s, local_ip = %s%s%s\n", args.device_id.c_str(),
              args.local_ip.c_str(), takes_remote ? ", remote_ip = " : "", args.remote_ip.c_str());
  if (!args.transfer_backend.empty()) {
    std::printf("[INFO] transfer_backend = %s\n", args.transfer_backend.c_str());
  }
  if (!args.local_comm_res.empty()) {
    std::printf("[INFO] local_comm_res = %s\n", args.local_comm_res.c_str());
  }
  return true;
}

// ---- status reporting --------------------------------------------------------------------------

inline const char* RecentError() {
  const char* message = aclGetRecentErrMsg();
  return message == nullptr ? "no error" : message;
}

inline bool LlmOk(Status ret, const char* what) {
  if (ret == LLM_SUCCESS) {
    std::printf("[INFO] %s success\n", what);
    return true;
  }
  std::printf("[ERROR] %s failed, ret = 0x%X, errmsg: %s\n", what, static_cast<unsigned>(ret),
              RecentError());
  return false;
}

inline bool AclOk(aclError ret, const char* what) {
  if (ret == ACL_SUCCESS) return true;
  std::printf("[ERROR] %s failed, aclError = %d, errmsg: %s\n", what, ret, RecentError());
  return false;
}

// ---- options and peers -------------------------------------------------------------------------

inline std::string Endpoint(const std::string& ip, uint16_t port) {
  return ip + ":" + std::to_string(port);
}

// Initialize options: the device, a listen address unless `listen_port` is 0 (a pure client), and
// the optional backend and communication resources from the command line.
inline Options InitOptions(const Args& args, uint16_t listen_port) {
  Options options;
  options[llm_datadist::OPTION_DEVICE_ID] = args.device_id.c_str();
  if (listen_port != 0) {
    options[llm_datadist::OPTION_LISTEN_IP_INFO] = Endpoint(args.local_ip, listen_port).c_str();
  }
  if (!args.transfer_backend.empty()) {
    options[llm_datadist::OPTION_TRANSFER_BACKEND] = args.transfer_backend.c_str();
  }
  if (!args.local_comm_res.empty()) {
    options[llm_datadist::OPTION_LOCAL_COMM_RES] = args.local_comm_res.c_str();
  }
  return options;
}

inline IpInfo MakeIpInfo(const std::string& ip, uint16_t port) {
  IpInfo info{};
  info.ip = ip.c_str();
  info.port = port;
  return info;
}

// A peer for LinkLlmClusters/UnlinkLlmClusters; an empty `local_ip` leaves local_ip_infos empty.
inline ClusterInfo MakePeer(uint64_t remote_cluster_id, const std::string& local_ip,
                            uint16_t local_port, const std::string& remote_ip,
                            uint16_t remote_port) {
  ClusterInfo peer{};
  peer.remote_cluster_id = remote_cluster_id;
  if (!local_ip.empty()) peer.local_ip_infos.push_back(MakeIpInfo(local_ip, local_port));
  peer.remote_ip_infos.push_back(MakeIpInfo(remote_ip, remote_port));
  return peer;
}

inline void PrintRets(const std::vector<Status>& rets) {
  for (size_t i = 0; i < rets.size(); ++i) {
    std::printf("[INFO]   cluster[%zu] ret = 0x%X\n", i, static_cast<unsigned>(rets[i]));
  }
}

inline bool LinkPeer(LlmDataDist& dist, const ClusterInfo& peer, int32_t timeout_ms) {
  std::vector<Status> rets;
  const bool ok = LlmOk(dist.LinkLlmClusters({peer}, rets, timeout_ms), "LinkLlmClusters");
  if (!ok) PrintRets(rets);
  return ok;
}

inline bool UnlinkPeer(LlmDataDist& dist, const ClusterInfo& peer, int32_t timeout_ms, bool force) {
  std::vector<Status> rets;
  const bool ok = LlmOk(dist.UnlinkLlmClusters({peer}, rets, timeout_ms, force),
                        force ? "UnlinkLlmClusters(force)" : "UnlinkLlmClusters");
  if (!ok) PrintRets(rets);
  return ok;
}

// ---- device tensors with a known pattern -------------------------------------------------------

// Content of 32-bit word `word` of row `row` of tensor `tensor` as written by the side identified
// by `seed`: every field is visible in hex, so a stale, misplaced or foreign row cannot pass.
inline uint32_t PatternWord(uint32_t seed, uint32_t tensor, uint32_t row, uint32_t word) {
  return ((seed & 0xFFu) << 24) | ((tensor & 0xFFu) << 16) | ((row & 0xFFu) << 8) | (word & 0xFFu);
}

// Equal-sized device tensors of `rows` rows (batches or blocks: shape[0]) of `row_bytes` each.
// Freed only by Free(): programs release memory where their original does.
class DeviceTensors {
 public:
  DeviceTensors(uint32_t count, uint32_t rows, size_t row_bytes)
      : count_(count), rows_(rows), row_bytes_(row_bytes) {}
  DeviceTensors(const DeviceTensors&) = delete;
  DeviceTensors& operator=(const DeviceTensors&) = delete;

  uint32_t count() const { return count_; }
  uint32_t rows() const { return rows_; }
  size_t row_bytes() const { return row_bytes_; }
  size_t tensor_bytes() const { return rows_ * row_bytes_; }
  size_t row_words() const { return row_bytes_ / sizeof(uint32_t); }
  void* tensor(uint32_t index) const { return buffers_[index]; }

  std::vector<uint64_t> addrs() const {
    std::vector<uint64_t> out;
    for (void* buffer : buffers_) out.push_back(reinterpret_cast<uint64_t>(buffer));
    return out;
  }

  bool Allocate() {
    EXAMPLE_CHECK(row_bytes_ % sizeof(uint32_t) == 0);
    for (uint32_t t = 0; t < count_; ++t) {
      void* buffer = nullptr;
      EXAMPLE_CHECK(
          AclOk(aclrtMalloc(&buffer, tensor_bytes(), ACL_MEM_MALLOC_HUGE_ONLY), "aclrtMalloc"));
      buffers_.push_back(buffer);
    }
    return true;
  }

  // Writes PatternWord(seed, t, row, word) into every tensor t.
  bool Fill(uint32_t seed) const {
    std::vector<uint32_t> host(tensor_bytes() / sizeof(uint32_t));
    for (uint32_t t = 0; t < count_; ++t) {
      for (uint32_t r = 0; r < rows_; ++r) {
        for (size_t w = 0; w < row_words(); ++w) {
          host[r * row_words() + w] = PatternWord(seed, t, r, static_cast<uint32_t>(w));
        }
      }
      EXAMPLE_CHECK(AclOk(aclrtMemcpy(buffers_[t], tensor_bytes(), host.data(), tensor_bytes(),
                                      ACL_MEMCPY_HOST_TO_DEVICE),
                          "aclrtMemcpy(HOST_TO_DEVICE)"));
    }
    return true;
  }

  bool Read(uint32_t index, std::vector<uint32_t>& host) const {
    host.assign(tensor_bytes() / sizeof(uint32_t), 0);
    return AclOk(aclrtMemcpy(host.data(), tensor_bytes(), buffers_[index], tensor_bytes(),
                             ACL_MEMCPY_DEVICE_TO_HOST),
                 "aclrtMemcpy(DEVICE_TO_HOST)");
  }

  void Free() {
    for (void* buffer : buffers_) (void)AclOk(aclrtFree(buffer), "aclrtFree");
    buffers_.clear();
  }

 private:
  uint32_t count_;
  uint32_t rows_;
  size_t row_bytes_;
  std::vector<void*> buffers_;
};

// Which pattern row each local row should hold: its own (seed, tensor, row) until a transfer
// lands in it, then the row the transfer copied.
class ExpectedContent {
 public:
  struct Source {
    uint32_t seed;
    uint32_t tensor;
    uint32_t row;
    bool transferred;
  };

  ExpectedContent(uint32_t own_seed, uint32_t tensors, uint32_t rows) : rows_(rows) {
    for (uint32_t t = 0; t < tensors; ++t) {
      for (uint32_t r = 0; r < rows; ++r) sources_.push_back({own_seed, t, r, false});
    }
  }

  void Transfer(uint32_t dst_tensor, uint32_t dst_row, uint32_t seed, uint32_t src_tensor,
                uint32_t src_row) {
    sources_[dst_tensor * rows_ + dst_row] = {seed, src_tensor, src_row, true};
  }

  const Source& at(uint32_t tensor, uint32_t row) const { return sources_[tensor * rows_ + row]; }

 private:
  uint32_t rows_;
  std::vector<Source> sources_;
};

// Reads every tensor back and compares every word with `expected`; reports the first bad word of
// the first mismatching rows and, on success, how many transferred and untouched bytes matched.
inline bool VerifyTensors(const DeviceTensors& tensors, const ExpectedContent& expected,
                          const char* stage) {
  constexpr int kMaxReports = 8;
  int bad_rows = 0;
  size_t transferred_bytes = 0;
  size_t untouched_bytes = 0;
  std::vector<uint32_t> host;
  for (uint32_t t = 0; t < tensors.count(); ++t) {
    EXAMPLE_CHECK(tensors.Read(t, host));
    for (uint32_t r = 0; r < tensors.rows(); ++r) {
      const ExpectedContent::Source& src = expected.at(t, r);
      const uint32_t* row = host.data() + r * tensors.row_words();
      size_t w = 0;
      while (w < tensors.row_words() &&
             row[w] == PatternWord(src.seed, src.tensor, src.row, static_cast<uint32_t>(w))) {
        ++w;
      }
      if (w == tensors.row_words()) {
        (src.transferred ? transferred_bytes : untouched_bytes) += tensors.row_bytes();
      } else if (++bad_rows <= kMaxReports) {
        std::printf(
            "[ERROR] %s: tensor %u row %u word %zu = 0x%08X, expected 0x%08X "
            "(%s row: seed 0x%02X tensor %u row %u)\n",
            stage, t, r, w, row[w],
            PatternWord(src.seed, src.tensor, src.row, static_cast<uint32_t>(w)),
            src.transferred ? "transferred" : "untouched", src.seed, src.tensor, src.row);
      }
    }
  }
  if (bad_rows > 0) {
    std::printf("[ERROR] %s: %d of %u rows differ\n", stage, bad_rows,
                tensors.count() * tensors.rows());
    return false;
  }
  std::printf("[INFO] %s: verified %zu bytes (%zu transferred, %zu untouched)\n", stage,
              transferred_bytes + untouched_bytes, transferred_bytes, untouched_bytes);
  return true;
}

// ---- registration ------------------------------------------------------------------------------

inline bool RegisterCache(LlmDataDist& dist, const std::vector<uint64_t>& addrs, DataType dtype,
                          const std::vector<int64_t>& shape, int64_t& cache_id) {
  CacheDesc desc{};
  desc.num_tensors = static_cast<uint32_t>(addrs.size());
  desc.data_type = dtype;
  desc.shape = shape;
  EXAMPLE_CHECK(LlmOk(dist.RegisterKvCache(desc, addrs, {}, cache_id), "RegisterKvCache"));
  std::printf("[INFO] cache_id = %lld, %zu tensor(s) from %p\n", static_cast<long long>(cache_id),
              addrs.size(), reinterpret_cast<void*>(addrs.front()));
  return true;
}

inline void UnregisterCache(LlmDataDist& dist, int64_t cache_id) {
  if (cache_id > 0) (void)LlmOk(dist.UnregisterKvCache(cache_id), "UnregisterKvCache");
}

// ---- one-byte TCP control channel --------------------------------------------------------------

inline void CloseFd(int fd) {
  if (fd >= 0) (void)close(fd);
}

// A listening socket on ip:port that accepts one connection and reads one byte from it.
class ControlListener {
 public:
  ControlListener() = default;
  ControlListener(const ControlListener&) = delete;
  ControlListener& operator=(const ControlListener&) = delete;
  ~ControlListener() { CloseFd(fd_); }

  bool Open(const std::string& ip, uint16_t port) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    EXAMPLE_CHECK(inet_pton(AF_INET, ip.c_str(), &addr.sin_addr) == 1);
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    EXAMPLE_CHECK(fd_ >= 0);
    const int reuse = 1;
    (void)setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &reuse, sizeof(reuse));
    if (bind(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0 ||
        listen(fd_, 1) != 0) {
      std::printf("[ERROR] control listener on %s failed, errno = %d\n", Endpoint(ip, port).c_str(),
                  errno);
      return false;
    }
    std::printf("[INFO] control listener on %s\n", Endpoint(ip, port).c_str());
    return true;
  }

  // Waits up to `timeout_sec` for a peer, then requires its one byte to be `expected`.
  bool WaitFor(char expected, int timeout_sec) {
    EXAMPLE_CHECK(fd_ >= 0);
    fd_set readable;
    FD_ZERO(&readable);
    FD_SET(fd_, &readable);
    timeval timeout{};
    timeout.tv_sec = timeout_sec;
    const int ready = select(fd_ + 1, &readable, nullptr, nullptr, &timeout);
    if (ready <= 0) {
      std::printf("[ERROR] no control message within %d s (%s)\n", timeout_sec,
                  ready == 0 ? "timeout" : "select failed");
      return false;
    }
    const int conn = accept(fd_, nullptr, nullptr);
    EXAMPLE_CHECK(conn >= 0);
    char message = 0;
    ssize_t got = -1;
    do {
      got = recv(conn, &message, sizeof(message), 0);
    } while (got < 0 && errno == EINTR);
    CloseFd(conn);
    CloseFd(fd_);
    fd_ = -1;
    if (got != 1 || message != expected) {
      std::printf("[ERROR] control message: got %zd byte(s) '%c', expected '%c'\n", got,
                  got == 1 ? message : '?', expected);
      return false;
    }
    std::printf("[INFO] control message '%c' received\n", message);
    return true;
  }

 private:
  int fd_ = -1;
};

// Opens a listener on ip:port and waits there for one byte.
inline bool WaitForMessage(const std::string& ip, uint16_t port, char expected, int timeout_sec) {
  ControlListener listener;
  return listener.Open(ip, port) && listener.WaitFor(expected, timeout_sec);
}

// Connects to ip:port, retrying every `interval_us` up to `attempts` times while the peer is not
// listening yet, and sends one byte.
inline bool SendMessage(const std::string& ip, uint16_t port, char message, int attempts = 600,
                        useconds_t interval_us = 100000U) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  EXAMPLE_CHECK(inet_pton(AF_INET, ip.c_str(), &addr.sin_addr) == 1);
  for (int attempt = 0; attempt < attempts; ++attempt) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    EXAMPLE_CHECK(fd >= 0);
    if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0) {
      const ssize_t sent = send(fd, &message, sizeof(message), 0);
      CloseFd(fd);
      if (sent != 1) {
        std::printf("[ERROR] sending control message to %s failed\n", Endpoint(ip, port).c_str());
        return false;
      }
      std::printf("[INFO] control message '%c' sent to %s\n", message, Endpoint(ip, port).c_str());
      return true;
    }
    CloseFd(fd);
    usleep(interval_us);
  }
  std::printf("[ERROR] %s did not accept the control message after %d attempts\n",
              Endpoint(ip, port).c_str(), attempts);
  return false;
}

}  // namespace example
