#include "impl/cache_task.h"

#include "impl/errors.h"

namespace kvsim::impl {

bool CacheTask::wait(std::optional<std::int64_t> timeout_in_millis) {
  Time timeout = kForever;
  if (timeout_in_millis) {
    check_uint32("timeout_in_millis", *timeout_in_millis);
    timeout = from_ms(static_cast<std::uint64_t>(*timeout_in_millis));
  }
  if (state_->done->is_set()) return true;
  return state_->done->wait_for(timeout);
}

LLMStatusCode CacheTask::synchronize(std::optional<std::int64_t> timeout_in_millis) {
  if (!wait(timeout_in_millis)) return state_->wait_timeout_code;
  for (std::uint64_t cluster : state_->config_clusters) {
    const auto it = state_->results.find(cluster);
    if (it != state_->results.end() && it->second != LLMStatusCode::LLM_SUCCESS) {
      return it->second;
    }
  }
  return LLMStatusCode::LLM_SUCCESS;
}

std::vector<std::optional<LLMStatusCode>> CacheTask::get_results(
    std::optional<std::int64_t> timeout_in_millis) {
  std::vector<std::optional<LLMStatusCode>> out;
  if (!wait(timeout_in_millis)) {
    out.assign(state_->config_clusters.size(), state_->wait_timeout_code);
    return out;
  }
  for (std::uint64_t cluster : state_->config_clusters) {
    const auto it = state_->results.find(cluster);
    out.push_back(it == state_->results.end() ? std::nullopt
                                              : std::optional<LLMStatusCode>(it->second));
  }
  return out;
}

}  // namespace kvsim::impl
