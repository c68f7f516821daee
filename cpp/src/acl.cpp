// libascendcl (also installed as libacl_rt): the ACL runtime subset on kvsim. Device calls go to
// the program's world (cpp/client/channel.h), which keeps its device memory in simulated HBM
// (cpp/engine/acl_runtime.h); host memory (aclrtMallocHost) is the program's own. Streams, events
// and contexts are handles that order nothing: every kvsim call is synchronous.
#include <cstdlib>
#include <cstring>
#include <string>

#include "acl/acl.h"
#include "cpp/client/channel.h"
#include "cpp/client/local_world.h"
#include "cpp/wire/wire.h"

namespace {

using kvsim::cpp::client::Channel;

// A program that was not launched gets the world of libkvsim_client.
const bool kLocalWorld = kvsim::cpp::client::local_world_available();
namespace wire = kvsim::cpp::wire;

// One ACL request: its code; on success its results decoded by `results`, on failure the
// world's message in aclGetRecentErrMsg. Replies are [i32 code][message][results].
template <class Results>
aclError acl_call(wire::AclOp op, const std::string& args, Results&& results) {
  const auto reply = Channel::get().call(
      wire::Op::kAcl, wire::Writer().u32(static_cast<std::uint32_t>(op)).take() + args);
  if (!reply) {
    Channel::set_recent_error("kvsim: the simulated world cannot answer");
    return ACL_ERROR_RT_INTERNAL_ERROR;
  }
  try {
    wire::Reader in(*reply);
    const aclError code = in.i32();
    const std::string message = in.str();
    if (code != ACL_SUCCESS) {
      Channel::set_recent_error(message);
      return code;
    }
    results(in);
    return code;
  } catch (const wire::WireError&) {
    Channel::set_recent_error("kvsim: a malformed answer from the simulated world");
    return ACL_ERROR_RT_INTERNAL_ERROR;
  }
}

aclError simple(wire::AclOp op, const std::string& args) {
  return acl_call(op, args, [](wire::Reader&) {});
}

struct Handle {
  int kind;
};

}  // namespace

extern "C" {

aclError aclInit(const char*) {
  return simple(wire::AclOp::kInit, {});
}

aclError aclFinalize(void) {
  return simple(wire::AclOp::kFinalize, {});
}

const char* aclGetRecentErrMsg(void) {
  return Channel::recent_error();
}

aclError aclrtSetDevice(int32_t deviceId) {
  return simple(wire::AclOp::kSetDevice, wire::Writer().i32(deviceId).take());
}

aclError aclrtResetDevice(int32_t deviceId) {
  return simple(wire::AclOp::kResetDevice, wire::Writer().i32(deviceId).take());
}

aclError aclrtGetDevice(int32_t* deviceId) {
  if (deviceId == nullptr) return ACL_ERROR_INVALID_PARAM;
  return acl_call(wire::AclOp::kGetDevice, {},
                  [deviceId](wire::Reader& in) { *deviceId = in.i32(); });
}

aclError aclrtGetDeviceCount(uint32_t* count) {
  if (count == nullptr) return ACL_ERROR_INVALID_PARAM;
  return acl_call(wire::AclOp::kGetDeviceCount, {},
                  [count](wire::Reader& in) { *count = in.u32(); });
}

aclError aclrtGetRunMode(aclrtRunMode* runMode) {
  if (runMode == nullptr) return ACL_ERROR_INVALID_PARAM;
  *runMode = ACL_HOST;
  return ACL_SUCCESS;
}

aclError aclrtCreateContext(aclrtContext* context, int32_t deviceId) {
  if (context == nullptr) return ACL_ERROR_INVALID_PARAM;
  const aclError code = aclrtSetDevice(deviceId);
  if (code == ACL_SUCCESS) *context = new Handle{1};
  return code;
}

aclError aclrtDestroyContext(aclrtContext context) {
  delete static_cast<Handle*>(context);
  return ACL_SUCCESS;
}

aclError aclrtSetCurrentContext(aclrtContext context) {
  return context == nullptr ? ACL_ERROR_INVALID_PARAM : ACL_SUCCESS;
}

aclError aclrtGetCurrentContext(aclrtContext* context) {
  if (context == nullptr) return ACL_ERROR_INVALID_PARAM;
  static Handle current{1};
  *context = &current;
  return ACL_SUCCESS;
}

aclError aclrtCreateStream(aclrtStream* stream) {
  if (stream == nullptr) return ACL_ERROR_INVALID_PARAM;
  *stream = new Handle{2};
  return ACL_SUCCESS;
}

aclError aclrtDestroyStream(aclrtStream stream) {
  delete static_cast<Handle*>(stream);
  return ACL_SUCCESS;
}

aclError aclrtSynchronizeStream(aclrtStream) {
  return ACL_SUCCESS;  // every kvsim call has completed when it returns
}

aclError aclrtCreateEvent(aclrtEvent* event) {
  if (event == nullptr) return ACL_ERROR_INVALID_PARAM;
  *event = new Handle{3};
  return ACL_SUCCESS;
}

aclError aclrtDestroyEvent(aclrtEvent event) {
  delete static_cast<Handle*>(event);
  return ACL_SUCCESS;
}

aclError aclrtRecordEvent(aclrtEvent event, aclrtStream) {
  return event == nullptr ? ACL_ERROR_INVALID_PARAM : ACL_SUCCESS;
}

aclError aclrtSynchronizeEvent(aclrtEvent event) {
  return event == nullptr ? ACL_ERROR_INVALID_PARAM : ACL_SUCCESS;
}

aclError aclrtMalloc(void** devPtr, size_t size, aclrtMemMallocPolicy) {
  if (devPtr == nullptr) return ACL_ERROR_INVALID_PARAM;
  return acl_call(wire::AclOp::kMalloc, wire::Writer().u64(size).take(),
                  [devPtr](wire::Reader& in) {
                    *devPtr = reinterpret_cast<void*>(static_cast<std::uintptr_t>(in.u64()));
                  });
}

aclError aclrtFree(void* devPtr) {
  return simple(wire::AclOp::kFree,
                wire::Writer().u64(reinterpret_cast<std::uintptr_t>(devPtr)).take());
}

aclError aclrtMallocHost(void** hostPtr, size_t size) {
  if (hostPtr == nullptr || size == 0) return ACL_ERROR_INVALID_PARAM;
  *hostPtr = std::malloc(size);
  return *hostPtr == nullptr ? ACL_ERROR_BAD_ALLOC : ACL_SUCCESS;
}

aclError aclrtFreeHost(void* hostPtr) {
  std::free(hostPtr);
  return ACL_SUCCESS;
}

aclError aclrtMemcpy(void* dst, size_t destMax, const void* src, size_t count,
                     aclrtMemcpyKind kind) {
  if (count > destMax || (count > 0 && (dst == nullptr || src == nullptr))) {
    Channel::set_recent_error("aclrtMemcpy: count exceeds destMax or a pointer is null");
    return ACL_ERROR_INVALID_PARAM;
  }
  const auto dst_addr = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(dst));
  const auto src_addr = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(src));
  constexpr std::size_t kPiece = 16u << 20;  // frames stay below wire::kMaxFrame
  switch (kind) {
    case ACL_MEMCPY_HOST_TO_HOST:
      std::memmove(dst, src, count);
      return ACL_SUCCESS;
    case ACL_MEMCPY_HOST_TO_DEVICE:
      for (std::size_t done = 0; done < count; done += kPiece) {
        const std::size_t n = std::min(kPiece, count - done);
        const aclError code =
            simple(wire::AclOp::kWrite, wire::Writer()
                                            .u64(dst_addr + done)
                                            .bytes(static_cast<const char*>(src) + done, n)
                                            .take());
        if (code != ACL_SUCCESS) return code;
      }
      return ACL_SUCCESS;
    case ACL_MEMCPY_DEVICE_TO_HOST:
      for (std::size_t done = 0; done < count; done += kPiece) {
        const std::size_t n = std::min(kPiece, count - done);
        const aclError code =
            acl_call(wire::AclOp::kRead, wire::Writer().u64(src_addr + done).u64(n).take(),
                     [dst, done, n](wire::Reader& in) {
                       const std::string bytes = in.str();
                       if (bytes.size() != n) throw wire::WireError("a read of the wrong size");
                       std::memcpy(static_cast<char*>(dst) + done, bytes.data(), n);
                     });
        if (code != ACL_SUCCESS) return code;
      }
      return ACL_SUCCESS;
    case ACL_MEMCPY_DEVICE_TO_DEVICE:
    case ACL_MEMCPY_INNER_DEVICE_TO_DEVICE:
    case ACL_MEMCPY_INTER_DEVICE_TO_DEVICE:
      return simple(wire::AclOp::kCopy,
                    wire::Writer().u64(dst_addr).u64(src_addr).u64(count).take());
    default:
      Channel::set_recent_error("aclrtMemcpy: kvsim copies host<->device and device<->device only");
      return ACL_ERROR_FEATURE_UNSUPPORTED;
  }
}

aclError aclrtMemset(void* devPtr, size_t maxCount, int32_t value, size_t count) {
  if (count > maxCount) return ACL_ERROR_INVALID_PARAM;
  return simple(wire::AclOp::kMemset,
                wire::Writer()
                    .u64(static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(devPtr)))
                    .i32(value)
                    .u64(count)
                    .take());
}

aclError aclrtMemcpyAsync(void* dst, size_t destMax, const void* src, size_t count,
                          aclrtMemcpyKind kind, aclrtStream) {
  return aclrtMemcpy(dst, destMax, src, count, kind);
}

aclError aclrtGetMemInfo(aclrtMemAttr, size_t*, size_t*) {
  Channel::set_recent_error("aclrtGetMemInfo is not simulated by kvsim");
  return ACL_ERROR_FEATURE_UNSUPPORTED;
}

}  // extern "C"
