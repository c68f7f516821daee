# link_clusters connects over a path whose RoCE link is down (the NICs' connection cannot be made),
# both when it starts and when the exchange ends.
set(FILE cluster_links.cpp)
set(FROM [=[!platform.path_up(]=])
set(TO [=[!true && !platform.path_up(]=])
