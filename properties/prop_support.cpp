#include "properties/prop_support.h"
#include "sim/engine_setup.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

namespace kvsim::impl {

void showValue(LLMStatusCode code, std::ostream& os) {
  os << to_string(code);
}

void showValue(const CopyDescriptor& d, std::ostream& os) {
  os << "{src " << d.src_addr << ", dst " << d.dst_addr << ", len " << d.length << "}";
}

void showValue(const std::optional<LLMStatusCode>& r, std::ostream& os) {
  if (r) {
    os << to_string(*r);
  } else {
    os << "None";
  }
}

}  // namespace kvsim::impl

namespace kvsim::properties {

namespace {

constexpr std::uint64_t kAlign = 2ull << 20;

// A mutex that never excludes anyone (the kIgnoreLock mutant).
class OpenMutex final : public impl::Mutex {
 public:
  void lock() override { ++holders_; }
  bool try_lock() override {
    ++holders_;
    return true;
  }
  void unlock() override { --holders_; }
  bool locked() const override { return holders_ > 0; }

 private:
  int holders_ = 0;
};

}  // namespace

void Recorder::post(int device, int engine, std::vector<CopyDescriptor> descriptors,
                    std::function<void(const impl::CopyOutcome&)> done) {
  const std::size_t index = batches.size();
  batches.push_back({device, descriptors, inner_.now(), std::nullopt, false});
  inner_.post(device, engine, std::move(descriptors),
              [this, index, done = std::move(done)](const impl::CopyOutcome& outcome) {
                batches[index].finished = inner_.now();
                batches[index].ok = outcome.ok;
                done(outcome);
              });
}

PlatformMutant platform_mutant_from_env() {
  const char* v = std::getenv("KVSIM_PLATFORM_MUTANT");
  const std::string s = v == nullptr ? "" : v;
  if (s.empty() || s == "none") return PlatformMutant::kNone;
  if (s == "reorder") return PlatformMutant::kReorder;
  if (s == "drop") return PlatformMutant::kDrop;
  if (s == "duplicate") return PlatformMutant::kDuplicate;
  if (s == "shift") return PlatformMutant::kShift;
  if (s == "delay") return PlatformMutant::kDelay;
  if (s == "ignore_lock") return PlatformMutant::kIgnoreLock;
  throw std::invalid_argument("KVSIM_PLATFORM_MUTANT: unknown mutant '" + s + "'");
}

void MutantPlatform::post(int device, int engine, std::vector<CopyDescriptor> descriptors,
                          std::function<void(const impl::CopyOutcome&)> done) {
  switch (mutant_) {
    case PlatformMutant::kNone:
    case PlatformMutant::kIgnoreLock:
      break;
    case PlatformMutant::kReorder:
      std::reverse(descriptors.begin(), descriptors.end());
      break;
    case PlatformMutant::kDrop:
      if (!descriptors.empty()) descriptors.pop_back();
      if (descriptors.empty()) {
        done(impl::CopyOutcome{true, "", 0});
        return;
      }
      break;
    case PlatformMutant::kDuplicate:
      if (!descriptors.empty()) {
        const CopyDescriptor first = descriptors.front();
        inner_.post(device, engine, std::move(descriptors),
                    [this, device, engine, first, done](const impl::CopyOutcome& outcome) {
                      inner_.post(device, engine, {first},
                                  [done, outcome](const impl::CopyOutcome&) { done(outcome); });
                    });
        return;
      }
      break;
    case PlatformMutant::kShift:
      if (!descriptors.empty()) {
        CopyDescriptor& d = descriptors.front();
        d.dst_addr = inner_.locate(d.dst_addr + 1, d.length) ? d.dst_addr + 1 : d.dst_addr - 1;
      }
      break;
    case PlatformMutant::kDelay: {
      inner_.post(device, engine, std::move(descriptors),
                  [this, done](const impl::CopyOutcome& outcome) {
                    inner_.spawn("late_completion", [this, done, outcome] {
                      inner_.sleep(3 * impl::from_ms(kSyncTimeoutMs));
                      done(outcome);
                    });
                  });
      return;
    }
  }
  inner_.post(device, engine, std::move(descriptors), std::move(done));
}

std::unique_ptr<impl::Mutex> MutantPlatform::make_mutex(const std::string& name) {
  if (mutant_ == PlatformMutant::kIgnoreLock) return std::make_unique<OpenMutex>();
  return inner_.make_mutex(name);
}

Harness::Harness()
    : world_("atlas-a2"),
      recorder_(world_.platform()),
      mutant_(recorder_, platform_mutant_from_env()) {}

Harness::~Harness() = default;

std::unique_ptr<impl::LLMDataDist> Harness::make_dist(impl::LLMRole role, std::uint64_t cluster,
                                                      int device, bool listen,
                                                      std::map<std::string, std::string> extra) {
  std::map<std::string, std::string> options = sim::engine_options(platform(), device, listen);
  for (auto& [k, v] : extra) options[k] = v;
  return make_dist_with(role, cluster, device, std::move(options));
}

std::unique_ptr<impl::LLMDataDist> Harness::make_dist_with(
    impl::LLMRole role, std::uint64_t cluster, int device,
    std::map<std::string, std::string> options) {
  auto dist = std::make_unique<impl::LLMDataDist>(platform(), world_.directory(), role, cluster);
  options[impl::kOptionDeviceId] = "0";
  options.emplace(impl::kOptionSyncKvCacheWaitTime, std::to_string(kSyncTimeoutMs));
  // One host process per engine, seeing its device as device 0, as on hardware.
  const int process = world_.platform().add_process(
      {"c" + std::to_string(cluster), recorder_.node_of(device), {device}});
  processes_[cluster] = process;
  world_.platform().run_as(process, [&] { dist->init(options); });
  return dist;
}

std::string Harness::listen_address(int device) const {
  return recorder_.host_ip(recorder_.node_of(device)) + ":" +
         std::to_string(sim::listen_port(device));
}

int Harness::process_of(std::uint64_t cluster) const {
  const auto it = processes_.find(cluster);
  return it == processes_.end() ? -1 : it->second;
}

impl::LLMClusterInfo Harness::cluster_info(std::uint64_t cluster, int device,
                                           int client_device) const {
  return sim::server_info(recorder_, cluster, device, client_device);
}

LLMStatusCode Harness::link(impl::LLMDataDist& client, std::uint64_t cluster, int device) {
  return client.link_clusters({cluster_info(cluster, device)}).first;
}

std::uint64_t Harness::alloc(int device, std::uint64_t size, std::uint64_t seed) {
  const auto addr = recorder_.allocate(device, impl::Placement::DEVICE, size, kAlign);
  if (!addr) throw std::runtime_error("Harness::alloc: out of device memory");
  write(*addr, pattern(size, seed));
  return *addr;
}

std::vector<std::uint8_t> Harness::read(std::uint64_t addr, std::uint64_t len) const {
  std::vector<std::uint8_t> out(len);
  recorder_.read(addr, out.data(), len);
  return out;
}

void Harness::write(std::uint64_t addr, const std::vector<std::uint8_t>& bytes) {
  recorder_.write(addr, bytes.data(), bytes.size());
}

std::vector<std::uint8_t> pattern(std::uint64_t size, std::uint64_t seed) {
  std::vector<std::uint8_t> out(size);
  auto x = static_cast<std::uint32_t>(seed * 2654435761u + 12345u);
  for (std::uint64_t i = 0; i < size; ++i) {
    x = x * 1103515245u + 12345u;
    out[i] = static_cast<std::uint8_t>(x >> 24);
  }
  return out;
}

CallOutcome outcome_of(const std::function<void()>& call) {
  using K = CallOutcome::Kind;
  try {
    call();
    return {};
  } catch (const impl::LLMException& e) {
    return {K::kLLMException, e.status_code(), e.what()};
  } catch (const impl::TypeError& e) {
    return {K::kTypeError, LLMStatusCode::LLM_SUCCESS, e.what()};
  } catch (const impl::ValueError& e) {
    return {K::kValueError, LLMStatusCode::LLM_SUCCESS, e.what()};
  } catch (const std::exception& e) {
    return {K::kOther, LLMStatusCode::LLM_SUCCESS, e.what()};
  }
}

LLMStatusCode status_of(const std::function<void()>& call) {
  const CallOutcome o = outcome_of(call);
  if (o.kind != CallOutcome::Kind::kOk && o.kind != CallOutcome::Kind::kLLMException) {
    throw std::runtime_error("unexpected exception: " + o.what);
  }
  return o.code;
}

CallOutcome llm_outcome(LLMStatusCode code) {
  if (code == LLMStatusCode::LLM_SUCCESS) return {};
  return {CallOutcome::Kind::kLLMException, code, ""};
}

void showValue(const CallOutcome& o, std::ostream& os) {
  switch (o.kind) {
    case CallOutcome::Kind::kOk:
      os << "ok";
      break;
    case CallOutcome::Kind::kTypeError:
      os << "TypeError";
      break;
    case CallOutcome::Kind::kValueError:
      os << "ValueError";
      break;
    case CallOutcome::Kind::kLLMException:
      os << "LLMException(" << impl::to_string(o.code) << ")";
      break;
    case CallOutcome::Kind::kOther:
      os << "other exception";
      break;
  }
  if (!o.what.empty()) os << ": " << o.what;
}

std::string show_result(const std::optional<LLMStatusCode>& r) {
  return r ? std::string(impl::to_string(*r)) : "None";
}

std::string show_batches(const std::vector<Batch>& batches) {
  std::ostringstream os;
  for (const Batch& b : batches) {
    os << "  t=" << b.posted / kUs << "us dev" << b.device << " [";
    for (std::size_t i = 0; i < b.descriptors.size() && i < 8; ++i) {
      const CopyDescriptor& d = b.descriptors[i];
      os << (i ? ", " : "") << std::hex << d.src_addr << "->" << d.dst_addr << std::dec << " +"
         << d.length;
    }
    if (b.descriptors.size() > 8) os << ", ... " << b.descriptors.size() << " in all";
    os << "]" << (b.ok ? "" : " FAILED") << "\n";
  }
  return os.str();
}

}  // namespace kvsim::properties
