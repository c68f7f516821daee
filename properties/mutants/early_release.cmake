# deallocate_cache frees a cache at once even while rows keep keys (§4: release is deferred until
# the keys are pulled or removed).
set(FILE cache_store.cpp)
set(FROM [=[    if (key) {
      e->release_pending = true;
      return;
    }]=])
set(TO [=[    if (key) break;]=])
