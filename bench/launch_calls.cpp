// The cost of a launched program's calls (bench/launch_bench.sh runs it under `kvsim launch
// --wall-clock`, so that std::chrono reads the host's clock): a call the world answers at once
// (aclrtGetDeviceCount), a call that is a barrier of every program (usleep: simulated time
// passes), and 64 KiB and 16 MiB aclrtMemcpy to and from device memory. Prints the median wall
// time of each, in microseconds, over ROUNDS rounds of N calls (N/10, N/200 memcpy pairs).
//   bench_launch_calls N ROUNDS
#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "acl/acl.h"

namespace {

double median_us(int n, int rounds, const std::function<void()>& call) {
  std::vector<double> per_call;
  for (int r = 0; r < rounds; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) call();
    const std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - start;
    per_call.push_back(took.count() / n);
  }
  std::sort(per_call.begin(), per_call.end());
  return per_call[per_call.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 2000;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
  uint32_t count = 0;
  void* device = nullptr;
  std::vector<char> host(64 << 10, 1);
  if (aclrtSetDevice(0) != ACL_SUCCESS ||
      aclrtMalloc(&device, host.size(), ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) {
    std::printf("no device memory\n");
    return 1;
  }
  std::printf("answered at once: %.1f us/call\n",
              median_us(n, rounds, [&count] { (void)aclrtGetDeviceCount(&count); }));
  std::printf("barrier (usleep 1): %.1f us/call\n", median_us(n, rounds, [] { usleep(1); }));
  std::printf(
      "64 KiB memcpy to and from HBM: %.1f us/pair\n", median_us(n / 10, rounds, [&] {
        (void)aclrtMemcpy(device, host.size(), host.data(), host.size(), ACL_MEMCPY_HOST_TO_DEVICE);
        (void)aclrtMemcpy(host.data(), host.size(), device, host.size(), ACL_MEMCPY_DEVICE_TO_HOST);
      }));
  std::vector<char> big(16 << 20, 2);
  void* big_device = nullptr;
  if (aclrtMalloc(&big_device, big.size(), ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) return 1;
  const double big_us = median_us(std::max(1, n / 200), rounds, [&] {
    (void)aclrtMemcpy(big_device, big.size(), big.data(), big.size(), ACL_MEMCPY_HOST_TO_DEVICE);
    (void)aclrtMemcpy(big.data(), big.size(), big_device, big.size(), ACL_MEMCPY_DEVICE_TO_HOST);
  });
  std::printf("16 MiB memcpy to and from HBM: %.1f us/pair (%.2f GB/s)\n", big_us,
              2.0 * static_cast<double>(big.size()) / big_us / 1e3);
  return 0;
}
