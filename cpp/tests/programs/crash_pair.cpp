// A pair in which one process dies mid-transfer (launch_programs_test.py).
//   crash_pair receiver DEVICE LOCAL_IP      listens on 26001, accepts the pusher's control
//                                            connection, then aborts at t = 2.5 s
//   crash_pair pusher DEVICE LOCAL_IP PEER_IP links at t = 1 s and pushes one layer a second
// The pusher prints what each call returns, so that the test sees the library's errors: the
// layers pushed after the crash, the control socket's end of file, and the unlinks.
#include <sys/resource.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "common.h"

namespace {

using namespace example;

constexpr uint16_t kListenPort = 26001;
constexpr uint16_t kControlPort = 26003;
constexpr uint32_t kLayers = 4;
constexpr uint32_t kRows = 8;
constexpr size_t kRowBytes = 256;

bool Setup(LlmDataDist& dist, const std::string& device, const std::string& listen,
           DeviceTensors& tensors, int64_t& cache_id) {
  Options options;
  options[llm_datadist::OPTION_DEVICE_ID] = device.c_str();
  if (!listen.empty()) options[llm_datadist::OPTION_LISTEN_IP_INFO] = listen.c_str();
  EXAMPLE_CHECK(LlmOk(dist.Initialize(options), "Initialize"));
  EXAMPLE_CHECK(tensors.Allocate() && tensors.Fill(listen.empty() ? 1 : 2));
  return RegisterCache(dist, tensors.addrs(), ge::DT_INT32,
                       {kRows, static_cast<int64_t>(kRowBytes / 4)}, cache_id);
}

int Receiver(const std::string& device, const std::string& ip) {
  rlimit no_core{0, 0};
  (void)setrlimit(RLIMIT_CORE, &no_core);
  LlmDataDist dist(1, LlmRole::kDecoder);
  DeviceTensors tensors(kLayers, kRows, kRowBytes);
  int64_t cache_id = -1;
  if (!Setup(dist, device, Endpoint(ip, kListenPort), tensors, cache_id)) return 1;
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(kControlPort);
  inet_pton(AF_INET, ip.c_str(), &addr.sin_addr);
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(listener, 1) != 0) {
    std::printf("[ERROR] control listener: %s\n", std::strerror(errno));
    return 1;
  }
  const int control = accept(listener, nullptr, nullptr);
  std::printf("[INFO] control connection %s\n", control >= 0 ? "accepted" : "failed");
  std::fflush(stdout);
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  std::abort();  // with the link, the cache and the control connection still open
}

int Pusher(const std::string& device, const std::string& ip, const std::string& peer_ip) {
  LlmDataDist dist(0, LlmRole::kPrompt);
  DeviceTensors tensors(kLayers, kRows, kRowBytes);
  int64_t cache_id = -1;
  if (!Setup(dist, device, "", tensors, cache_id)) return 1;
  int control = -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(kControlPort);
  inet_pton(AF_INET, peer_ip.c_str(), &addr.sin_addr);
  for (int attempt = 0; attempt < 100 && control < 0; ++attempt) {
    control = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(control, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      close(control);
      control = -1;
      usleep(10000);
    }
  }
  std::printf("[INFO] control connected: %s\n", control >= 0 ? "yes" : "no");
  sleep(1);
  const ClusterInfo peer = MakePeer(1, ip, 0, peer_ip, kListenPort);
  std::vector<Status> rets;
  const Status linked = dist.LinkLlmClusters({peer}, rets, 1000);
  std::printf("[INFO] link: 0x%X\n", linked);
  Cache cache{};
  cache.cache_id = cache_id;
  CacheIndex remote{};
  remote.cluster_id = 1;
  remote.cache_id = 1;
  for (uint32_t layer = 0; layer < kLayers; ++layer) {
    KvCacheExtParam param{};
    param.src_layer_range = {static_cast<int32_t>(layer), static_cast<int32_t>(layer)};
    param.dst_layer_range = param.src_layer_range;
    param.tensor_num_per_layer = 1;
    timespec t{};
    clock_gettime(CLOCK_MONOTONIC, &t);
    const Status ret = dist.PushKvBlocks(cache, remote, {1}, {2}, param);
    std::printf("[INFO] t=%lld.%03lld s layer %u: 0x%X\n", static_cast<long long>(t.tv_sec),
                static_cast<long long>(t.tv_nsec / 1000000), layer, ret);
    sleep(1);
  }
  char byte = 0;
  const ssize_t got = recv(control, &byte, 1, 0);
  std::printf("[INFO] control recv: %zd\n", got);
  std::printf("[INFO] unlink: 0x%X\n", dist.UnlinkLlmClusters({peer}, rets, 1000, false));
  std::printf("[INFO] forced unlink: 0x%X\n", dist.UnlinkLlmClusters({peer}, rets, 1000, true));
  close(control);
  dist.Finalize();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string role = argc > 1 ? argv[1] : "";
  if (role == "receiver" && argc == 4) return Receiver(argv[2], argv[3]);
  if (role == "pusher" && argc == 5) return Pusher(argv[2], argv[3], argv[4]);
  std::printf("usage: crash_pair receiver DEVICE LOCAL_IP | pusher DEVICE LOCAL_IP PEER_IP\n");
  return 2;
}
