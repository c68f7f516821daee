# unregister_cache no longer diagnoses a remote-accessible cache unregistered while links remain
# (§4: "call after unlink"; the library does not check, HCCL fails on hardware): strict mode then
# unregisters it instead of raising LLM_FAILED and keeping it.
set(FILE cache_store.cpp)
set(FROM [=[  if (e->view.remote_accessible && core.any_link()) {]=])
set(TO [=[  if (false) {]=])
