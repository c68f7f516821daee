#include "cpp/server/session.h"

#include "acl/acl_base.h"
#include "impl/status.h"

namespace kvsim::cpp {

namespace {

using wire::Op;
using wire::Reader;
using wire::Writer;

const Status kFailed = static_cast<Status>(impl::to_int(impl::LLMStatusCode::LLM_FAILED));
const char* const kNoInstance = "kvsim: the LlmDataDist could not be made in the world";

}  // namespace

Session::Session(impl::Platform& platform, impl::Directory& directory)
    : platform_(platform), directory_(directory), acl_(platform) {}

Session::~Session() = default;

void Session::end(const std::string& why) {
  for (auto& [handle, engine] : engines_) engine->abandon(why);
  engines_.clear();
}

DataDistEngine* Session::engine(std::uint64_t handle) {
  const auto it = engines_.find(handle);
  return it == engines_.end() ? nullptr : it->second.get();
}

std::string Session::acl(Reader& in) {
  Writer out;
  const auto op = static_cast<wire::AclOp>(in.u32());
  int code = ACL_SUCCESS;
  switch (op) {
    case wire::AclOp::kInit:
      in.end();
      code = acl_.init();
      break;
    case wire::AclOp::kFinalize:
      in.end();
      code = acl_.finalize();
      break;
    case wire::AclOp::kSetDevice: {
      const std::int32_t device = in.i32();
      in.end();
      code = acl_.set_device(device);
      break;
    }
    case wire::AclOp::kResetDevice: {
      const std::int32_t device = in.i32();
      in.end();
      code = acl_.reset_device(device);
      break;
    }
    case wire::AclOp::kGetDevice: {
      in.end();
      std::int32_t device = -1;
      code = acl_.get_device(device);
      out.i32(device);
      break;
    }
    case wire::AclOp::kGetDeviceCount: {
      in.end();
      std::uint32_t count = 0;
      code = acl_.device_count(count);
      out.u32(count);
      break;
    }
    case wire::AclOp::kMalloc: {
      const std::uint64_t size = in.u64();
      in.end();
      std::uint64_t addr = 0;
      code = acl_.malloc(size, addr);
      out.u64(addr);
      break;
    }
    case wire::AclOp::kFree: {
      const std::uint64_t addr = in.u64();
      in.end();
      code = acl_.free(addr);
      break;
    }
    case wire::AclOp::kWrite: {
      const std::uint64_t addr = in.u64();
      const std::string bytes = in.str();
      in.end();
      code = acl_.write(addr, bytes);
      break;
    }
    case wire::AclOp::kRead: {
      const std::uint64_t addr = in.u64();
      const std::uint64_t size = in.u64();
      in.end();
      if (size > wire::kMaxFrame) throw wire::WireError("a read larger than a frame");
      std::string bytes;
      code = acl_.read(addr, size, bytes);
      out.str(bytes);
      break;
    }
    case wire::AclOp::kCopy: {
      const std::uint64_t dst = in.u64();
      const std::uint64_t src = in.u64();
      const std::uint64_t size = in.u64();
      in.end();
      code = acl_.copy(dst, src, size);
      break;
    }
    case wire::AclOp::kMemset: {
      const std::uint64_t addr = in.u64();
      const std::int32_t value = in.i32();
      const std::uint64_t size = in.u64();
      in.end();
      code = acl_.memset(addr, value, size);
      break;
    }
    default:
      throw wire::WireError("unknown ACL call " + std::to_string(static_cast<std::uint32_t>(op)));
  }
  // [code][message][results]: the message first, so the caller finds it whatever the call.
  Writer reply;
  reply.i32(code).str(code == ACL_SUCCESS ? std::string() : acl_.last_error());
  return reply.take() + out.take();
}

std::string Session::handle(Op op, const std::string& payload) {
  Reader in(payload);
  Writer out;
  switch (op) {
    case Op::kSleep: {
      const std::uint64_t ps = in.u64();
      in.end();
      if (ps > 0) platform_.sleep(ps);
      break;
    }
    case Op::kNow:
      in.end();
      break;
    case Op::kAcl:
      return acl(in);
    case Op::kDistCreate: {
      const std::uint64_t cluster_id = in.u64();
      const std::int32_t role = in.i32();
      in.end();
      const std::uint64_t handle = next_handle_++;
      engines_[handle] = std::make_unique<DataDistEngine>(platform_, directory_, cluster_id, role);
      out.u64(handle);
      break;
    }
    case Op::kDistDestroy: {
      const std::uint64_t handle = in.u64();
      in.end();
      if (DataDistEngine* e = engine(handle)) e->finalize();
      engines_.erase(handle);
      break;
    }
    case Op::kFinalize: {
      const std::uint64_t handle = in.u64();
      in.end();
      if (DataDistEngine* e = engine(handle)) e->finalize();
      break;
    }
    default: {
      const std::uint64_t handle = in.u64();
      DataDistEngine* e = engine(handle);
      switch (op) {
        case Op::kInitialize: {
          const Options options = in.options();
          in.end();
          const Status status = e ? e->initialize(options) : kFailed;
          // LLMDataDistV2::DoInnerInitialize (hixl src/llm_datadist/llm_datadist_v2.cc) calls
          // aclrtSetDevice(device_id) on the caller's thread: the official samples' aclrtMalloc
          // that follows needs no aclrtSetDevice of its own.
          if (status == 0 && e != nullptr) (void)acl_.set_device(e->device_id());
          out.u32(status).str(e ? e->last_error() : kNoInstance);
          break;
        }
        case Op::kSetRole: {
          const std::int32_t role = in.i32();
          const Options options = in.options();
          in.end();
          out.u32(e ? e->set_role(role, options) : kFailed).str(e ? e->last_error() : kNoInstance);
          break;
        }
        case Op::kLink:
        case Op::kUnlink: {
          const std::vector<Cluster> clusters = in.clusters();
          const std::int32_t timeout = in.i32();
          const bool force = op == Op::kUnlink ? in.boolean() : false;
          in.end();
          std::vector<Status> rets;
          Status s = kFailed;
          if (e) {
            s = op == Op::kLink ? e->link(clusters, rets, timeout)
                                : e->unlink(clusters, rets, timeout, force);
          }
          out.u32(s).u32s(rets).str(e ? e->last_error() : kNoInstance);
          break;
        }
        case Op::kRegister: {
          const Desc desc = in.desc();
          const std::vector<std::uint64_t> addrs = in.u64s();
          in.end();
          std::int64_t cache_id = -1;
          out.u32(e ? e->register_kv_cache(desc, addrs, cache_id) : kFailed)
              .i64(cache_id)
              .str(e ? e->last_error() : kNoInstance);
          break;
        }
        case Op::kUnregister: {
          const std::int64_t cache_id = in.i64();
          in.end();
          out.u32(e ? e->unregister_kv_cache(cache_id) : kFailed)
              .str(e ? e->last_error() : kNoInstance);
          break;
        }
        case Op::kPullCache: {
          const Index index = in.index();
          const CacheRef cache = in.cache();
          const std::uint32_t batch = in.u32();
          const std::int64_t size = in.i64();
          const ExtParam ext = in.ext();
          in.end();
          out.u32(e ? e->pull_kv_cache(index, cache, batch, size, ext) : kFailed)
              .str(e ? e->last_error() : kNoInstance);
          break;
        }
        case Op::kPullBlocks: {
          const Index index = in.index();
          const CacheRef cache = in.cache();
          const std::vector<std::uint64_t> src = in.u64s();
          const std::vector<std::uint64_t> dst = in.u64s();
          const ExtParam ext = in.ext();
          in.end();
          out.u32(e ? e->pull_kv_blocks(index, cache, src, dst, ext) : kFailed)
              .str(e ? e->last_error() : kNoInstance);
          break;
        }
        case Op::kPushCache: {
          const CacheRef cache = in.cache();
          const Index index = in.index();
          const std::uint32_t batch = in.u32();
          const std::int64_t size = in.i64();
          const ExtParam ext = in.ext();
          in.end();
          out.u32(e ? e->push_kv_cache(cache, index, batch, size, ext) : kFailed)
              .str(e ? e->last_error() : kNoInstance);
          break;
        }
        case Op::kPushBlocks: {
          const CacheRef cache = in.cache();
          const Index index = in.index();
          const std::vector<std::uint64_t> src = in.u64s();
          const std::vector<std::uint64_t> dst = in.u64s();
          const ExtParam ext = in.ext();
          in.end();
          out.u32(e ? e->push_kv_blocks(cache, index, src, dst, ext) : kFailed)
              .str(e ? e->last_error() : kNoInstance);
          break;
        }
        default:
          throw wire::WireError("unknown request " +
                                std::to_string(static_cast<std::uint32_t>(op)));
      }
    }
  }
  return out.take();
}

}  // namespace kvsim::cpp
