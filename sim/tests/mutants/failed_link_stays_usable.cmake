# A transfer that failed leaves its link usable (the library says it is unrecoverable until
# relinked): the next call after the path is back succeeds without a relink.
set(FILE cluster_links.cpp)
set(FROM [=[  if (!link.transport_failure().empty()) return;]=])
set(TO [=[  if (true) return;]=])
