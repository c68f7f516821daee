// LLMConfig.generate_options and the init-time option parsing of §5.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "impl/tests/expect_error.h"
#include "impl/types.h"

namespace kvsim::impl {
namespace {

using testing::Raises;
using testing::RaisesLLM;
using testing::RaisesParamInvalid;
using Options = std::map<std::string, std::string>;

TEST(LLMConfigTest, UnsetConfigEmitsOnlyMemoryUtilization) {
  const LLMConfig config;
  EXPECT_EQ(config.generate_options(), (Options{{"llm.MemoryUtilization", "0.95"}}));
  EXPECT_EQ(config.link_total_time(), 0);
  EXPECT_EQ(config.link_retry_count(), 1);
  EXPECT_FALSE(config.enable_cache_manager());
}

TEST(LLMConfigTest, EmitsExactlyPythonKeys) {
  LLMConfig config;
  config.set_ge_options({{"ge.flowGraphMemMaxSize", "1024"}, {"llm.SyncKvCacheWaitTime", "7"}});
  config.set_device_id(3);
  config.set_sync_kv_timeout(2500);
  config.set_listen_ip_info("10.0.0.1:26000");
  config.set_enable_cache_manager(true);
  config.set_enable_remote_cache_accessible(false);
  config.set_enable_switch_role(true);
  config.set_mem_pool_cfg(R"({"memory_size": 1073741824})");
  config.set_host_mem_pool_cfg(R"({"memory_size": 2048, "page_shift": 12})");
  config.set_buf_pool_cfg("cfg");
  config.set_link_total_time(30);
  config.set_link_retry_count(5);
  config.set_rdma_traffic_class(132);
  config.set_rdma_service_level(4);
  config.set_local_comm_res("");
  config.set_transfer_backend("hixl");
  config.set_global_resource_config("{}");
  config.set_mem_utilization(0.5);
  config.set_output_max_size(64);
  config.set_deploy_res_path("/res");
  const Options expected = {
      {"ge.flowGraphMemMaxSize", "1024"},
      {"ge.exec.deviceId", "3"},
      {"ge.session_device_id", "3"},
      {"llm.SyncKvCacheWaitTime", "2500"},
      {"llm.listenIpInfo", "10.0.0.1:26000"},
      {"llm.EnableCacheManager", "1"},
      {"llm.EnableRemoteCacheAccessible", "0"},
      {"llm.EnableSwitchRole", "1"},
      {"llm.MemPoolConfig", R"({"memory_size": 1073741824})"},
      {"llm.HostMemPoolConfig", R"({"memory_size": 2048, "page_shift": 12})"},
      {"llm.BufPoolCfg", "cfg"},
      {"llm.LinkTotalTime", "30"},
      {"llm.LinkRetryCount", "5"},
      {"llm.RdmaTrafficClass", "132"},
      {"llm.RdmaServiceLevel", "4"},
      {"llm.LocalCommRes", ""},
      {"llm.TransferBackend", "hixl"},
      {"llm.GlobalResourceConfig", "{}"},
      {"llm.MemoryUtilization", "0.5"},
      {"llm.OutputMaxSize", "64"},
      {"llm.deployResPath", "/res"},
  };
  EXPECT_EQ(config.generate_options(), expected);
}

TEST(LLMConfigTest, MemoryUtilizationPrintsLikePythonFloat) {
  LLMConfig config;
  config.set_mem_utilization(1.0);
  EXPECT_EQ(config.generate_options().at("llm.MemoryUtilization"), "1.0");
  config.set_mem_utilization(0.0);
  EXPECT_EQ(config.generate_options().at("llm.MemoryUtilization"), "0.0");
  config.set_mem_utilization(0.123);
  EXPECT_EQ(config.generate_options().at("llm.MemoryUtilization"), "0.123");
}

TEST(LLMConfigTest, DeviceIdIsNonNegativeInt32) {
  LLMConfig config;
  EXPECT_TRUE(RaisesParamInvalid([&] { config.set_device_id(-1); }, "device_id"));
  EXPECT_TRUE(Raises<ValueError>([&] { config.set_device_id(2147483648); }, "device_id"));
  EXPECT_FALSE(config.device_id().has_value());
}

TEST(LLMConfigTest, SyncKvTimeoutIsPositiveInt32) {
  LLMConfig config;
  EXPECT_TRUE(RaisesParamInvalid([&] { config.set_sync_kv_timeout(0); }, "sync_kv_timeout"));
  EXPECT_TRUE(RaisesParamInvalid([&] { config.set_sync_kv_timeout(-5); }, "sync_kv_timeout"));
  EXPECT_TRUE(
      Raises<ValueError>([&] { config.set_sync_kv_timeout(2147483648); }, "sync_kv_timeout"));
  EXPECT_TRUE(RaisesParamInvalid([&] { config.set_sync_kv_timeout(std::string("12a")); },
                                 "sync_kv_timeout", "digit"));
  EXPECT_TRUE(
      RaisesParamInvalid([&] { config.set_sync_kv_timeout(std::string("0")); }, "sync_kv_timeout"));
  EXPECT_FALSE(config.sync_kv_timeout().has_value());
  config.set_sync_kv_timeout(std::string("33064"));
  EXPECT_EQ(config.generate_options().at("llm.SyncKvCacheWaitTime"), "33064");
}

TEST(LLMConfigTest, LinkOptionRanges) {
  LLMConfig config;
  EXPECT_TRUE(RaisesParamInvalid([&] { config.set_link_total_time(-1); }, "link_total_time"));
  EXPECT_TRUE(
      RaisesParamInvalid([&] { config.set_link_total_time(4294967296); }, "link_total_time"));
  EXPECT_NO_THROW(config.set_link_total_time(4294967295));
  EXPECT_TRUE(RaisesParamInvalid([&] { config.set_link_retry_count(0); }, "link_retry_count"));
  EXPECT_TRUE(RaisesParamInvalid([&] { config.set_link_retry_count(101); }, "link_retry_count"));
  EXPECT_NO_THROW(config.set_link_retry_count(100));
}

TEST(LLMConfigTest, RdmaOptionsAreUint32) {
  LLMConfig config;
  EXPECT_TRUE(Raises<ValueError>([&] { config.set_rdma_traffic_class(-1); }, "rdma_traffic_class"));
  EXPECT_TRUE(
      Raises<ValueError>([&] { config.set_rdma_service_level(4294967296); }, "rdma_service_level"));
}

TEST(LLMConfigTest, MemUtilizationInUnitInterval) {
  LLMConfig config;
  EXPECT_TRUE(RaisesParamInvalid([&] { config.set_mem_utilization(1.5); }, "mem_utilization"));
  EXPECT_TRUE(RaisesParamInvalid([&] { config.set_mem_utilization(-0.1); }, "mem_utilization"));
}

TEST(EngineOptionsTest, DefaultsOfSpec) {
  const EngineOptions o = parse_engine_options({{"ge.exec.deviceId", "2"}});
  EXPECT_EQ(o.device_id, 2);
  EXPECT_EQ(o.sync_kv_timeout_ms, 1000);
  EXPECT_EQ(o.link_total_time_s, 120u);
  EXPECT_EQ(o.link_retry_count, 1u);
  EXPECT_EQ(o.rdma_traffic_class, 132u);
  EXPECT_EQ(o.rdma_service_level, 4u);
  EXPECT_FALSE(o.enable_cache_manager);
  EXPECT_FALSE(o.enable_remote_cache_accessible);
  EXPECT_FALSE(o.enable_switch_role);
  EXPECT_FALSE(o.listen_ip_info.has_value());
  EXPECT_FALSE(o.mem_pool.has_value());
}

TEST(EngineOptionsTest, RoundTripsGenerateOptions) {
  LLMConfig config;
  config.set_device_id(1);
  config.set_sync_kv_timeout(33064);
  config.set_enable_cache_manager(true);
  config.set_enable_remote_cache_accessible(true);
  config.set_listen_ip_info("192.168.1.10:26000");
  config.set_mem_pool_cfg(R"({"memory_size": 104857600, "page_shift": 20})");
  config.set_link_total_time(0);
  config.set_rdma_traffic_class(104);
  const EngineOptions o = parse_engine_options(config.generate_options());
  EXPECT_EQ(o.device_id, 1);
  EXPECT_EQ(o.sync_kv_timeout_ms, 33064);
  EXPECT_TRUE(o.enable_cache_manager);
  EXPECT_TRUE(o.enable_remote_cache_accessible);
  ASSERT_TRUE(o.listen_ip_info.has_value());
  EXPECT_EQ(*o.listen_ip_info, (IpInfo{0x0A01A8C0u, 26000}));
  ASSERT_TRUE(o.mem_pool.has_value());
  EXPECT_EQ(o.mem_pool->memory_size, 104857600u);
  EXPECT_EQ(o.mem_pool->page_shift, 20u);
  EXPECT_EQ(o.link_total_time_s, 120u);
  EXPECT_EQ(o.rdma_traffic_class, 104u);
}

// LLMUtils::ParseDeviceId (hixl llm_utils.cc): device 0 when absent; one device only.
TEST(EngineOptionsTest, DeviceIdDefaultsToZeroAndIsOneDevice) {
  EXPECT_EQ(parse_engine_options({}).device_id, 0);
  EXPECT_EQ(parse_engine_options({{"ge.exec.deviceId", "5"}}).device_id, 5);
  EXPECT_TRUE(RaisesParamInvalid(
      [] {
        parse_engine_options({{"ge.exec.deviceId", "0;1"}});
      },
      "ge.exec.deviceId"));
  EXPECT_EQ(parse_engine_options({{"llm.DeviceId", "5"}}).device_id, 5);
}

TEST(EngineOptionsTest, SyncKvCacheWaitTimeIsPositiveInt32) {
  for (const char* bad : {"0", "-3", "abc", "", "2147483648", "10ms"}) {
    EXPECT_TRUE(RaisesParamInvalid(
        [&] {
          parse_engine_options({{"ge.exec.deviceId", "0"}, {"llm.SyncKvCacheWaitTime", bad}});
        },
        "llm.SyncKvCacheWaitTime"))
        << bad;
  }
}

TEST(EngineOptionsTest, FlagsMustBeZeroOrOne) {
  EXPECT_TRUE(RaisesLLM(
      [] {
        parse_engine_options({{"ge.exec.deviceId", "0"}, {"llm.EnableCacheManager", "2"}});
      },
      LLMStatusCode::LLM_FAILED, "llm.EnableCacheManager"));
  EXPECT_TRUE(RaisesLLM(
      [] {
        parse_engine_options(
            {{"ge.exec.deviceId", "0"}, {"llm.EnableRemoteCacheAccessible", "true"}});
      },
      LLMStatusCode::LLM_FAILED, "llm.EnableRemoteCacheAccessible"));
}

TEST(EngineOptionsTest, LocalCommResEnablesCacheManagerByDefault) {
  const EngineOptions on = parse_engine_options(
      {{"ge.exec.deviceId", "0"}, {"llm.LocalCommRes", R"({"version":"1.3"})"}});
  EXPECT_TRUE(on.enable_cache_manager);
  EXPECT_TRUE(on.enable_remote_cache_accessible);
  const EngineOptions off = parse_engine_options({{"ge.exec.deviceId", "0"},
                                                  {"llm.LocalCommRes", ""},
                                                  {"llm.EnableRemoteCacheAccessible", "0"}});
  EXPECT_TRUE(off.enable_cache_manager);
  EXPECT_FALSE(off.enable_remote_cache_accessible);
}

TEST(EngineOptionsTest, ListenIpInfoIsIpColonPort) {
  const auto parse = [](const char* value) {
    return parse_engine_options({{"ge.exec.deviceId", "0"}, {"llm.listenIpInfo", value}});
  };
  EXPECT_TRUE(RaisesParamInvalid([&] { parse("1.2.3.4"); }, "llm.listenIpInfo", "ip:port"));
  EXPECT_TRUE(RaisesParamInvalid([&] { parse("1.2.3:80"); }, "llm.listenIpInfo", "valid ip"));
  EXPECT_TRUE(RaisesParamInvalid([&] { parse("1.2.3.4:70000"); }, "llm.listenIpInfo"));
  EXPECT_TRUE(RaisesParamInvalid([&] { parse("1.2.3.4:1:2"); }, "llm.listenIpInfo"));
  EXPECT_EQ(*parse("1.2.3.4:80").listen_ip_info, (IpInfo{0x04030201u, 80}));
  const EngineOptions cpp_key =
      parse_engine_options({{"ge.exec.deviceId", "0"}, {"llm.ListenIpInfo", "1.2.3.4:81"}});
  EXPECT_EQ(cpp_key.listen_ip_info->port, 81);
}

TEST(EngineOptionsTest, LinkAndRdmaRanges) {
  const auto parse = [](const char* key, const char* value) {
    return parse_engine_options({{"ge.exec.deviceId", "0"}, {key, value}});
  };
  EXPECT_TRUE(RaisesParamInvalid([&] { parse("llm.LinkRetryCount", "0"); }, "llm.LinkRetryCount"));
  EXPECT_TRUE(
      RaisesParamInvalid([&] { parse("llm.LinkRetryCount", "101"); }, "llm.LinkRetryCount"));
  EXPECT_TRUE(RaisesParamInvalid([&] { parse("llm.LinkTotalTime", "-1"); }, "llm.LinkTotalTime"));
  EXPECT_EQ(parse("llm.LinkTotalTime", "45").link_total_time_s, 45u);
  EXPECT_TRUE(RaisesParamInvalid([&] { parse("llm.RdmaTrafficClass", "130"); },
                                 "llm.RdmaTrafficClass", "multiple of 4"));
  EXPECT_TRUE(
      RaisesParamInvalid([&] { parse("llm.RdmaTrafficClass", "256"); }, "llm.RdmaTrafficClass"));
  EXPECT_EQ(parse("llm.RdmaTrafficClass", "252").rdma_traffic_class, 252u);
  EXPECT_TRUE(
      RaisesParamInvalid([&] { parse("llm.RdmaServiceLevel", "8"); }, "llm.RdmaServiceLevel"));
  EXPECT_EQ(parse("llm.RdmaServiceLevel", "7").rdma_service_level, 7u);
}

TEST(EngineOptionsTest, MemPoolConfigRules) {
  EXPECT_EQ(parse_mem_pool_config("k", R"({"memory_size": 4096})", false).page_shift, 16u);
  EXPECT_EQ(
      parse_mem_pool_config("k", R"( { "page_shift" : 10 , "memory_size":1 } )", false).page_shift,
      10u);
  EXPECT_TRUE(RaisesParamInvalid(
      [] {
        parse_mem_pool_config("llm.MemPoolConfig", R"({"memory_size": 1, "page_shift": 9})", false);
      },
      "llm.MemPoolConfig"));
  EXPECT_TRUE(RaisesParamInvalid(
      [] {
        parse_mem_pool_config("llm.MemPoolConfig", R"({"memory_size": 1, "page_shift": 31})",
                              false);
      },
      "llm.MemPoolConfig"));
  EXPECT_TRUE(RaisesParamInvalid(
      [] { parse_mem_pool_config("llm.MemPoolConfig", R"({"page_shift": 16})", false); },
      "llm.MemPoolConfig", "memory_size"));
  EXPECT_TRUE(RaisesParamInvalid(
      [] { parse_mem_pool_config("llm.MemPoolConfig", R"({"memory_size": 0})", false); },
      "llm.MemPoolConfig"));
  EXPECT_TRUE(RaisesParamInvalid(
      [] { parse_mem_pool_config("llm.MemPoolConfig", R"({"memory_size": "big"})", false); },
      "llm.MemPoolConfig"));
  EXPECT_TRUE(RaisesParamInvalid(
      [] { parse_mem_pool_config("llm.MemPoolConfig", R"({"memory_size": 1)", false); },
      "llm.MemPoolConfig"));
  EXPECT_NO_THROW(parse_mem_pool_config("k", R"({"memory_size": 21474836480})", true));
  EXPECT_TRUE(RaisesParamInvalid(
      [] {
        parse_mem_pool_config("llm.HostMemPoolConfig", R"({"memory_size": 21474836481})", true);
      },
      "llm.HostMemPoolConfig", "20 GiB"));
  EXPECT_TRUE(RaisesParamInvalid(
      [] {
        parse_engine_options({{"ge.exec.deviceId", "0"}, {"llm.HostMemPoolConfig", "{}"}});
      },
      "llm.HostMemPoolConfig"));
}

}  // namespace
}  // namespace kvsim::impl
