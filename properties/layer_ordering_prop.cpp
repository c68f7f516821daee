// Property 1, layer ordering (spec §3.2, §3.3): random layer counts, TransferConfigs (layer
// ranges, source rows, destinations, one unlinked) and synchronizers (True after a delay, or
// False at a layer). synchronize_layer is called exactly for the covered layers, ascending, once
// each; no batch of layer L is posted before synchronize_layer(L) returned True; nothing of a
// layer at or after a False is sent; the posted descriptors, the destination bytes and every
// result are those of the §3.2 loop run on a pure model.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <set>
#include <sstream>

#include "properties/prop_support.h"

namespace kvsim::properties {
namespace {

using impl::LayerRange;
using impl::LLMRole;

/// One TransferConfig: src_layer_range(start, stop), source row, destination cluster.
struct Config {
  int start = 0;
  int stop = 1;
  int row = 0;
  int cluster = 2;  ///< 2, 3, 4 are linked decoders; 5 is not linked.
};

/// A generated case.
struct Case {
  int layers = 1;
  int rows = 1;
  int row_bytes = 16;
  std::vector<Config> configs;
  std::optional<int> false_at;  ///< synchronize_layer returns False at this layer
  std::vector<int> delay_us;    ///< simulated time each synchronize_layer(L) takes
};

void showValue(const Case& c, std::ostream& os) {
  os << c.layers << " layers of " << c.rows << " rows x " << c.row_bytes << " B; configs:";
  for (std::size_t i = 0; i < c.configs.size(); ++i) {
    const Config& k = c.configs[i];
    os << " [" << i << "] cluster " << k.cluster << (k.cluster == 5 ? " (unlinked)" : "")
       << " range(" << k.start << ", " << k.stop << ") row " << k.row << ";";
  }
  os << " synchronizer: "
     << (c.false_at ? "False at layer " + std::to_string(*c.false_at) : std::string("True"));
  os << ", delays (us) [";
  for (std::size_t i = 0; i < c.delay_us.size(); ++i) os << (i ? " " : "") << c.delay_us[i];
  os << "]";
}

rc::Gen<Config> gen_config(int layers, int rows) {
  return rc::gen::mapcat(rc::gen::inRange(0, layers), [layers, rows](int start) {
    return rc::gen::build<Config>(
        rc::gen::set(&Config::start, rc::gen::just(start)),
        rc::gen::set(&Config::stop, rc::gen::inRange(start + 1, layers + 1)),
        rc::gen::set(&Config::row, rc::gen::inRange(0, rows)),
        rc::gen::set(&Config::cluster,
                     rc::gen::weightedElement<int>({{6, 2}, {3, 3}, {3, 4}, {1, 5}})));
  });
}

rc::Gen<Case> gen_case() {
  return rc::gen::mapcat(
      rc::gen::pair(rc::gen::inRange(1, 129), rc::gen::inRange(1, 4)), [](std::pair<int, int> lr) {
        const int layers = lr.first, rows = lr.second;
        return rc::gen::build<Case>(
            rc::gen::set(&Case::layers, rc::gen::just(layers)),
            rc::gen::set(&Case::rows, rc::gen::just(rows)),
            rc::gen::set(&Case::row_bytes,
                         rc::gen::map(rc::gen::inRange(1, 17), [](int n) { return 16 * n; })),
            rc::gen::set(&Case::configs,
                         rc::gen::mapcat(rc::gen::inRange(1, 5),
                                         [layers, rows](int n) {
                                           return rc::gen::container<std::vector<Config>>(
                                               static_cast<std::size_t>(n),
                                               gen_config(layers, rows));
                                         })),
            rc::gen::set(&Case::false_at, rc::gen::map(rc::gen::maybe(rc::gen::inRange(0, layers)),
                                                       [](const rc::Maybe<int>& m) {
                                                         return m ? std::optional<int>(*m)
                                                                  : std::nullopt;
                                                       })),
            rc::gen::set(&Case::delay_us,
                         rc::gen::container<std::vector<int>>(static_cast<std::size_t>(layers),
                                                              rc::gen::inRange(0, 30))));
      });
}

int device_of(int cluster) {
  return cluster == 2 ? 8 : cluster == 3 ? 1 : 9;  // RoCE, HCCS, RoCE
}

/// The §3.2 loop and §3.3 results on a pure model.
struct Expected {
  std::vector<std::int64_t> sync_calls;
  std::vector<std::pair<std::size_t, int>> sent;  ///< (config, layer), in order
  std::vector<std::optional<LLMStatusCode>> results;
  LLMStatusCode synchronize = LLMStatusCode::LLM_SUCCESS;
};

Expected model(const Case& c) {
  Expected e;
  std::map<int, LLMStatusCode> slots;  // by dst_cluster_id (§3.3 [I])
  for (int layer = 0; layer < c.layers; ++layer) {
    std::vector<std::size_t> covering;
    for (std::size_t i = 0; i < c.configs.size(); ++i) {
      if (c.configs[i].start <= layer && layer < c.configs[i].stop) covering.push_back(i);
    }
    if (covering.empty()) continue;
    e.sync_calls.push_back(layer);
    bool stop = false;
    if (c.false_at == layer) {
      for (std::size_t i : covering) slots[c.configs[i].cluster] = LLMStatusCode::LLM_PARAM_INVALID;
      stop = true;
    }
    for (std::size_t i = 0; !stop && i < covering.size(); ++i) {
      const Config& k = c.configs[covering[i]];
      if (k.cluster == 5) {
        slots[k.cluster] = LLMStatusCode::LLM_NOT_YET_LINK;
        stop = true;
        break;
      }
      e.sent.emplace_back(covering[i], layer);
      if (layer == k.stop - 1) slots[k.cluster] = LLMStatusCode::LLM_SUCCESS;
    }
    if (stop) break;
  }
  for (const Config& k : c.configs) {
    const auto it = slots.find(k.cluster);
    e.results.push_back(it == slots.end() ? std::nullopt
                                          : std::optional<LLMStatusCode>(it->second));
  }
  for (const auto& r : e.results) {
    if (r && *r != LLMStatusCode::LLM_SUCCESS) {
      e.synchronize = *r;
      break;
    }
  }
  return e;
}

/// Logs each call with its entry and return times.
class TimedSync final : public impl::LayerSynchronizer {
 public:
  TimedSync(impl::Platform& p, const Case& c) : platform_(p), case_(c) {}
  struct Call {
    std::int64_t layer;
    Time entered;
    Time returned;
    bool answer;
  };
  bool synchronize_layer(std::int64_t layer, std::optional<std::int64_t>) override {
    const Time entered = platform_.now();
    const int delay = case_.delay_us[static_cast<std::size_t>(layer)];
    if (delay > 0) platform_.sleep(static_cast<Time>(delay) * kUs);
    const bool answer = case_.false_at != layer;
    calls.push_back({layer, entered, platform_.now(), answer});
    return answer;
  }
  std::vector<Call> calls;

 private:
  impl::Platform& platform_;
  const Case& case_;
};

RC_GTEST_PROP(LayerOrdering, SynchronizeBeforeSendAndResultsPerSpec, ()) {
  const Case c = *gen_case();
  Harness h;
  auto p =
      h.make_dist(LLMRole::PROMPT, 1, 0, false,
                  {{impl::kOptionMemPoolConfig, R"({"memory_size": 4194304, "page_shift": 10})"}});
  std::vector<std::unique_ptr<impl::LLMDataDist>> decoders;
  for (int cluster = 2; cluster <= 4; ++cluster) {
    decoders.push_back(h.make_dist(LLMRole::DECODER, static_cast<std::uint64_t>(cluster),
                                   device_of(cluster), true));
    RC_ASSERT(h.link(*p, static_cast<std::uint64_t>(cluster), device_of(cluster)) ==
              LLMStatusCode::LLM_SUCCESS);
  }
  const impl::CacheDesc desc(2 * c.layers, {c.rows, c.row_bytes}, impl::DataType::DT_INT8);
  const impl::CacheView src = p->cache_manager().allocate_cache(desc);
  const std::uint64_t tensor = desc.size();
  for (std::size_t t = 0; t < src.tensor_addrs.size(); ++t) {
    h.write(src.tensor_addrs[t], pattern(tensor, 1000 + t));
  }
  const auto stride = static_cast<std::uint64_t>(c.row_bytes);
  // Config i writes layer L, tensor t (K=0, V=1) to slot ((L - start) * 2 + t) of its buffer.
  std::vector<std::uint64_t> buffers;
  std::vector<impl::AnyTransferConfig> configs;
  for (std::size_t i = 0; i < c.configs.size(); ++i) {
    const Config& k = c.configs[i];
    const auto slots = static_cast<std::uint64_t>(2 * (k.stop - k.start));
    buffers.push_back(h.alloc(device_of(k.cluster == 5 ? 2 : k.cluster), slots * stride, 50 + i));
    std::vector<std::uint64_t> addrs;
    for (std::uint64_t s = 0; s < slots; ++s) addrs.push_back(buffers.back() + s * stride);
    configs.emplace_back(impl::TransferConfig(static_cast<std::uint64_t>(k.cluster), addrs,
                                              LayerRange{k.start, k.stop}, k.row));
  }
  h.recorder().batches.clear();
  auto sync = std::make_shared<TimedSync>(h.platform(), c);
  auto task = p->cache_manager().transfer_cache_async(src, sync, configs);
  const LLMStatusCode synchronized = task.synchronize();
  const auto results = task.get_results();
  const Expected e = model(c);

  std::ostringstream events;
  for (const auto& call : sync->calls) {
    events << "  synchronize_layer(" << call.layer << ") " << call.entered / kUs << "-"
           << call.returned / kUs << "us -> " << (call.answer ? "True" : "False") << "\n";
  }
  RC_LOG() << "synchronizer calls:\n"
           << events.str() << "batches:\n"
           << show_batches(h.recorder().batches);

  std::vector<std::int64_t> called;
  for (const auto& call : sync->calls) called.push_back(call.layer);
  RC_ASSERT(called == e.sync_calls);
  // Each batch's layer, by its first source address; it must follow a True for that layer.
  for (const Batch& b : h.recorder().batches) {
    RC_ASSERT(!b.descriptors.empty());
    std::optional<std::int64_t> layer;
    for (std::size_t t = 0; t < src.tensor_addrs.size(); ++t) {
      const std::uint64_t a = b.descriptors.front().src_addr;
      if (a >= src.tensor_addrs[t] && a < src.tensor_addrs[t] + tensor) {
        layer = static_cast<std::int64_t>(t / 2);
      }
    }
    RC_ASSERT(layer.has_value());
    bool released = false;
    for (const auto& call : sync->calls) {
      if (call.layer == *layer && call.answer && call.returned <= b.posted) released = true;
    }
    RC_LOG() << "batch at " << b.posted / kUs << "us carries layer " << *layer << "\n";
    RC_ASSERT(released);
  }
  RC_ASSERT(results == e.results);
  RC_ASSERT(synchronized == e.synchronize);

  // Exactly one batch (K then V) per sent (config, layer), in the loop's order.
  std::vector<std::vector<CopyDescriptor>> expected_batches;
  for (const auto& [i, layer] : e.sent) {
    const Config& k = c.configs[i];
    std::vector<CopyDescriptor> batch;
    for (std::uint64_t t = 0; t < 2; ++t) {
      const std::uint64_t slot = static_cast<std::uint64_t>(2 * (layer - k.start)) + t;
      batch.push_back({src.tensor_addrs[static_cast<std::size_t>(2 * layer) + t] +
                           static_cast<std::uint64_t>(k.row) * stride,
                       buffers[i] + slot * stride, stride});
    }
    expected_batches.push_back(batch);
  }
  std::vector<std::vector<CopyDescriptor>> posted;
  for (const Batch& b : h.recorder().batches) {
    RC_ASSERT(b.device == 0);
    RC_ASSERT(b.ok);
    posted.push_back(b.descriptors);
  }
  RC_ASSERT(posted == expected_batches);

  // Destination bytes: sent slots hold the source row, every other byte is untouched.
  std::set<std::pair<std::size_t, int>> sent(e.sent.begin(), e.sent.end());
  for (std::size_t i = 0; i < c.configs.size(); ++i) {
    const Config& k = c.configs[i];
    const auto slots = static_cast<std::uint64_t>(2 * (k.stop - k.start));
    std::vector<std::uint8_t> expected = pattern(slots * stride, 50 + i);
    for (int layer = k.start; layer < k.stop; ++layer) {
      if (sent.count({i, layer}) == 0) continue;
      for (std::uint64_t t = 0; t < 2; ++t) {
        const std::size_t tensor_index = static_cast<std::size_t>(2 * layer) + t;
        const auto bytes = pattern(tensor, 1000 + tensor_index);
        const std::uint64_t slot = static_cast<std::uint64_t>(2 * (layer - k.start)) + t;
        std::copy_n(bytes.begin() + static_cast<std::ptrdiff_t>(k.row) * c.row_bytes, stride,
                    expected.begin() + static_cast<std::ptrdiff_t>(slot * stride));
      }
    }
    RC_ASSERT(h.read(buffers[i], slots * stride) == expected);
  }
  RC_ASSERT(h.job_failures().empty());
}

}  // namespace
}  // namespace kvsim::properties
