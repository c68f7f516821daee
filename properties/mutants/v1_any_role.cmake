# v1 transfer_cache_async no longer requires role PROMPT (§1, §3.1 item 1).
set(FILE validation.cpp)
set(FROM [=[  if (v1 && env.role != LLMRole::PROMPT) {]=])
set(TO [=[  if (false) {]=])
