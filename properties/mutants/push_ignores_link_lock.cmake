# push_cache / push_blocks layers run without the link's mutex (transfer_cache_async's keep it:
# only calls without a task log, i.e. pushes, skip it), so a push may overlap a pull or an unlink
# on that link (§3.4, §9).
set(FILE layer_transfer.cpp)
set(FROM [=[  LockGuard link_lock(link->mutex());]=])
set(TO [=[  std::optional<LockGuard> link_lock;
  if (context.task_log != nullptr) link_lock.emplace(link->mutex());]=])
