# push_* sends one layer past the end of its ranges (validation plans one (src, dst) pair too many).
set(FILE validation.cpp)
set(FROM [=[  for (std::int64_t i = 0; i < src.size(); ++i) {
    plan.layers.emplace_back(]=])
set(TO [=[  for (std::int64_t i = 0; i <= src.size(); ++i) {
    plan.layers.emplace_back(]=])
