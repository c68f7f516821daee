# Run merging also accepts a source step of 0 (a repeated source block joins the run).
set(FILE copy_geometry.cpp)
set(FROM [=[if (src_blocks[i] == src_blocks[i - 1] + 1 && dst_blocks[i] == dst_blocks[i - 1] + 1) {]=])
set(TO [=[if (src_blocks[i] - src_blocks[i - 1] <= 1 && dst_blocks[i] == dst_blocks[i - 1] + 1) {]=])
