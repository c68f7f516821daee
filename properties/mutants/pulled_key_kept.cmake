# A pull by CacheKey no longer uses the key up on the remote side (§4).
set(FILE pull_push.cpp)
set(FROM [=[      remove_cache_key(*peer, *src.consumed_key);]=])
set(TO [=[      (void)peer;]=])
