// One program's ACL runtime on kvsim (acl/acl_rt.h, the subset transfer programs use): its
// current device, its device memory in the simulated HBM of world devices, and copies into, out
// of and within it. Device pointers are simulated addresses, opaque to the program as on
// hardware; the program's bytes reach them only through memcpy and memset. Host memory from
// aclrtMallocHost is the program's own and never reaches this class.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "impl/platform.h"

namespace kvsim::cpp {

class AclRuntime {
 public:
  explicit AclRuntime(impl::Platform& platform) : platform_(platform) {}
  AclRuntime(const AclRuntime&) = delete;
  AclRuntime& operator=(const AclRuntime&) = delete;

  /// aclInit: ACL_ERROR_REPEAT_INITIALIZE when already initialized.
  int init();
  /// aclFinalize: ACL_ERROR_REPEAT_FINALIZE when not initialized.
  int finalize();
  /// aclrtSetDevice: a logical device of the process (ACL_ERROR_RT_INVALID_DEVICEID otherwise).
  int set_device(std::int32_t device);
  /// aclrtResetDevice: frees nothing (kvsim keeps allocations until freed).
  int reset_device(std::int32_t device);
  /// aclrtGetDevice: ACL_ERROR_RT_CONTEXT_NULL before a set_device.
  int get_device(std::int32_t& device) const;
  /// aclrtGetDeviceCount: the process's visible devices.
  int device_count(std::uint32_t& count) const;
  /// aclrtMalloc on the current device: 2 MiB aligned (huge pages); ACL_ERROR_INVALID_PARAM for
  /// 0 bytes, ACL_ERROR_RT_MEMORY_ALLOCATION when the HBM is full.
  int malloc(std::uint64_t size, std::uint64_t& addr);
  /// aclrtFree: ACL_ERROR_INVALID_PARAM for an address malloc did not return.
  int free(std::uint64_t addr);
  /// Host to device (aclrtMemcpy H2D): the bytes land at once.
  int write(std::uint64_t addr, const std::string& bytes);
  /// Device to host (aclrtMemcpy D2H).
  int read(std::uint64_t addr, std::uint64_t size, std::string& out) const;
  /// Device to device (aclrtMemcpy D2D): one DMA batch of the current device, in simulated time.
  int copy(std::uint64_t dst, std::uint64_t src, std::uint64_t size);
  /// aclrtMemset: `size` bytes of `value` (as the runtime, value's low byte).
  int memset(std::uint64_t addr, std::int32_t value, std::uint64_t size);
  /// What the last failed call said (aclGetRecentErrMsg).
  const std::string& last_error() const { return last_error_; }

 private:
  int fail(int code, std::string message);
  bool device_memory(std::uint64_t addr, std::uint64_t size) const;

  impl::Platform& platform_;
  bool initialized_ = false;
  std::int32_t device_ = -1;                            ///< logical id, -1: none set
  std::map<std::uint64_t, std::uint64_t> allocations_;  ///< address -> size
  std::string last_error_;
};

}  // namespace kvsim::cpp
