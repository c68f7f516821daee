# v1 pull_cache / pull_blocks no longer diagnose a transfer_cache_async task in flight on their
# link (§3.5 v1 forbids the overlap; strict mode raises LLM_LINK_BUSY).
set(FILE pull_push.cpp)
set(FROM [=[if (core.version() == ApiVersion::kV1 && link.active_v1_transfers > 0) {]=])
set(TO [=[if (false) {]=])
