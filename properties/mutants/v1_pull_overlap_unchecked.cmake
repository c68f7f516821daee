# v1 pull_cache / pull_blocks no longer diagnose a transfer_cache_async task in flight on their link,
# at either end (§3.5 v1 forbids the overlap; strict mode raises LLM_LINK_BUSY).
set(FILE pull_push.cpp)
set(FROM [=[if (link.active_v1_transfers > 0 || (other && other->active_v1_transfers > 0)) {]=])
set(TO [=[if (false) {]=])
