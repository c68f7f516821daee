#include "python/src/py_host_memory.h"

#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "impl/errors.h"

namespace kvsim::python {

namespace {

// True if [addr, addr + len) lies in mappings of this process that are readable and writable
// (/proc/self/maps), so that copying from and to it cannot fault.
bool program_memory(std::uint64_t addr, std::uint64_t len) {
  std::ifstream maps("/proc/self/maps");
  std::uint64_t covered = addr;
  const std::uint64_t end = addr + len;
  for (std::string line; std::getline(maps, line) && covered < end;) {
    std::istringstream in(line);
    std::uint64_t lo = 0, hi = 0;
    char dash = 0;
    std::string perms;
    in >> std::hex >> lo >> dash >> hi >> perms;
    if (perms.size() < 2 || perms[0] != 'r' || perms[1] != 'w') continue;
    if (lo <= covered && covered < hi) covered = hi;
  }
  return covered >= end;
}

}  // namespace

impl::CacheView mirror_host_memory(WorldBox& box, const impl::CacheView& cache, int device) {
  impl::CacheView out = cache;
  if (cache.placement() != impl::Placement::HOST) return out;
  sim::SystemcPlatform& platform = live_box(box).platform();
  const std::uint64_t size = cache.desc.size();
  for (std::size_t i = 0; i < cache.tensor_addrs.size(); ++i) {
    const std::uint64_t addr = cache.tensor_addrs[i];
    if (size == 0 || platform.locate(addr, size)) continue;  // simulated memory already
    if (!program_memory(addr, size)) {
      throw impl::ValueError("cache.tensor_addrs[" + std::to_string(i) + "]",
                             std::to_string(addr) + " is neither simulated memory nor " +
                                 std::to_string(size) + " bytes of this program's memory");
    }
    auto& mirror = box.host_mirrors[{addr, size}];
    if (mirror == 0 || !platform.locate(mirror, size)) {
      const auto made = platform.allocate(device, impl::Placement::HOST, size, 64);
      if (!made) {
        throw impl::LLMException(impl::LLMStatusCode::LLM_OUT_OF_MEMORY, "cache",
                                 "the node's simulated host memory has no room for a mirror of " +
                                     std::to_string(size) + " bytes");
      }
      mirror = *made;
    }
    platform.write(mirror, reinterpret_cast<const std::uint8_t*>(addr), size);
    out.tensor_addrs[i] = mirror;
  }
  return out;
}

void write_back_host_memory(WorldBox& box, const impl::CacheView& original,
                            const impl::CacheView& mirrored) {
  sim::SystemcPlatform& platform = live_box(box).platform();
  const std::uint64_t size = original.desc.size();
  for (std::size_t i = 0; i < original.tensor_addrs.size(); ++i) {
    if (original.tensor_addrs[i] == mirrored.tensor_addrs[i]) continue;
    platform.read(mirrored.tensor_addrs[i],
                  reinterpret_cast<std::uint8_t*>(original.tensor_addrs[i]), size);
  }
}

}  // namespace kvsim::python
