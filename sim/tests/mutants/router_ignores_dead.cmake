# The router keeps sending requests to a prefill instance that died: they wait for its restart.
set(FILE serving/serving_runner.cpp)
set(FROM [=[if (!prefill_[c].alive) continue;]=])
set(TO [=[]=])
