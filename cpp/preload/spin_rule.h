// The shim's spin rule (cpp/preload/time_calls.cpp for clock reads, socket_calls.cpp for
// descriptor calls that find nothing to do): a thread that makes `first` such idle moves in a
// row without progress is taken to busy-wait and waits 1 us of simulated time; while it goes on,
// every further `again` moves wait twice as long as the last step, up to 1 ms. Without it a
// busy-wait loop would hold simulated time still (Shadow models unblocked calls' latency for
// the same reason). Touches nothing but its own per-thread counters.
#pragma once

#include <algorithm>
#include <cstdint>

namespace kvsim::cpp::preload {

class SpinRule {
 public:
  constexpr SpinRule(int first, int again) : first_(first), again_(again) {}

  /// One idle move while `mark` (what changes when the thread makes progress) reads as given:
  /// the simulated time to wait now, in picoseconds, or 0.
  std::uint64_t idle(std::uint64_t mark) {
    if (mark != mark_) {
      mark_ = mark;
      count_ = 0;
      step_ps_ = 0;
    }
    if (++count_ <= (step_ps_ == 0 ? first_ : again_)) return 0;
    step_ps_ = step_ps_ == 0 ? kFirstStepPs : std::min(2 * step_ps_, kMaxStepPs);
    count_ = 0;
    return step_ps_;
  }
  /// After the wait idle() asked for: `mark` as it reads now, without ending the spin.
  void waited(std::uint64_t mark) { mark_ = mark; }
  /// The thread made progress: the count starts again.
  void progress() {
    count_ = 0;
    step_ps_ = 0;
  }

 private:
  static constexpr std::uint64_t kFirstStepPs = 1'000'000;    // 1 us
  static constexpr std::uint64_t kMaxStepPs = 1'000'000'000;  // 1 ms
  int first_;
  int again_;
  std::uint64_t mark_ = ~0ull;
  int count_ = 0;
  std::uint64_t step_ps_ = 0;
};

}  // namespace kvsim::cpp::preload
