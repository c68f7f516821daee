# A pull between HOST and DEVICE no longer needs a device pool of at least 100 MiB (§4).
set(FILE validation.cpp)
set(FROM [=[(!device_pool_bytes || *device_pool_bytes < kMinStagingPoolBytes)]=])
set(TO [=[(!device_pool_bytes)]=])
