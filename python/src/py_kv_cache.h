// v1 KvCache objects that release themselves: the real KvCache.__del__ (llm_datadist_v1
// llm_types.py) deallocates a cache made by KvCacheManager.allocate_cache or
// allocate_blocks_cache when Python drops it, unless it was deallocated already or its manager
// was finalized. Here the Python object's holder does it; it never raises.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>

#include "impl/kv_cache_manager.h"
#include "python/src/py_world.h"

namespace kvsim::python {

/// Deleter of a KvCache's Python holder: deallocates the cache in the LLMDataDist session it was
/// allocated in, if that session is still initialized and its world still alive. Default
/// constructed (copies of a KvCache, CPU caches): frees only the C++ object.
struct KvCacheRelease {
  std::shared_ptr<PyRef> dist;                ///< the LLMDataDist Python object
  std::weak_ptr<impl::DataDistCore> session;  ///< its engine state when the cache was allocated

  void operator()(impl::KvCache* cache) const noexcept;
};

/// The holder type of the Python KvCache class.
using KvCacheHolder = std::unique_ptr<impl::KvCache, KvCacheRelease>;

/// `cache`, just allocated by the KvCacheManager of `dist` (Python object `dist_object`), as an
/// object that deallocates itself when garbage-collected.
KvCacheHolder owned_kv_cache(impl::KvCache cache, pybind11::handle dist_object,
                             DataDistHandle& dist);

}  // namespace kvsim::python
