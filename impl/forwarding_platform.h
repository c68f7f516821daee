// A Platform that forwards every call to another: the base of platform decorators (recorders
// in tests, fault-injecting mutants in the property suites).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "impl/platform.h"

namespace kvsim::impl {

/// Forwards every call to `inner`; decorators override what they change.
class ForwardingPlatform : public Platform {
 public:
  explicit ForwardingPlatform(Platform& inner) : inner_(inner) {}
  std::optional<std::uint64_t> allocate(int device, Placement placement, std::uint64_t size,
                                        std::uint64_t alignment) override {
    return inner_.allocate(device, placement, size, alignment);
  }
  bool free(std::uint64_t addr) override { return inner_.free(addr); }
  std::optional<MemoryLocation> locate(std::uint64_t addr, std::uint64_t len) const override {
    return inner_.locate(addr, len);
  }
  void write(std::uint64_t addr, const std::uint8_t* data, std::uint64_t len) override {
    inner_.write(addr, data, len);
  }
  void read(std::uint64_t addr, std::uint8_t* out, std::uint64_t len) const override {
    inner_.read(addr, out, len);
  }
  void post(int device, int engine, std::vector<CopyDescriptor> descriptors,
            std::function<void(const CopyOutcome&)> done) override {
    inner_.post(device, engine, std::move(descriptors), std::move(done));
  }
  int engines(int device) const override { return inner_.engines(device); }
  Time now() const override { return inner_.now(); }
  void sleep(Time duration) override { inner_.sleep(duration); }
  std::unique_ptr<Signal> make_signal() override { return inner_.make_signal(); }
  std::unique_ptr<Mutex> make_mutex(const std::string& name) override {
    return inner_.make_mutex(name);
  }
  void spawn(const std::string& name, std::function<void()> job) override {
    inner_.spawn(name, std::move(job));
  }
  bool on_job() const override { return inner_.on_job(); }
  int current_process() const override { return inner_.current_process(); }
  int resolve_device(int logical) const override { return inner_.resolve_device(logical); }
  int device_count() const override { return inner_.device_count(); }
  std::string device_ip(int device) const override { return inner_.device_ip(device); }
  int device_by_ip(const std::string& ip) const override { return inner_.device_by_ip(ip); }
  int node_of(int device) const override { return inner_.node_of(device); }
  std::string host_ip(int node) const override { return inner_.host_ip(node); }
  int node_by_host_ip(const std::string& ip) const override { return inner_.node_by_host_ip(ip); }
  Time round_trip(int a, int b) const override { return inner_.round_trip(a, b); }
  bool path_up(int a, int b) const override { return inner_.path_up(a, b); }

 protected:
  Platform& inner_;
};

}  // namespace kvsim::impl
