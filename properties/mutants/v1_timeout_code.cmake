# A v1 CacheTask's wait timeout gives LLM_TIMEOUT instead of LLM_WAIT_PROCESS_TIMEOUT (§3.3).
set(FILE validation.cpp)
set(FROM [=[      v1 ? LLMStatusCode::LLM_WAIT_PROCESS_TIMEOUT : LLMStatusCode::LLM_TIMEOUT;]=])
set(TO [=[      LLMStatusCode::LLM_TIMEOUT;]=])
