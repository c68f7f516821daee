# A prefill batch takes the whole queue, whatever the token budget.
set(FILE serving/serving_runner.cpp)
set(FROM [=[if (!batch.empty() && tokens + q.context() > v_.token_budget) break;]=])
set(TO [=[if (false) break;]=])
