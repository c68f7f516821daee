#include "sim/tests/impl_world_support.h"
#include "sim/engine_setup.h"

namespace kvsim::sim::testing {

std::vector<std::uint8_t> pattern(std::uint64_t size, std::uint64_t seed) {
  std::vector<std::uint8_t> out(size);
  auto x = static_cast<std::uint32_t>(seed * 2654435761u + 12345u);
  for (std::uint64_t i = 0; i < size; ++i) {
    x = x * 1103515245u + 12345u;
    out[i] = static_cast<std::uint8_t>(x >> 24);
  }
  return out;
}

void ImplWorld::TearDown() {
  EXPECT_TRUE(world_.platform().job_failures().empty());
}

std::unique_ptr<impl::LLMDataDist> ImplWorld::make_dist(impl::LLMRole role, std::uint64_t cluster,
                                                        int device, bool listen,
                                                        std::map<std::string, std::string> extra) {
  auto dist = std::make_unique<impl::LLMDataDist>(platform_, world_.directory(), role, cluster);
  std::map<std::string, std::string> options = engine_options(platform_, device, listen);
  options[impl::kOptionDeviceId] = "0";
  for (auto& [k, v] : extra) options[k] = v;
  // One host process per engine, seeing its device as device 0, as on hardware.
  const int process = world_.platform().add_process(
      {"c" + std::to_string(cluster), platform_.node_of(device), {device}});
  world_.platform().run_as(process, [&] { dist->init(options); });
  return dist;
}

impl::LLMClusterInfo ImplWorld::cluster_info(std::uint64_t cluster, int device,
                                             int client_device) const {
  return server_info(platform_, cluster, device, client_device);
}

void ImplWorld::link(impl::LLMDataDist& client, std::uint64_t cluster, int device) {
  const auto [code, codes] = client.link_clusters({cluster_info(cluster, device)});
  ASSERT_EQ(code, impl::LLMStatusCode::LLM_SUCCESS);
}

std::vector<std::uint64_t> ImplWorld::alloc_tensors(int device, const impl::CacheDesc& desc,
                                                    std::uint32_t seed, bool fill) {
  std::vector<std::uint64_t> addrs;
  for (std::uint32_t i = 0; i < desc.num_tensors(); ++i) {
    const auto addr = platform_.allocate(device, desc.placement(), desc.size(), 2 * kMiB);
    EXPECT_TRUE(addr);
    if (fill) write(*addr, pattern(desc.size(), seed * 1000 + i));
    addrs.push_back(*addr);
  }
  return addrs;
}

TestCache ImplWorld::register_cache(impl::LLMDataDist& dist, int device,
                                    const impl::CacheDesc& desc, std::uint32_t seed, bool blocks,
                                    std::optional<impl::BlocksCacheKey> key,
                                    std::vector<impl::CacheKey> keys) {
  TestCache c{impl::CacheView{-1, desc}, alloc_tensors(device, desc, seed)};
  c.view = blocks ? dist.cache_manager().register_blocks_cache(desc, c.addrs, key)
                  : dist.cache_manager().register_cache(desc, c.addrs, keys);
  return c;
}

std::vector<std::uint8_t> ImplWorld::read(std::uint64_t addr, std::uint64_t len) const {
  std::vector<std::uint8_t> out(len);
  platform_.read(addr, out.data(), len);
  return out;
}

void ImplWorld::write(std::uint64_t addr, const std::vector<std::uint8_t>& bytes) {
  platform_.write(addr, bytes.data(), bytes.size());
}

std::string ImplWorld::rank_table(const std::vector<int>& devices) const {
  std::string servers;
  for (std::size_t i = 0; i < devices.size(); ++i) {
    if (i > 0) servers += ",";
    servers += R"({"server_id":")" + std::to_string(i) + R"(","device":[{"device_id":")" +
               std::to_string(devices[i] % 8) + R"(","device_ip":")" +
               platform_.device_ip(devices[i]) + R"(","rank_id":")" + std::to_string(i) + R"("}]})";
  }
  return R"({"version":"1.2","status":"completed","server_count":")" +
         std::to_string(devices.size()) + R"(","server_list":[)" + servers + "]}";
}

std::vector<std::uint8_t> ImplWorld::snapshot(const TestCache& cache) const {
  std::vector<std::uint8_t> out;
  for (std::uint64_t a : cache.addrs) {
    const auto t = read(a, cache.view.desc.size());
    out.insert(out.end(), t.begin(), t.end());
  }
  return out;
}

void splice(std::vector<std::uint8_t>& dst, std::uint64_t dst_off,
            const std::vector<std::uint8_t>& src, std::uint64_t src_off, std::uint64_t len) {
  std::copy(src.begin() + static_cast<std::ptrdiff_t>(src_off),
            src.begin() + static_cast<std::ptrdiff_t>(src_off + len),
            dst.begin() + static_cast<std::ptrdiff_t>(dst_off));
}

impl::CacheDesc int8_desc(std::int64_t num_tensors, std::int64_t rows, std::int64_t row_bytes,
                          impl::Placement placement) {
  return impl::CacheDesc(num_tensors, {rows, row_bytes}, impl::DataType::DT_INT8, placement);
}

}  // namespace kvsim::sim::testing
