# An engine without llm.EnableCacheManager gets the v2 CacheManager (kvsim's old default) instead of
# the library's v1 KvCacheManager (hixl v2/llm_datadist.py _setup_engine_option: v2 only when the
# option is "1", or llm.LocalCommRes turned it on).
set(FILE types.cpp)
set(FROM [=[flag_option(options, kOptionEnableCacheManager).value_or(comm_res);]=])
set(TO [=[flag_option(options, kOptionEnableCacheManager).value_or(true);]=])
