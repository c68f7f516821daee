// The SystemC platform's concurrency primitives, from jobs and from the driver.
#include "sim/systemc_platform.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>

#include "model/preset.h"
#include "model/sim_kernel.h"

namespace kvsim::sim {
namespace {

using impl::kForever;
using impl::Time;
constexpr Time kUs = 1'000'000;

class PlatformTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model::fresh_kernel();
    fabric_ = std::make_unique<model::Fabric>("fabric", model::load_preset("atlas-a2"));
    platform_ = std::make_unique<SystemcPlatform>(*fabric_);
  }
  void TearDown() override {
    EXPECT_TRUE(platform_->job_failures().empty());
    platform_.reset();
    fabric_.reset();
    model::fresh_kernel();
  }
  std::unique_ptr<model::Fabric> fabric_;
  std::unique_ptr<SystemcPlatform> platform_;
};

TEST_F(PlatformTest, DriverWaitReturnsWhenAJobSetsTheSignal) {
  auto signal = platform_->make_signal();
  platform_->spawn("setter", [&] {
    platform_->sleep(30 * kUs);
    signal->set();
  });
  EXPECT_TRUE(signal->wait_for(kForever));
  EXPECT_EQ(platform_->now(), 30 * kUs);
}

TEST_F(PlatformTest, DriverWaitTimesOutAfterExactlyTheTimeout) {
  auto signal = platform_->make_signal();
  platform_->spawn("late", [&] {
    platform_->sleep(100 * kUs);
    signal->set();
  });
  EXPECT_FALSE(signal->wait_for(40 * kUs));
  EXPECT_EQ(platform_->now(), 40 * kUs);
  EXPECT_TRUE(signal->wait_for(kForever));  // the job was not disturbed
  EXPECT_EQ(platform_->now(), 100 * kUs);
}

TEST_F(PlatformTest, WaitThatNothingCanEndReturnsAtOnce) {
  auto signal = platform_->make_signal();
  EXPECT_FALSE(signal->wait_for(kForever));
  EXPECT_EQ(platform_->now(), 0u);
}

TEST_F(PlatformTest, JobWaitsWithTimeoutInSimulatedTime) {
  auto never = platform_->make_signal();
  auto soon = platform_->make_signal();
  std::vector<std::pair<bool, Time>> seen;
  platform_->spawn("waiter", [&] {
    const bool first = never->wait_for(25 * kUs);
    seen.emplace_back(first, platform_->now());
    const bool second = soon->wait_for(kForever);
    seen.emplace_back(second, platform_->now());
  });
  platform_->spawn("setter", [&] {
    platform_->sleep(60 * kUs);
    soon->set();
  });
  platform_->run_until_idle();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], std::make_pair(false, 25 * kUs));
  EXPECT_EQ(seen[1], std::make_pair(true, 60 * kUs));
}

TEST_F(PlatformTest, MutexHandsOverInFifoOrderAcrossSimulatedTime) {
  auto mutex = platform_->make_mutex("link");
  std::vector<std::pair<int, Time>> acquired;
  for (int i = 0; i < 3; ++i) {
    platform_->spawn("worker", [&, i] {
      platform_->sleep(static_cast<Time>(i) * kUs);  // request in order 0, 1, 2
      mutex->lock();
      acquired.emplace_back(i, platform_->now());
      platform_->sleep(10 * kUs);
      mutex->unlock();
    });
  }
  platform_->run_until_idle();
  ASSERT_EQ(acquired.size(), 3u);
  EXPECT_EQ(acquired[0], std::make_pair(0, Time{0}));
  EXPECT_EQ(acquired[1], std::make_pair(1, 10 * kUs));
  EXPECT_EQ(acquired[2], std::make_pair(2, 20 * kUs));
  EXPECT_FALSE(mutex->locked());
}

TEST_F(PlatformTest, DriverLockWaitsForTheJobThatHoldsIt) {
  auto mutex = platform_->make_mutex("transfer");
  platform_->spawn("holder", [&] {
    mutex->lock();
    platform_->sleep(70 * kUs);
    mutex->unlock();
  });
  platform_->sleep(1 * kUs);  // let the holder take it
  EXPECT_TRUE(mutex->locked());
  EXPECT_FALSE(mutex->try_lock());
  mutex->lock();
  EXPECT_EQ(platform_->now(), 70 * kUs);
  mutex->unlock();
}

TEST_F(PlatformTest, PostedCopiesCompleteInSimulatedTimeAndMoveBytes) {
  const auto src = platform_->allocate(0, impl::Placement::DEVICE, 1 << 20, 0);
  const auto dst = platform_->allocate(9, impl::Placement::DEVICE, 1 << 20, 0);
  ASSERT_TRUE(src && dst);
  std::vector<std::uint8_t> bytes(4096);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::uint8_t>(i * 7 + 1);
  platform_->write(*src, bytes.data(), bytes.size());
  auto done = platform_->make_signal();
  impl::CopyOutcome outcome;
  platform_->post(0, -1, {{*src, *dst, 4096}}, [&](const impl::CopyOutcome& o) {
    outcome = o;
    done->set();
  });
  ASSERT_TRUE(done->wait_for(kForever));
  EXPECT_TRUE(outcome.ok);
  EXPECT_GT(platform_->now(), 0u);
  std::vector<std::uint8_t> back(4096);
  platform_->read(*dst, back.data(), back.size());
  EXPECT_EQ(back, bytes);
  const auto loc = platform_->locate(*dst + 100, 10);
  ASSERT_TRUE(loc);
  EXPECT_EQ(loc->device, 9);
  EXPECT_EQ(loc->node, 1);
  EXPECT_FALSE(platform_->locate(*dst + (1 << 20) - 4, 16));
  EXPECT_THROW(platform_->post(0, 0, {{*src, *dst, 0}}, nullptr), std::invalid_argument);
}

// A completion delay holds the outcome back by exactly the delay, for copies its device's engines
// complete inside the window; the bytes land on time, and other devices are not affected.
TEST_F(PlatformTest, ACompletionDelayReportsTheOutcomeLateAndOnlyInsideItsWindow) {
  const auto src = platform_->allocate(0, impl::Placement::DEVICE, 1 << 20, 0);
  const auto dst = platform_->allocate(9, impl::Placement::DEVICE, 1 << 20, 0);
  ASSERT_TRUE(src && dst);
  const auto copy_time = [&](int device, std::uint64_t from, std::uint64_t to) {
    auto done = platform_->make_signal();
    const impl::Time start = platform_->now();
    impl::Time landed = 0;
    platform_->post(device, -1, {{from, to, 4096}}, [&](const impl::CopyOutcome& o) {
      EXPECT_TRUE(o.ok);
      landed = platform_->now();
      done->set();
    });
    EXPECT_TRUE(done->wait_for(kForever));
    return landed - start;
  };
  const impl::Time plain = copy_time(0, *src, *dst);
  const impl::Time back = copy_time(9, *dst, *src);
  const impl::Time delay = 3 * model::kMs;
  platform_->add_completion_delay(0, platform_->now(), platform_->now() + 10 * model::kMs, delay);
  EXPECT_EQ(copy_time(0, *src, *dst), plain + delay);
  EXPECT_EQ(copy_time(9, *dst, *src), back) << "device 9's engines are not delayed";
  platform_->sleep(10 * model::kMs);
  EXPECT_EQ(copy_time(0, *src, *dst), plain) << "after the window";
  EXPECT_THROW(platform_->add_completion_delay(99, 0, 1, 1), std::exception);
}

// What the driver allocates as a process after a wait is still that process's: its death frees
// it (a serving engine that allocates its cache again after an out-of-memory pause).
TEST_F(PlatformTest, RunAsStaysTheProcessAcrossTheDriversWaits) {
  const int p = platform_->add_process({"p", 0, {0}});
  std::optional<std::uint64_t> addr;
  platform_->run_as(p, [&] {
    platform_->sleep(model::kMs);
    EXPECT_EQ(platform_->current_process(), p);
    addr = platform_->allocate(0, impl::Placement::DEVICE, 4096, 0);
  });
  ASSERT_TRUE(addr);
  EXPECT_EQ(platform_->current_process(), impl::kScriptProcess);
  platform_->kill_process(p);
  EXPECT_FALSE(platform_->locate(*addr, 1)) << "a killed process's memory is freed";
}

TEST_F(PlatformTest, AllocationThatDoesNotFitIsRefused) {
  EXPECT_FALSE(platform_->allocate(0, impl::Placement::DEVICE, 65ull << 30, 0));
  EXPECT_TRUE(platform_->allocate(0, impl::Placement::HOST, 1ull << 30, 0));
}

TEST_F(PlatformTest, EscapedJobExceptionsAreRecorded) {
  platform_->spawn("bad", [] { throw std::runtime_error("boom"); });
  platform_->run_until_idle();
  ASSERT_EQ(platform_->job_failures().size(), 1u);
  EXPECT_NE(platform_->job_failures()[0].find("boom"), std::string::npos);
  const_cast<std::vector<std::string>&>(platform_->job_failures()).clear();
}

TEST_F(PlatformTest, AKilledProcessNeverRunsAgainAndItsMemoryIsFreed) {
  const int victim = platform_->add_process({"victim", 0, {0}});
  const int other = platform_->add_process({"other", 1, {8}});
  std::optional<std::uint64_t> src, dst;
  platform_->run_as(victim,
                    [&] { src = platform_->allocate(0, impl::Placement::DEVICE, 64 << 20, 0); });
  platform_->run_as(other,
                    [&] { dst = platform_->allocate(8, impl::Placement::DEVICE, 64 << 20, 0); });
  ASSERT_TRUE(src && dst);
  int woke = 0;
  bool late_start = false;
  auto forever = platform_->make_signal();
  platform_->spawn_as(victim, "sleeper", [&] {
    platform_->sleep(10 * kUs);
    ++woke;  // once, before the kill
    platform_->sleep(100 * kUs);
    ++woke;  // never: the process was killed while this job slept
  });
  platform_->spawn_as(victim, "waiter", [&] {
    (void)forever->wait_for(kForever);  // never set: still blocked when the process dies
    ++woke;
  });
  impl::CopyOutcome outcome;
  auto copied = platform_->make_signal();
  platform_->spawn_as(other, "puller", [&] {  // reads the victim's memory across the nodes
    platform_->post(8, -1, {{*src, *dst, 64 << 20}}, [&](const impl::CopyOutcome& o) {
      outcome = o;
      copied->set();
    });
  });
  platform_->spawn("killer", [&] {
    platform_->sleep(20 * kUs);
    platform_->kill_process(victim);
    platform_->spawn_as(victim, "too_late", [&] { late_start = true; });
  });
  ASSERT_TRUE(copied->wait_for(kForever));
  platform_->run_until_idle();
  EXPECT_EQ(woke, 1);
  EXPECT_FALSE(late_start);
  EXPECT_TRUE(platform_->process_killed(victim));
  EXPECT_FALSE(platform_->process_killed(other));
  EXPECT_EQ(platform_->live_jobs(), 0u);  // the killed jobs count as ended
  EXPECT_TRUE(platform_->blocked_jobs().empty());
  EXPECT_FALSE(platform_->locate(*src, 1));  // freed, as the driver frees a dead process's
  EXPECT_TRUE(platform_->locate(*dst, 1));   // the other process's memory stays
  EXPECT_FALSE(outcome.ok);  // a copy reading the freed memory fails, it does not crash
  EXPECT_NE(outcome.error.find("not allocated"), std::string::npos) << outcome.error;
}

TEST_F(PlatformTest, EndJobsUnwindsEverySuspendedJobSoThatItsFramesAreFreed) {
  // Each job has an object in a frame while it waits for ever: only unwinding destroys it.
  int unwound = 0;
  struct Frame {
    int& n;
    ~Frame() { ++n; }
  };
  auto forever = platform_->make_signal();
  const int victim = platform_->add_process({"victim", 0, {0}});
  int caught_as_error = 0;
  int ran_on = 0;
  platform_->spawn("waiter", [&] {
    Frame f{unwound};
    try {
      (void)forever->wait_for(kForever);
    } catch (const std::exception&) {  // an error handler must not swallow the end
      ++caught_as_error;
    }
    ++ran_on;
  });
  platform_->spawn("sleeper", [&] {
    Frame f{unwound};
    platform_->sleep(kForever / 2);
    ++ran_on;
  });
  int swallowed = 0;
  platform_->spawn("swallower", [&] {  // code that catches everything, then returns
    Frame f{unwound};
    try {
      (void)forever->wait_for(kForever);
    } catch (...) {
      ++swallowed;
    }
  });
  platform_->spawn_as(victim, "dead", [&] {
    Frame f{unwound};
    (void)forever->wait_for(kForever);  // its process is killed while it waits
    ++ran_on;
  });
  platform_->spawn("killer", [&] {
    platform_->sleep(kUs);
    platform_->kill_process(victim);
  });
  (void)forever->wait_for(2 * kUs);
  EXPECT_EQ(unwound, 0);
  EXPECT_EQ(platform_->blocked_jobs().size(), 3u);
  platform_->end_jobs();
  EXPECT_EQ(unwound, 4);
  EXPECT_EQ(swallowed, 1);
  EXPECT_EQ(caught_as_error, 0);
  EXPECT_EQ(ran_on, 0);
  EXPECT_TRUE(platform_->blocked_jobs().empty());
  EXPECT_EQ(platform_->live_jobs(), 0u);  // each job counted once as it ended
}

TEST_F(PlatformTest, AddressingFollowsThePreset) {
  EXPECT_EQ(platform_->device_count(), 16);
  EXPECT_EQ(platform_->device_ip(3), "10.0.0.4");
  EXPECT_EQ(platform_->device_by_ip("10.0.0.4"), 3);
  EXPECT_EQ(platform_->round_trip(0, 8), 2 * fabric_->topology().spec().scale_out.latency);
  EXPECT_EQ(platform_->round_trip(0, 1), 2 * fabric_->topology().spec().scale_up.latency);
}

}  // namespace
}  // namespace kvsim::sim
