// register_cache / register_blocks_cache / create_cpu_cache argument rules (§4, §2.2).
#include <gtest/gtest.h>

#include <vector>

#include "impl/tests/expect_error.h"
#include "impl/validation.h"

namespace kvsim::impl {
namespace {

using testing::Raises;
using testing::RaisesParamInvalid;

constexpr std::uint64_t kMiB = 1ull << 20;
constexpr std::uint64_t kGiB = 1ull << 30;

std::vector<std::uint64_t> aligned_addrs(std::size_t n) {
  std::vector<std::uint64_t> out;
  for (std::size_t i = 0; i < n; ++i) out.push_back((i + 1) * 64 * kMiB);
  return out;
}

class RegisterValidation : public ::testing::Test {
 protected:
  // 4 tensors of 1 MiB each.
  CacheDesc device_{4, {256, 2048}, DataType::DT_FLOAT16};
  CacheDesc host_{4, {256, 2048}, DataType::DT_FLOAT16, Placement::HOST};
  RegistrationTotals totals_;
  RegistrationLimits limits_;

  RegisterArgs args(const CacheDesc& desc) {
    RegisterArgs a;
    a.cache_desc = &desc;
    a.addrs = aligned_addrs(desc.num_tensors());
    return a;
  }
  bool validate(const RegisterArgs& a, bool linked = false) {
    return validate_register_cache(a, linked, totals_, limits_);
  }
};

TEST_F(RegisterValidation, CacheDescNoneIsTypeError) {
  RegisterArgs a = args(device_);
  a.cache_desc = nullptr;
  EXPECT_TRUE(Raises<TypeError>([&] { validate(a); }, "cache_desc"));
}

TEST_F(RegisterValidation, RemoteAccessibleTrueAfterLinkIsRejected) {
  RegisterArgs a = args(device_);
  a.remote_accessible = true;
  EXPECT_TRUE(RaisesParamInvalid([&] { validate(a, true); }, "remote_accessible", "after link"));
  EXPECT_TRUE(validate(a, false));
}

TEST_F(RegisterValidation, DefaultRemoteAccessibleFollowsPlacementAndLinks) {
  EXPECT_TRUE(validate(args(device_)));
  EXPECT_FALSE(validate(args(host_)));
  EXPECT_FALSE(validate(args(device_), true));
  RegisterArgs a = args(device_);
  a.remote_accessible = false;
  EXPECT_FALSE(validate(a));
}

TEST_F(RegisterValidation, AddrsMustNotBeEmpty) {
  RegisterArgs a = args(device_);
  a.addrs.clear();
  EXPECT_TRUE(RaisesParamInvalid([&] { validate(a); }, "addrs", "empty"));
}

TEST_F(RegisterValidation, OneAddressPerTensorForBothKinds) {
  RegisterArgs a = args(device_);
  a.addrs.pop_back();
  EXPECT_TRUE(RaisesParamInvalid([&] { validate(a); }, "addrs", "num_tensors 4"));
  a.is_blocks_cache = true;
  EXPECT_TRUE(RaisesParamInvalid([&] { validate(a); }, "addrs", "num_tensors 4"));
}

TEST_F(RegisterValidation, NoZeroAddress) {
  RegisterArgs a = args(device_);
  a.addrs[2] = 0;
  EXPECT_TRUE(RaisesParamInvalid([&] { validate(a); }, "addrs[2]", "zero"));
}

TEST_F(RegisterValidation, AtMost240AddressesCombined) {
  totals_.addresses = 236;
  EXPECT_NO_THROW(validate(args(device_)));
  totals_.addresses = 237;
  EXPECT_TRUE(RaisesParamInvalid([&] { validate(args(device_)); }, "addrs", "above 240"));
}

TEST_F(RegisterValidation, DeviceRegistrationAtMost50GiB) {
  totals_.device_bytes = 50 * kGiB - 4 * kMiB;
  EXPECT_NO_THROW(validate(args(device_)));
  totals_.device_bytes += 1;
  EXPECT_TRUE(RaisesParamInvalid([&] { validate(args(device_)); }, "cache_desc",
                                 "device registration limit"));
  totals_.device_bytes = 0;
  const CacheDesc big(2, {26, 1024, 1024, 1024}, DataType::DT_INT8);  // 2 x 26 GiB
  EXPECT_TRUE(RaisesParamInvalid([&] { validate(args(big)); }, "cache_desc"));
}

TEST_F(RegisterValidation, HostRegistrationAtMost20GiBUnlessRaised) {
  totals_.host_bytes = 20 * kGiB - 3 * kMiB;
  EXPECT_TRUE(
      RaisesParamInvalid([&] { validate(args(host_)); }, "cache_desc", "host registration limit"));
  totals_.device_bytes = 50 * kGiB;  // device totals do not count against host memory
  limits_.max_host_bytes = 1024 * kGiB;
  EXPECT_NO_THROW(validate(args(host_)));
}

TEST_F(RegisterValidation, HccsAlignmentIsARuleTheCallerEnables) {
  RegisterArgs a = args(device_);
  a.addrs[1] += 4096;
  EXPECT_NO_THROW(validate(a));
  limits_.require_hccs_alignment = true;
  EXPECT_TRUE(RaisesParamInvalid([&] { validate(a); }, "addrs[1]", "aligned to 2097152"));
  RegisterArgs h = args(host_);
  h.addrs[1] += 4096;
  EXPECT_NO_THROW(validate(h));  // HCCS D2D alignment concerns device memory only
}

TEST(CreateCpuCache, PlacementHostAndOneAddressPerTensor) {
  const CacheDesc device(2, {4, 8}, DataType::DT_INT8);
  const CacheDesc host(2, {4, 8}, DataType::DT_INT8, Placement::HOST);
  EXPECT_TRUE(RaisesParamInvalid(
      [&] {
        validate_create_cpu_cache(device, {1, 2});
      },
      "cache_desc.placement", "HOST"));
  EXPECT_TRUE(RaisesParamInvalid([&] { validate_create_cpu_cache(host, {1}); }, "addrs"));
  EXPECT_NO_THROW(validate_create_cpu_cache(host, {1, 2}));
}

}  // namespace
}  // namespace kvsim::impl
