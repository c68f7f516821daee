# A request's bytes counted over its whole decode reservation (prompt and output blocks).
set(FILE serving/serving_runner.cpp)
set(FROM [=[q.r.bytes = q.src_blocks.size() * block_bytes()]=])
set(TO [=[q.r.bytes = q.dst_all.size() * block_bytes()]=])
