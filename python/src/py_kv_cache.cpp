#include "python/src/py_kv_cache.h"

namespace kvsim::python {

void KvCacheRelease::operator()(impl::KvCache* cache) const noexcept {
  const std::unique_ptr<impl::KvCache> own(cache);
  if (!dist || cache == nullptr || !Py_IsInitialized()) return;
  try {
    auto& handle = pybind11::handle(dist->get()).cast<DataDistHandle&>();
    if (!handle.box() || !handle.box()->alive) return;  // its world was replaced or shut down
    const std::shared_ptr<impl::DataDistCore> core = session.lock();
    impl::LLMDataDist& d = handle.get();
    // Finalized (KvCacheManager._initialized is False), maybe initialized again since.
    if (!core || d.core() != core || !d.initialized()) return;
    d.kv_cache_manager().deallocate_cache(*cache);
  } catch (const pybind11::error_already_set&) {
    PyErr_Clear();
  } catch (...) {  // __del__ never raises
  }
}

KvCacheHolder owned_kv_cache(impl::KvCache cache, pybind11::handle dist_object,
                             DataDistHandle& dist) {
  KvCacheRelease release{std::make_shared<PyRef>(dist_object), dist.get().core()};
  return KvCacheHolder(new impl::KvCache(std::move(cache)), std::move(release));
}

}  // namespace kvsim::python
