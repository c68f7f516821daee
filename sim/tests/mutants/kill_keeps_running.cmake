# A killed decode instance's running requests are forgotten, neither lost nor computed again: the
# run never ends.
set(FILE serving/serving_runner.cpp)
set(FROM [=[orphaned.insert(orphaned.end(), inst.running.begin(), inst.running.end());]=])
set(TO [=[]=])
