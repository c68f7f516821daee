# pull_cache does not re-check the link after waiting for its mutex: a pull that queued behind
# an unlink copies over the link the unlink took down instead of raising LLM_NOT_YET_LINK (§3.4).
set(FILE pull_push.cpp)
set(FROM [=[  LockGuard lock(link->mutex());
  if (!link->up()) {
    throw LLMException(LLMStatusCode::LLM_NOT_YET_LINK, "cache_key", "the link went down");
  }]=])
set(TO [=[  LockGuard lock(link->mutex());]=])
