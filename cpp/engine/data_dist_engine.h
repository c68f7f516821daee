// One llm_datadist::LlmDataDist on kvsim: the C++ API's rules (spec llm_datadist_cpp.md §3-§7,
// hicann/hixl src/llm_datadist/api/llm_datadist_impl.cc and llm_datadist_v2.cc) over impl/. The
// in-process library and the world's server for launched programs both call it; it holds the only
// C++-API logic, so a rule fixed in impl/ is fixed for C++ and Python alike. Never throws: every
// outcome is a Status, as the C++ API returns.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cpp/engine/api_types.h"
#include "impl/directory.h"
#include "impl/llm_datadist.h"
#include "impl/platform.h"
#include "impl/pull_push.h"

namespace kvsim::cpp {

/// LlmRole: kPrompt = 1, kDecoder = 2, kMix = 3, kEnd = 4 (invalid).
inline constexpr std::int32_t kRoleEnd = 4;

class DataDistEngine {
 public:
  DataDistEngine(impl::Platform& platform, impl::Directory& directory, std::uint64_t cluster_id,
                 std::int32_t role);
  DataDistEngine(const DataDistEngine&) = delete;
  DataDistEngine& operator=(const DataDistEngine&) = delete;

  /// Initialize: LLM_SUCCESS again once initialized; LLM_PARAM_INVALID for an invalid role, a
  /// missing, empty or non-numeric llm.DeviceId (one device only) or a malformed
  /// llm.ListenIpInfo; then the v2 engine with remote-accessible caches (LlmDataDistImpl forces
  /// llm.EnableRemoteCacheAccessible=1); any other failure maps to an LLM code
  /// (TransRetToLlmCodes: LLM_FAILED for the rest).
  Status initialize(const Options& options);
  /// Finalize: a no-op when not initialized.
  void finalize();
  /// The program died holding this instance (impl::LLMDataDist::abandon).
  void abandon(const std::string& why);
  /// SetRole: LLM_PARAM_INVALID for an invalid role or a malformed llm.ListenIpInfo; the v2
  /// switch (LLM_EXIST_LINK with links; listens at llm.ListenIpInfo or stops listening).
  Status set_role(std::int32_t role, const Options& options);
  /// LinkLlmClusters: LLM_PARAM_INVALID for timeout <= 0 or an empty or unparsable IP; then
  /// impl::link_clusters, its per-cluster codes in `rets`.
  Status link(const std::vector<Cluster>& clusters, std::vector<Status>& rets,
              std::int32_t timeout_ms);
  /// UnlinkLlmClusters: LLM_PARAM_INVALID for timeout <= 0; then impl::unlink_clusters.
  Status unlink(const std::vector<Cluster>& clusters, std::vector<Status>& rets,
                std::int32_t timeout_ms, bool force);
  /// RegisterKvCache: the caller's memory as one MIX cache (rows and blocks: shape[0]);
  /// LLM_PARAM_INVALID for no addresses, a count other than num_tensors, a 0 address or a shape
  /// of 0 or more than 32 dims. Ids count 1, 2, ... per instance, as the library's do.
  Status register_kv_cache(const Desc& desc, const std::vector<std::uint64_t>& addrs,
                           std::int64_t& cache_id);
  /// UnregisterKvCache: LLM_SUCCESS for an unknown id too.
  Status unregister_kv_cache(std::int64_t cache_id);
  /// PullKvCache: remote row (cluster, cache, batch) into row `batch_index` of the local cache
  /// `dst.cache_id` (only its id is read); size -1 or > 0; the ext-param check (E); not from
  /// this instance's own cluster.
  Status pull_kv_cache(const Index& src, const CacheRef& dst, std::uint32_t batch_index,
                       std::int64_t size, const ExtParam& ext);
  /// PullKvBlocks: B2B; src.batch_index 0, src_blocks non-empty and as many as dst_blocks, (E).
  Status pull_kv_blocks(const Index& src, const CacheRef& dst,
                        const std::vector<std::uint64_t>& src_blocks,
                        const std::vector<std::uint64_t>& dst_blocks, const ExtParam& ext);
  /// PushKvCache: row `src_batch_index` of `src` to the remote row (cluster, cache, batch), one
  /// layer at a time; src.desc.placement must say kDevice and size be -1; (E) and (R): equal
  /// range lengths, and an all-layer range counts layers from src.desc.num_tensors (the
  /// caller's struct, as the library reads it).
  Status push_kv_cache(const CacheRef& src, const Index& dst, std::uint32_t src_batch_index,
                       std::int64_t size, const ExtParam& ext);
  /// PushKvBlocks: as push_kv_cache, B2B; dst.batch_index 0, equal non-empty block lists.
  Status push_kv_blocks(const CacheRef& src, const Index& dst,
                        const std::vector<std::uint64_t>& src_blocks,
                        const std::vector<std::uint64_t>& dst_blocks, const ExtParam& ext);

  bool initialized() const { return dist_.initialized(); }
  /// Why the last call failed (the library's words where it has them), "" after a success.
  const std::string& last_error() const { return last_error_; }
  /// The logical device of llm.DeviceId once initialized, else -1.
  std::int32_t device_id() const { return device_id_; }
  /// The engine's state (tests, the world's reports).
  impl::LLMDataDist& dist() { return dist_; }

 private:
  Status fail(Status status, std::string why);
  Status live();
  Status run(const std::function<void()>& fn);
  Status check_pull(const Index& src, const CacheRef& dst, const ExtParam& ext);
  Status check_blocks(const std::vector<std::uint64_t>& src_blocks,
                      const std::vector<std::uint64_t>& dst_blocks, const char* what);
  Status check_push(const CacheRef& src, const ExtParam& ext, impl::PushPlan& plan,
                    const impl::CacheEntry*& local);

  impl::LLMDataDist dist_;
  std::int32_t role_;
  std::int32_t device_id_ = -1;
  std::string last_error_;
};

}  // namespace kvsim::cpp
