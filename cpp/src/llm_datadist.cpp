// libllm_datadist: llm_datadist::LlmDataDist on kvsim. Each method packs its arguments, sends them
// to the world (cpp/client/channel.h) and returns the Status the engine (cpp/engine/) decided;
// nothing here decides an outcome beyond what the public header fixes.
#include "llm_datadist/llm_datadist.h"

#include "cpp/client/channel.h"
#include "cpp/client/local_world.h"
#include "cpp/wire/wire.h"

namespace llm_datadist {

namespace {

using kvsim::cpp::client::Channel;

// A program that was not launched gets the world of libkvsim_client.
const bool kLocalWorld = kvsim::cpp::client::local_world_available();
namespace wire = kvsim::cpp::wire;

kvsim::cpp::Options to_options(const std::map<AscendString, AscendString>& options) {
  kvsim::cpp::Options out;
  for (const auto& [key, value] : options) {
    out[std::string(key.GetString(), key.GetLength())] =
        std::string(value.GetString(), value.GetLength());
  }
  return out;
}

kvsim::cpp::Desc to_desc(const CacheDesc& d) {
  kvsim::cpp::Desc out;
  out.placement = static_cast<std::uint32_t>(d.placement);
  out.num_tensors = d.num_tensors;
  out.data_type = static_cast<std::int32_t>(d.data_type);
  out.shape = d.shape;
  return out;
}

kvsim::cpp::CacheRef to_cache(const Cache& c) {
  kvsim::cpp::CacheRef out;
  out.cache_id = c.cache_id;
  for (uintptr_t a : c.tensor_addrs) out.tensor_addrs.push_back(static_cast<std::uint64_t>(a));
  out.desc = to_desc(c.cache_desc);
  return out;
}

kvsim::cpp::Index to_index(const CacheIndex& i) {
  return {i.cluster_id, i.cache_id, i.batch_index};
}

kvsim::cpp::ExtParam to_ext(const KvCacheExtParam& e) {
  return {e.src_layer_range.first, e.src_layer_range.second, e.dst_layer_range.first,
          e.dst_layer_range.second, e.tensor_num_per_layer};
}

std::vector<kvsim::cpp::Cluster> to_clusters(const std::vector<ClusterInfo>& clusters) {
  std::vector<kvsim::cpp::Cluster> out;
  for (const ClusterInfo& c : clusters) {
    kvsim::cpp::Cluster cluster;
    cluster.remote_cluster_id = c.remote_cluster_id;
    cluster.remote_role_type = c.remote_role_type;
    for (const IpInfo& a : c.local_ip_infos) {
      cluster.local.push_back({std::string(a.ip.GetString(), a.ip.GetLength()), a.port});
    }
    for (const IpInfo& a : c.remote_ip_infos) {
      cluster.remote.push_back({std::string(a.ip.GetString(), a.ip.GetLength()), a.port});
    }
    out.push_back(std::move(cluster));
  }
  return out;
}

// Decodes a reply with `decode`; LLM_FAILED if the world cannot answer or the answer does not
// decode.
template <class Decode>
Status answer(const std::optional<std::string>& reply, Decode&& decode) {
  if (!reply) return LLM_FAILED;
  try {
    wire::Reader in(*reply);
    return decode(in);
  } catch (const wire::WireError&) {
    return LLM_FAILED;
  }
}

// The reason the world gives after a call's results; a failure's becomes the thread's
// aclGetRecentErrMsg, as the library's own logged errors do.
Status with_reason(wire::Reader& in, Status status) {
  std::string why = in.str();
  in.end();
  if (status != LLM_SUCCESS) Channel::set_recent_error(std::move(why));
  return status;
}

// A request that answers with one Status.
Status status_call(wire::Op op, const std::string& payload) {
  return answer(Channel::get().call(op, payload),
                [](wire::Reader& in) { return with_reason(in, in.u32()); });
}

}  // namespace

/// The instance's handle in the world (0: the world could not make one).
class LlmDataDist::LlmDataDistImpl {
 public:
  std::uint64_t handle = 0;
};

LlmDataDist::LlmDataDist(uint64_t cluster_id, LlmRole role) : impl_(new LlmDataDistImpl) {
  const auto reply = Channel::get().call(
      wire::Op::kDistCreate, wire::Writer().u64(cluster_id).i32(static_cast<int32_t>(role)).take());
  (void)answer(reply, [this](wire::Reader& in) {
    impl_->handle = in.u64();
    return LLM_SUCCESS;
  });
}

LlmDataDist::~LlmDataDist() {
  if (impl_ && impl_->handle != 0) {
    (void)Channel::get().call(wire::Op::kDistDestroy, wire::Writer().u64(impl_->handle).take());
  }
}

Status LlmDataDist::Initialize(const std::map<AscendString, AscendString>& options) {
  return status_call(wire::Op::kInitialize,
                     wire::Writer().u64(impl_->handle).options(to_options(options)).take());
}

void LlmDataDist::Finalize() {
  (void)Channel::get().call(wire::Op::kFinalize, wire::Writer().u64(impl_->handle).take());
}

Status LlmDataDist::SetRole(LlmRole role, const std::map<AscendString, AscendString>& options) {
  return status_call(wire::Op::kSetRole, wire::Writer()
                                             .u64(impl_->handle)
                                             .i32(static_cast<int32_t>(role))
                                             .options(to_options(options))
                                             .take());
}

namespace {

Status link_call(wire::Op op, const std::string& payload, std::vector<Status>& rets) {
  return answer(Channel::get().call(op, payload), [&rets](wire::Reader& in) {
    const Status status = in.u32();
    const std::vector<std::uint32_t> codes = in.u32s();
    rets.assign(codes.begin(), codes.end());
    return with_reason(in, status);
  });
}

}  // namespace

Status LlmDataDist::LinkLlmClusters(const std::vector<ClusterInfo>& clusters,
                                    std::vector<Status>& rets, int32_t timeout_in_millis) {
  return link_call(wire::Op::kLink,
                   wire::Writer()
                       .u64(impl_->handle)
                       .clusters(to_clusters(clusters))
                       .i32(timeout_in_millis)
                       .take(),
                   rets);
}

Status LlmDataDist::UnlinkLlmClusters(const std::vector<ClusterInfo>& clusters,
                                      std::vector<Status>& rets, int32_t timeout_in_millis,
                                      bool force_flag) {
  return link_call(wire::Op::kUnlink,
                   wire::Writer()
                       .u64(impl_->handle)
                       .clusters(to_clusters(clusters))
                       .i32(timeout_in_millis)
                       .boolean(force_flag)
                       .take(),
                   rets);
}

namespace {
// llm_datadist_impl.cc: the C++ API has no cache allocation or local copies.
Status not_enabled() {
  Channel::set_recent_error("The feature is not supported.");
  return LLM_FEATURE_NOT_ENABLED;
}
}  // namespace

Status LlmDataDist::AllocateCache(const CacheDesc&, Cache&) {
  return not_enabled();
}

Status LlmDataDist::DeallocateCache(int64_t) {
  return not_enabled();
}

Status LlmDataDist::CopyKvCache(const Cache&, const Cache&, uint32_t, uint32_t, uint64_t, int64_t) {
  return not_enabled();
}

Status LlmDataDist::CopyKvBlocks(const Cache&, const Cache&, const std::vector<uint64_t>&,
                                 const std::vector<std::vector<uint64_t>>&) {
  return not_enabled();
}

Status LlmDataDist::PullKvCache(const CacheIndex& src_cache_index, const Cache& dst_cache,
                                uint32_t batch_index, int64_t size,
                                const KvCacheExtParam& ext_param) {
  return status_call(wire::Op::kPullCache, wire::Writer()
                                               .u64(impl_->handle)
                                               .index(to_index(src_cache_index))
                                               .cache(to_cache(dst_cache))
                                               .u32(batch_index)
                                               .i64(size)
                                               .ext(to_ext(ext_param))
                                               .take());
}

Status LlmDataDist::PullKvBlocks(const CacheIndex& src_cache_index, const Cache& dst_cache,
                                 const std::vector<uint64_t>& src_blocks,
                                 const std::vector<uint64_t>& dst_blocks,
                                 const KvCacheExtParam& ext_param) {
  return status_call(wire::Op::kPullBlocks, wire::Writer()
                                                .u64(impl_->handle)
                                                .index(to_index(src_cache_index))
                                                .cache(to_cache(dst_cache))
                                                .u64s(src_blocks)
                                                .u64s(dst_blocks)
                                                .ext(to_ext(ext_param))
                                                .take());
}

Status LlmDataDist::PushKvCache(const Cache& src_cache, const CacheIndex& dst_cache_index,
                                uint32_t src_batch_index, int64_t size,
                                const KvCacheExtParam& ext_param) {
  return status_call(wire::Op::kPushCache, wire::Writer()
                                               .u64(impl_->handle)
                                               .cache(to_cache(src_cache))
                                               .index(to_index(dst_cache_index))
                                               .u32(src_batch_index)
                                               .i64(size)
                                               .ext(to_ext(ext_param))
                                               .take());
}

Status LlmDataDist::PushKvBlocks(const Cache& src_cache, const CacheIndex& dst_cache_index,
                                 const std::vector<uint64_t>& src_blocks,
                                 const std::vector<uint64_t>& dst_blocks,
                                 const KvCacheExtParam& ext_param) {
  return status_call(wire::Op::kPushBlocks, wire::Writer()
                                                .u64(impl_->handle)
                                                .cache(to_cache(src_cache))
                                                .index(to_index(dst_cache_index))
                                                .u64s(src_blocks)
                                                .u64s(dst_blocks)
                                                .ext(to_ext(ext_param))
                                                .take());
}

Status LlmDataDist::RegisterKvCache(const CacheDesc& cache_desc, const std::vector<uint64_t>& addrs,
                                    const RegisterCfg&, int64_t& cache_id) {
  const auto reply = Channel::get().call(
      wire::Op::kRegister,
      wire::Writer().u64(impl_->handle).desc(to_desc(cache_desc)).u64s(addrs).take());
  return answer(reply, [&cache_id](wire::Reader& in) {
    const Status status = in.u32();
    const int64_t id = in.i64();
    if (status == LLM_SUCCESS) cache_id = id;
    return with_reason(in, status);
  });
}

Status LlmDataDist::UnregisterKvCache(int64_t cache_id) {
  return status_call(wire::Op::kUnregister, wire::Writer().u64(impl_->handle).i64(cache_id).take());
}

}  // namespace llm_datadist
