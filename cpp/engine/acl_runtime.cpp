#include "cpp/engine/acl_runtime.h"

#include <algorithm>
#include <vector>

#include "acl/acl_base.h"
#include "impl/copy_executor.h"

namespace kvsim::cpp {

namespace {

constexpr std::uint64_t kHugePage = 2ull << 20;  // aclrtMalloc's huge pages

}  // namespace

int AclRuntime::fail(int code, std::string message) {
  last_error_ = std::move(message);
  return code;
}

int AclRuntime::init() {
  if (initialized_) return fail(ACL_ERROR_REPEAT_INITIALIZE, "aclInit: already initialized");
  initialized_ = true;
  return ACL_SUCCESS;
}

int AclRuntime::finalize() {
  if (!initialized_) return fail(ACL_ERROR_REPEAT_FINALIZE, "aclFinalize: not initialized");
  initialized_ = false;
  return ACL_SUCCESS;
}

int AclRuntime::set_device(std::int32_t device) {
  if (platform_.resolve_device(device) < 0) {
    return fail(ACL_ERROR_RT_INVALID_DEVICEID,
                "aclrtSetDevice: device " + std::to_string(device) + " is not visible here");
  }
  device_ = device;
  return ACL_SUCCESS;
}

int AclRuntime::reset_device(std::int32_t device) {
  if (platform_.resolve_device(device) < 0) {
    return fail(ACL_ERROR_RT_INVALID_DEVICEID,
                "aclrtResetDevice: device " + std::to_string(device) + " is not visible here");
  }
  if (device_ == device) device_ = -1;
  return ACL_SUCCESS;
}

int AclRuntime::get_device(std::int32_t& device) const {
  if (device_ < 0) return ACL_ERROR_RT_CONTEXT_NULL;
  device = device_;
  return ACL_SUCCESS;
}

int AclRuntime::device_count(std::uint32_t& count) const {
  count = 0;
  while (platform_.resolve_device(static_cast<int>(count)) >= 0) ++count;
  return ACL_SUCCESS;
}

int AclRuntime::malloc(std::uint64_t size, std::uint64_t& addr) {
  if (size == 0) return fail(ACL_ERROR_INVALID_PARAM, "aclrtMalloc: size is 0");
  if (device_ < 0) return fail(ACL_ERROR_RT_CONTEXT_NULL, "aclrtMalloc: no device is set");
  const auto got = platform_.allocate(platform_.resolve_device(device_), impl::Placement::DEVICE,
                                      size, kHugePage);
  if (!got) {
    return fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "aclrtMalloc: " + std::to_string(size) +
                                                    " bytes do not fit device " +
                                                    std::to_string(device_));
  }
  addr = *got;
  allocations_[addr] = size;
  return ACL_SUCCESS;
}

int AclRuntime::free(std::uint64_t addr) {
  const auto it = allocations_.find(addr);
  if (it == allocations_.end()) {
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtFree: not an address aclrtMalloc returned");
  }
  platform_.free(addr);
  allocations_.erase(it);
  return ACL_SUCCESS;
}

bool AclRuntime::device_memory(std::uint64_t addr, std::uint64_t size) const {
  const auto where = platform_.locate(addr, size);
  return where && where->placement == impl::Placement::DEVICE;
}

int AclRuntime::write(std::uint64_t addr, const std::string& bytes) {
  if (!device_memory(addr, bytes.size())) {
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtMemcpy: the destination is not device memory");
  }
  platform_.write(addr, reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  return ACL_SUCCESS;
}

int AclRuntime::read(std::uint64_t addr, std::uint64_t size, std::string& out) const {
  if (!device_memory(addr, size)) return ACL_ERROR_INVALID_PARAM;
  out.assign(size, '\0');
  platform_.read(addr, reinterpret_cast<std::uint8_t*>(out.data()), size);
  return ACL_SUCCESS;
}

int AclRuntime::copy(std::uint64_t dst, std::uint64_t src, std::uint64_t size) {
  if (!device_memory(src, size) || !device_memory(dst, size)) {
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtMemcpy: an address is not device memory");
  }
  const int device =
      device_ >= 0 ? platform_.resolve_device(device_) : platform_.locate(src, size)->device;
  const impl::CopyRun run = impl::run_copies(platform_, device, {{src, dst, size}}, impl::kForever,
                                             impl::LLMStatusCode::LLM_FAILED);
  if (run.status != impl::LLMStatusCode::LLM_SUCCESS) {
    return fail(ACL_ERROR_RT_PARAM_INVALID, "aclrtMemcpy: " + run.error);
  }
  return ACL_SUCCESS;
}

int AclRuntime::memset(std::uint64_t addr, std::int32_t value, std::uint64_t size) {
  if (!device_memory(addr, size)) {
    return fail(ACL_ERROR_INVALID_PARAM, "aclrtMemset: not device memory");
  }
  constexpr std::uint64_t kPiece = 1ull << 20;  // bounded memory for large buffers
  const std::vector<std::uint8_t> bytes(std::min(size, kPiece),
                                        static_cast<std::uint8_t>(value & 0xFF));
  for (std::uint64_t done = 0; done < size; done += kPiece) {
    platform_.write(addr + done, bytes.data(), std::min(kPiece, size - done));
  }
  return ACL_SUCCESS;
}

}  // namespace kvsim::cpp
