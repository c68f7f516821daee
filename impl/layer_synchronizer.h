// LayerSynchronizer (spec §2.2): the user's hook that transfer_cache_async's job calls before each
// covered layer goes out (§3.2).
#pragma once

#include <cstdint>
#include <optional>

namespace kvsim::impl {

/// Subclass and implement synchronize_layer. It runs on the task's job and may block in simulated
/// time through the Platform (e.g. wait on a Signal that a simulated prefill sets).
class LayerSynchronizer {
 public:
  virtual ~LayerSynchronizer() = default;
  /// Waits until the model has computed `layer_index`; true starts that layer's transfer, false
  /// aborts the task. `timeout_in_millis` is always None, as in the real library (§3.2).
  virtual bool synchronize_layer(std::int64_t layer_index,
                                 std::optional<std::int64_t> timeout_in_millis) = 0;
};

}  // namespace kvsim::impl
