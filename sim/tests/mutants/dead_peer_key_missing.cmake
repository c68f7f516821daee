# A pull whose peer died holding the link reports the key as missing (KV_CACHE_NOT_EXIST) instead
# of the failed exchange with the peer.
set(FILE pull_push.cpp)
set(FROM [=[    if (const LLMStatusCode gone = check_peer_alive(core, link, lost);
        gone != LLMStatusCode::LLM_SUCCESS) {
      throw LLMException(gone, argument,]=])
set(TO [=[    if (const LLMStatusCode gone = check_peer_alive(core, link, lost);
        gone == LLMStatusCode::LLM_SUCCESS && false) {
      throw LLMException(gone, argument,]=])
