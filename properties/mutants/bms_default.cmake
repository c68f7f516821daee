# B2B no longer reads dst_block_memory_size None/0 as "the source block size".
set(FILE copy_geometry.cpp)
set(FROM [=[if (layer.dst_block_memory_size > 0 && layer.dst_block_memory_size != src.stride) {]=])
set(TO [=[if (layer.dst_block_memory_size != src.stride) {]=])
