"""llm_datadist on the kvsim simulator: the names of CANN's llm_datadist Python API.

``from llm_datadist import *`` gives the same classes, enums, exceptions and status codes as
the real library; LLMDataDist instances live in the current kvsim world (see kvsim).
"""
from kvsim._core import (
    BlocksCacheKey, Cache, CacheDesc, CacheKey, CacheKeyByIdAndIndex, CacheManager,
    CacheTask, DataType, KvCache, KvCacheManager, LayerSynchronizer, LLMClusterInfo,
    LLMConfig, LLMDataDist, LLMException, LLMRole, LLMStatusCode, Memtype, Placement,
    RegisterMemStatus, TransferConfig, TransferWithCacheKeyConfig)

LlmConfig = LLMConfig

__all__ = ["BlocksCacheKey", "Cache", "CacheDesc", "CacheKey", "CacheKeyByIdAndIndex",
           "CacheManager", "CacheTask", "DataType", "KvCache", "KvCacheManager",
           "LayerSynchronizer", "LLMClusterInfo", "LLMConfig", "LlmConfig", "LLMDataDist",
           "LLMException", "LLMRole", "LLMStatusCode", "Memtype", "Placement",
           "RegisterMemStatus", "TransferConfig", "TransferWithCacheKeyConfig"]
