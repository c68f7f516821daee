# Layer-wise KV is handed to decode without waiting for its tasks.
set(FILE serving/serving_runner.cpp)
set(FROM [=[const LLMStatusCode code = task.synchronize();]=])
set(TO [=[const LLMStatusCode code = LLMStatusCode::LLM_SUCCESS;]=])
