#include "cpp/engine/data_dist_engine.h"

#include <functional>

#include <arpa/inet.h>

#include <algorithm>
#include <exception>
#include <string>

#include "impl/cache_store.h"
#include "impl/cluster_links.h"
#include "impl/diagnostics.h"
#include "impl/errors.h"
#include "impl/pull_push.h"
#include "impl/status.h"

namespace kvsim::cpp {

namespace {

using impl::LLMStatusCode;

constexpr Status code(LLMStatusCode c) {
  return static_cast<Status>(impl::to_int(c));
}
constexpr Status kSuccess = code(LLMStatusCode::LLM_SUCCESS);
constexpr Status kFailed = code(LLMStatusCode::LLM_FAILED);
constexpr Status kParamInvalid = code(LLMStatusCode::LLM_PARAM_INVALID);
constexpr Status kCacheNotExist = code(LLMStatusCode::LLM_KV_CACHE_NOT_EXIST);
constexpr std::size_t kMaxShapeDims = 32;  // CacheManager: shape.size() < kMaxDimNum (32)

// Runs an impl call and turns what it throws into the Status the C++ API returns: an
// LLMException (strict-mode diagnostics included) its code, TypeError and ValueError
// LLM_PARAM_INVALID (a C++ argument out of the library's range), anything else LLM_FAILED. The
// exception's text goes to `why`.
template <class Fn>
Status guarded(std::string& why, Fn&& fn) {
  try {
    fn();
    return kSuccess;
  } catch (const impl::LLMException& e) {
    why = e.what();
    return code(e.status_code());
  } catch (const impl::TypeError& e) {
    why = e.what();
    return kParamInvalid;
  } catch (const impl::ValueError& e) {
    why = e.what();
    return kParamInvalid;
  } catch (const std::exception& e) {
    why = e.what();
    return kFailed;
  }
}

// LlmDataDistImpl::Initialize maps every non-LLM code to LLM_FAILED (TransRetToLlmCodes).
Status llm_code(Status status) {
  const bool llm = status == kSuccess || status == kFailed ||
                   (status & 0xFFFFF000U) == (kParamInvalid & 0xFFFFF000U);
  return llm ? status : kFailed;
}

bool valid_role(std::int32_t role) {
  return role >= 1 && role < kRoleEnd;
}

impl::LLMRole to_role(std::int32_t role) {
  return static_cast<impl::LLMRole>(role);
}

// "ip:port" or "[ipv6]:port" (LLMUtils::ParseListenIpInfo with CheckIp).
bool valid_listen_ip_info(const std::string& text) {
  const std::size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon + 1 == text.size()) return false;
  std::string ip = text.substr(0, colon);
  const std::string port = text.substr(colon + 1);
  if (!std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return false;
  }
  unsigned char buf[16];
  if (ip.size() > 2 && ip.front() == '[' && ip.back() == ']') {
    return ::inet_pton(AF_INET6, ip.substr(1, ip.size() - 2).c_str(), buf) == 1;
  }
  return ::inet_pton(AF_INET, ip.c_str(), buf) == 1;
}

bool valid_ip(const std::string& ip) {
  unsigned char buf[16];
  return !ip.empty() && (::inet_pton(AF_INET, ip.c_str(), buf) == 1 ||
                         ::inet_pton(AF_INET6, ip.c_str(), buf) == 1);
}

impl::LLMClusterInfo to_cluster_info(const Cluster& c) {
  impl::LLMClusterInfo info;
  info.set_remote_cluster_id(c.remote_cluster_id);
  for (const IpAddress& a : c.local) info.append_local_ip_info(a.ip, a.port);
  for (const IpAddress& a : c.remote) info.append_remote_ip_info(a.ip, a.port);
  return info;
}

// The ext-param check shared by push and pull (E, LlmDataDistImpl::CheckKvCacheExtParam):
// first >= -1, second >= -1, first <= second, tensor_num_per_layer > 0. What is wrong, or "".
std::string ext_error(const ExtParam& e) {
  const auto bad = [](std::int32_t first, std::int32_t second) {
    return first < -1 || second < -1 || first > second;
  };
  if (bad(e.src_first, e.src_second)) {
    return "invalid src_layer_range (" + std::to_string(e.src_first) + ", " +
           std::to_string(e.src_second) + ")";
  }
  if (bad(e.dst_first, e.dst_second)) {
    return "invalid dst_layer_range (" + std::to_string(e.dst_first) + ", " +
           std::to_string(e.dst_second) + ")";
  }
  if (e.tensor_num_per_layer == 0) return "tensor_num_per_layer must be > 0";
  return {};
}

// Tensors of an inclusive layer range: layer L is [L*tnpl, (L+1)*tnpl); -1 means every tensor
// (an empty list to impl).
std::vector<std::uint64_t> range_tensors(std::int32_t first, std::int32_t second,
                                         std::uint8_t tnpl) {
  std::vector<std::uint64_t> out;
  if (first < 0) return out;
  for (std::int64_t t = static_cast<std::int64_t>(first) * tnpl;
       t < (static_cast<std::int64_t>(second) + 1) * tnpl; ++t) {
    out.push_back(static_cast<std::uint64_t>(t));
  }
  return out;
}

impl::TensorIndices tensor_indices(const ExtParam& e) {
  impl::TensorIndices out;
  out.src = range_tensors(e.src_first, e.src_second, e.tensor_num_per_layer);
  out.dst = range_tensors(e.dst_first, e.dst_second, e.tensor_num_per_layer);
  return out;
}

bool ranged(const ExtParam& e) {
  return e.src_first >= 0 || e.dst_first >= 0;
}

}  // namespace

DataDistEngine::DataDistEngine(impl::Platform& platform, impl::Directory& directory,
                               std::uint64_t cluster_id, std::int32_t role)
    : dist_(platform, directory, valid_role(role) ? to_role(role) : impl::LLMRole::MIX, cluster_id,
            impl::FrontEnd::kCpp),
      role_(role) {}

Status DataDistEngine::fail(Status status, std::string why) {
  last_error_ = std::move(why);
  return status;
}

Status DataDistEngine::live() {
  if (dist_.initialized()) return kSuccess;
  return fail(kFailed, "LlmDataDist is not initialized");
}

Status DataDistEngine::run(const std::function<void()>& fn) {
  return guarded(last_error_, fn);
}

Status DataDistEngine::initialize(const Options& options) {
  last_error_.clear();
  if (dist_.initialized()) return kSuccess;
  if (!valid_role(role_)) return fail(kParamInvalid, "invalid role " + std::to_string(role_));
  Options engine;  // as LlmDataDistImpl::Initialize rewrites the options
  for (const auto& [key, value] : options) {
    if (key != "llm.DeviceId" && key != "llm.ListenIpInfo") engine[key] = value;
  }
  const auto device = options.find("llm.DeviceId");
  if (device == options.end() || device->second.empty() ||
      !std::all_of(device->second.begin(), device->second.end(),
                   [](char c) { return c >= '0' && c <= '9'; })) {
    // Also a ';' list: one device per process.
    return fail(kParamInvalid, "llm.DeviceId must be one device id, got '" +
                                   (device == options.end() ? std::string() : device->second) +
                                   "'");
  }
  engine["ge.exec.deviceId"] = device->second;
  if (const auto listen = options.find("llm.ListenIpInfo"); listen != options.end()) {
    if (!valid_listen_ip_info(listen->second)) {
      return fail(kParamInvalid, "llm.ListenIpInfo '" + listen->second + "' is not ip:port");
    }
    engine["llm.listenIpInfo"] = listen->second;
  }
  engine["llm.EnableCacheManager"] = "1";
  engine["llm.EnableRemoteCacheAccessible"] = "1";
  const Status status = llm_code(run([&] { dist_.init(engine); }));
  if (status == kSuccess) device_id_ = static_cast<std::int32_t>(std::stol(device->second));
  return status;
}

void DataDistEngine::finalize() {
  (void)run([&] { dist_.finalize(); });
}

void DataDistEngine::abandon(const std::string& why) {
  (void)run([&] { dist_.abandon(why); });
}

Status DataDistEngine::set_role(std::int32_t role, const Options& options) {
  last_error_.clear();
  if (const Status s = live(); s != kSuccess) return s;
  if (!valid_role(role)) return fail(kParamInvalid, "Invalid role: " + std::to_string(role));
  Options engine;
  if (const auto listen = options.find("llm.ListenIpInfo"); listen != options.end()) {
    if (!valid_listen_ip_info(listen->second)) {
      return fail(kParamInvalid, "llm.ListenIpInfo '" + listen->second + "' is not ip:port");
    }
    engine["llm.listenIpInfo"] = listen->second;
  }
  return run([&] { dist_.switch_role(to_role(role), engine); });
}

Status DataDistEngine::link(const std::vector<Cluster>& clusters, std::vector<Status>& rets,
                            std::int32_t timeout_ms) {
  last_error_.clear();
  if (const Status s = live(); s != kSuccess) return s;
  if (timeout_ms <= 0) {
    return fail(kParamInvalid, "timeout_in_millis must be > 0, got " + std::to_string(timeout_ms));
  }
  std::vector<impl::LLMClusterInfo> infos;
  for (const Cluster& c : clusters) {
    for (const auto* list : {&c.local, &c.remote}) {
      for (const IpAddress& a : *list) {
        if (!valid_ip(a.ip)) return fail(kParamInvalid, "'" + a.ip + "' is not an IP address");
      }
    }
    infos.push_back(to_cluster_info(c));
  }
  impl::LinkResult result;
  const Status s = run([&] { result = dist_.link_clusters(infos, timeout_ms); });
  if (s != kSuccess) return s;
  rets.clear();
  for (LLMStatusCode c : result.second) rets.push_back(code(c));
  return code(result.first);
}

Status DataDistEngine::unlink(const std::vector<Cluster>& clusters, std::vector<Status>& rets,
                              std::int32_t timeout_ms, bool force) {
  last_error_.clear();
  if (const Status s = live(); s != kSuccess) return s;
  if (timeout_ms <= 0) {
    return fail(kParamInvalid, "timeout_in_millis must be > 0, got " + std::to_string(timeout_ms));
  }
  std::vector<impl::LLMClusterInfo> infos;
  for (const Cluster& c : clusters) infos.push_back(to_cluster_info(c));
  impl::LinkResult result;
  const Status s = run([&] { result = dist_.unlink_clusters(infos, timeout_ms, force); });
  if (s != kSuccess) return s;
  rets.clear();
  for (LLMStatusCode c : result.second) rets.push_back(code(c));
  return code(result.first);
}

Status DataDistEngine::register_kv_cache(const Desc& desc, const std::vector<std::uint64_t>& addrs,
                                         std::int64_t& cache_id) {
  last_error_.clear();
  if (const Status s = live(); s != kSuccess) return s;
  if (addrs.empty()) return fail(kParamInvalid, "addrs is empty");
  if (addrs.size() != desc.num_tensors) {
    return fail(kParamInvalid, "addrs has " + std::to_string(addrs.size()) +
                                   " address(es), cache_desc.num_tensors is " +
                                   std::to_string(desc.num_tensors));
  }
  if (desc.shape.empty() || desc.shape.size() > kMaxShapeDims) {
    return fail(kParamInvalid, "cache_desc.shape must have 1 to 32 dims, has " +
                                   std::to_string(desc.shape.size()));
  }
  if (std::find(addrs.begin(), addrs.end(), 0u) != addrs.end()) {
    return fail(kParamInvalid, "addrs holds a null address");
  }
  const auto type = static_cast<impl::DataType>(desc.data_type);
  const auto placement = static_cast<impl::Placement>(desc.placement);
  if (!impl::is_valid(type)) {
    return fail(kParamInvalid,
                "cache_desc.data_type " + std::to_string(desc.data_type) + " is not a DataType");
  }
  if (!impl::is_valid(placement)) {
    return fail(kParamInvalid, "cache_desc.placement " + std::to_string(desc.placement) +
                                   " is not a CachePlacement");
  }
  return run([&] {
    const impl::CacheDesc cache_desc(desc.num_tensors, desc.shape, type, placement);
    impl::RegisterRequest request;
    request.cache_desc = &cache_desc;
    request.addrs = addrs;
    request.mix = true;
    cache_id = impl::register_cache(*dist_.core(), request).cache_id;
  });
}

Status DataDistEngine::unregister_kv_cache(std::int64_t cache_id) {
  last_error_.clear();
  if (const Status s = live(); s != kSuccess) return s;
  return run([&] { impl::unregister_cache(*dist_.core(), cache_id); });
}

Status DataDistEngine::check_pull(const Index& src, const CacheRef& dst, const ExtParam& ext) {
  if (const std::string why = ext_error(ext); !why.empty()) return fail(kParamInvalid, why);
  if (src.cluster_id == dist_.cluster_id()) {
    return fail(kParamInvalid,
                "the source cluster " + std::to_string(src.cluster_id) + " is this instance's own");
  }
  const impl::CacheEntry* local = dist_.core()->caches().find(dst.cache_id);
  if (local == nullptr) {
    return fail(kCacheNotExist, "cache " + std::to_string(dst.cache_id) + " is not registered");
  }
  if (ranged(ext) && local->view.desc.num_tensors() % ext.tensor_num_per_layer != 0) {
    // DataCacheEngine::CheckTensorIndices, on the destination.
    return fail(kParamInvalid, "the cache's " + std::to_string(local->view.desc.num_tensors()) +
                                   " tensors are not layers of tensor_num_per_layer " +
                                   std::to_string(ext.tensor_num_per_layer));
  }
  return kSuccess;
}

Status DataDistEngine::pull_kv_cache(const Index& src, const CacheRef& dst,
                                     std::uint32_t batch_index, std::int64_t size,
                                     const ExtParam& ext) {
  last_error_.clear();
  if (const Status s = live(); s != kSuccess) return s;
  if (!(size == -1 || size > 0)) {
    return fail(kParamInvalid,
                "Invalid size (" + std::to_string(size) + "), size must = -1 or > 0");
  }
  if (const Status s = check_pull(src, dst, ext); s != kSuccess) return s;
  impl::PullCachePlan plan;
  plan.tensor_indices = tensor_indices(ext);
  plan.batch_index = batch_index;
  plan.size = size;
  plan.tensor_num_per_layer = ext.tensor_num_per_layer;
  const impl::CacheKeyByIdAndIndex key(src.cluster_id, src.cache_id, src.batch_index);
  return run([&] { impl::pull_cache_planned(*dist_.core(), key, dst.cache_id, plan); });
}

Status DataDistEngine::pull_kv_blocks(const Index& src, const CacheRef& dst,
                                      const std::vector<std::uint64_t>& src_blocks,
                                      const std::vector<std::uint64_t>& dst_blocks,
                                      const ExtParam& ext) {
  last_error_.clear();
  if (const Status s = live(); s != kSuccess) return s;
  if (src.batch_index != 0) {
    return fail(kParamInvalid, "invalid src_cache_index.batch_index (" +
                                   std::to_string(src.batch_index) +
                                   "), only 0 is supported in pull block");
  }
  if (const Status s = check_blocks(src_blocks, dst_blocks, "pull"); s != kSuccess) return s;
  if (const Status s = check_pull(src, dst, ext); s != kSuccess) return s;
  impl::PullBlocksPlan plan;
  plan.tensor_indices = tensor_indices(ext);
  plan.src_blocks = src_blocks;
  plan.dst_blocks = dst_blocks;
  plan.tensor_num_per_layer = ext.tensor_num_per_layer;
  const impl::CacheKeyByIdAndIndex key(src.cluster_id, src.cache_id, 0);
  return run(
      [&] { impl::pull_blocks_planned(*dist_.core(), key, dst.cache_id, plan, /*b2b=*/true); });
}

// hicann/hixl src/llm_datadist/api/llm_datadist_impl.cc (the block-list checks of
// PullKvBlocks/PushKvBlocks), their messages word for word.
Status DataDistEngine::check_blocks(const std::vector<std::uint64_t>& src_blocks,
                                    const std::vector<std::uint64_t>& dst_blocks,
                                    const char* what) {
  if (src_blocks.empty()) {
    return fail(kParamInvalid, std::string("src_blocks is empty, ") + what +
                                   " from non-block cache is not supported yet");
  }
  if (src_blocks.size() != dst_blocks.size()) {
    return fail(kParamInvalid, "number of src_blocks (" + std::to_string(src_blocks.size()) +
                                   ") mismatches that of dst_blocks (" +
                                   std::to_string(dst_blocks.size()) + ")");
  }
  return kSuccess;
}

namespace {

// The layer pairs of a push (R): equal range lengths; an all-layer source range counts layers
// from the caller's src.desc.num_tensors, a remainder group being one more layer (the library
// then fails at that layer). A -1 destination range follows the source's layers. What is
// wrong, or "".
std::string push_layers(const CacheRef& src, const ExtParam& ext,
                        std::vector<std::pair<std::uint64_t, std::uint64_t>>& layers) {
  if (ext.src_second - ext.src_first != ext.dst_second - ext.dst_first) {
    return "src_layer_range and dst_layer_range differ in length";
  }
  std::int64_t first = ext.src_first;
  std::int64_t count = static_cast<std::int64_t>(ext.src_second) - ext.src_first + 1;
  if (ext.src_first < 0) {
    if (src.desc.num_tensors == 0) {
      return "Invalid src layer:-1, layer need >= 0, or -1 with valid num_tensors.";
    }
    first = 0;
    count = (src.desc.num_tensors + ext.tensor_num_per_layer - 1) / ext.tensor_num_per_layer;
  }
  const std::int64_t dst_first = ext.dst_first < 0 ? first : ext.dst_first;
  for (std::int64_t i = 0; i < count; ++i) {
    layers.emplace_back(static_cast<std::uint64_t>(first + i),
                        static_cast<std::uint64_t>(dst_first + i));
  }
  return {};
}

}  // namespace

Status DataDistEngine::check_push(const CacheRef& src, const ExtParam& ext, impl::PushPlan& plan,
                                  const impl::CacheEntry*& local) {
  if (src.desc.placement != 1) return fail(kParamInvalid, "Only support push to device cache");
  if (const std::string why = ext_error(ext); !why.empty()) return fail(kParamInvalid, why);
  if (const std::string why = push_layers(src, ext, plan.layers); !why.empty()) {
    return fail(kParamInvalid, why);
  }
  local = dist_.core()->caches().find(src.cache_id);
  if (local == nullptr) {
    return fail(kCacheNotExist, "cache " + std::to_string(src.cache_id) + " is not registered");
  }
  plan.tensor_num_per_layer = ext.tensor_num_per_layer;
  return kSuccess;
}

Status DataDistEngine::push_kv_cache(const CacheRef& src, const Index& dst,
                                     std::uint32_t src_batch_index, std::int64_t size,
                                     const ExtParam& ext) {
  last_error_.clear();
  if (const Status s = live(); s != kSuccess) return s;
  if (size != -1) {
    return fail(kParamInvalid,
                "Invalid size (" + std::to_string(size) + "), size only support -1 currently.");
  }
  impl::PushPlan plan;
  const impl::CacheEntry* local = nullptr;
  if (const Status s = check_push(src, ext, plan, local); s != kSuccess) return s;
  plan.src_batch_index = src_batch_index;
  const impl::CacheKeyByIdAndIndex key(dst.cluster_id, dst.cache_id, dst.batch_index);
  const impl::CacheView view = local->view;
  return run([&] { impl::push_planned(*dist_.core(), plan, view, key, "PushKvCache"); });
}

Status DataDistEngine::push_kv_blocks(const CacheRef& src, const Index& dst,
                                      const std::vector<std::uint64_t>& src_blocks,
                                      const std::vector<std::uint64_t>& dst_blocks,
                                      const ExtParam& ext) {
  last_error_.clear();
  if (const Status s = live(); s != kSuccess) return s;
  if (const Status s = check_blocks(src_blocks, dst_blocks, "push"); s != kSuccess) return s;
  if (dst.batch_index != 0) {
    return fail(kParamInvalid, "invalid dst_cache_index.batch_index (" +
                                   std::to_string(dst.batch_index) +
                                   "), only 0 is supported in push block");
  }
  impl::PushPlan plan;
  const impl::CacheEntry* local = nullptr;
  if (const Status s = check_push(src, ext, plan, local); s != kSuccess) return s;
  plan.src_blocks = src_blocks;
  plan.dst_blocks = dst_blocks;
  const impl::CacheKeyByIdAndIndex key(dst.cluster_id, dst.cache_id, 0);
  const impl::CacheView view = local->view;
  return run([&] { impl::push_planned(*dist_.core(), plan, view, key, "PushKvBlocks"); });
}

}  // namespace kvsim::cpp
