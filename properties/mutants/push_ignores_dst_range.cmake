# push_* sends every layer to the remote layer of the same index, ignoring dst_layer_range.
set(FILE pull_push.cpp)
set(FROM [=[    call.remote = RemoteKeyTarget{key, dst_layer};]=])
set(TO [=[    call.remote = RemoteKeyTarget{key, src_layer};]=])
