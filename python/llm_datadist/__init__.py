"""llm_datadist on the kvsim simulator: the names of CANN's llm_datadist Python API.

``from llm_datadist import *`` gives the same classes, enums, exceptions and status codes as
the real library; LLMDataDist instances live in the current kvsim world (see kvsim). In a
Python program launched as an OS process they live in the launch's world, and the objects here
are handles of them (kvsim.launched.remote).
"""
from kvsim import launched as _launched
from kvsim._core import (
    BlocksCacheKey, Cache, CacheDesc, CacheKey, CacheKeyByIdAndIndex, DataType,
    LayerSynchronizer, LLMClusterInfo, LLMConfig, LLMException, LLMRole, LLMStatusCode,
    Memtype, Placement, RegisterMemStatus, TransferConfig, TransferWithCacheKeyConfig)

if _launched.active():
    from kvsim.launched.remote import (
        CacheManager, CacheTask, KvCache, KvCacheManager, LLMDataDist)
else:
    from kvsim._core import CacheManager, CacheTask, KvCache, KvCacheManager, LLMDataDist

LlmConfig = LLMConfig

__all__ = ["BlocksCacheKey", "Cache", "CacheDesc", "CacheKey", "CacheKeyByIdAndIndex",
           "CacheManager", "CacheTask", "DataType", "KvCache", "KvCacheManager",
           "LayerSynchronizer", "LLMClusterInfo", "LLMConfig", "LlmConfig", "LLMDataDist",
           "LLMException", "LLMRole", "LLMStatusCode", "Memtype", "Placement",
           "RegisterMemStatus", "TransferConfig", "TransferWithCacheKeyConfig"]
