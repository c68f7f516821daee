# pull_blocks runs without the link's mutex (it may overlap a per-layer transfer, a push or an
# unlink on that link, §3.4).
set(FILE pull_push.cpp)
set(FROM [=[  check_overlap(core, *link, "pull_blocks");
  ActivePull active(*link);
  LockGuard lock(link->mutex());]=])
set(TO [=[  check_overlap(core, *link, "pull_blocks");
  ActivePull active(*link);]=])
