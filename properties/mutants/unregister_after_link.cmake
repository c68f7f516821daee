# unregister_cache no longer refuses a remote-accessible cache while links exist (§4: "call after
# unlink"); the library gives LLM_FAILED.
set(FILE cache_store.cpp)
set(FROM [=[  if (e->view.remote_accessible && core.any_link()) {]=])
set(TO [=[  if (false) {]=])
