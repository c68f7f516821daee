# pull_cache runs without the link's mutex (it may overlap a per-layer transfer on that link).
set(FILE pull_push.cpp)
set(FROM [=[  check_overlap(core, *link, "pull_cache");
  ActivePull active(*link);
  LockGuard lock(link->mutex());]=])
set(TO [=[  check_overlap(core, *link, "pull_cache");
  ActivePull active(*link);]=])
