// Threads of a launched program in simulated time (launch_programs_test.py): each section prints
// when (simulated, since its start) its threads got what they waited for, so the test can check
// exact times and that two launches print the same. "deadlock" instead makes two threads take
// two mutexes in opposite orders and never ends.
#include <pthread.h>
#include <semaphore.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using std::chrono::milliseconds;

long long now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

timespec in_ms(clockid_t clock, long ms) {
  timespec ts{};
  clock_gettime(clock, &ts);
  ts.tv_sec += ms / 1000;
  ts.tv_nsec += (ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_nsec -= 1000000000L;
    ++ts.tv_sec;
  }
  return ts;
}

// A producer sleeps 10 ms before each of 5 items; the consumer waits on a condition variable.
void producer_consumer() {
  std::mutex m;
  std::condition_variable cv;
  std::vector<int> items;
  bool done = false;
  const long long t0 = now_ns();
  std::thread producer([&] {
    for (int i = 1; i <= 5; ++i) {
      std::this_thread::sleep_for(milliseconds(10));
      std::lock_guard<std::mutex> lock(m);
      items.push_back(i);
      cv.notify_one();
    }
    std::lock_guard<std::mutex> lock(m);
    done = true;
    cv.notify_one();
  });
  std::string got;
  std::unique_lock<std::mutex> lock(m);
  for (;;) {
    cv.wait(lock, [&] { return !items.empty() || done; });
    if (items.empty()) break;
    got += " " + std::to_string(items.front()) + "@" + std::to_string((now_ns() - t0) / 1000000);
    items.erase(items.begin());
  }
  lock.unlock();
  producer.join();
  std::printf("condition variable: items%s ms\n", got.c_str());
}

// Timeouts on every clock a wait can take, with nothing to wake them.
void timeouts() {
  std::mutex m;
  std::condition_variable cv;
  long long t0 = now_ns();
  {
    std::unique_lock<std::mutex> lock(m);
    const bool woke = cv.wait_for(lock, milliseconds(1000), [] { return false; });
    std::printf("condition_variable::wait_for 1 s: %s after %lld ns\n", woke ? "woke" : "timeout",
                now_ns() - t0);
  }
  // As CPython's GIL: a monotonic condition variable with pthread_cond_timedwait.
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_t mono;
  pthread_cond_init(&mono, &attr);
  pthread_mutex_t pm = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&pm);
  t0 = now_ns();
  timespec at = in_ms(CLOCK_MONOTONIC, 500);
  int rc = pthread_cond_timedwait(&mono, &pm, &at);
  std::printf("monotonic pthread_cond_timedwait 500 ms: %s after %lld ns\n",
              rc == ETIMEDOUT ? "ETIMEDOUT" : std::strerror(rc), now_ns() - t0);
  pthread_mutex_unlock(&pm);
  pthread_cond_destroy(&mono);

  sem_t sem;
  sem_init(&sem, 0, 0);
  t0 = now_ns();
  at = in_ms(CLOCK_REALTIME, 250);
  rc = sem_timedwait(&sem, &at);
  std::printf("sem_timedwait 250 ms: %s after %lld ns\n", rc == 0 ? "ok" : std::strerror(errno),
              now_ns() - t0);
  t0 = now_ns();
  at = in_ms(CLOCK_MONOTONIC, 125);
  rc = sem_clockwait(&sem, CLOCK_MONOTONIC, &at);
  std::printf("sem_clockwait 125 ms: %s after %lld ns\n", rc == 0 ? "ok" : std::strerror(errno),
              now_ns() - t0);

  std::timed_mutex held;
  held.lock();
  t0 = now_ns();
  std::thread other([&] {
    const bool got = held.try_lock_for(milliseconds(75));
    std::printf("timed_mutex::try_lock_for 75 ms: %s after %lld ns\n", got ? "got" : "timeout",
                now_ns() - t0);
  });
  other.join();
  held.unlock();
  sem_destroy(&sem);
}

// A semaphore posted by another thread 100 ms later; the waiter wakes then.
void semaphore() {
  sem_t sem;
  sem_init(&sem, 0, 0);
  const long long t0 = now_ns();
  std::thread poster([&] {
    std::this_thread::sleep_for(milliseconds(100));
    sem_post(&sem);
  });
  sem_wait(&sem);
  std::printf("sem_wait woke at +%lld ns\n", now_ns() - t0);
  poster.join();
  sem_destroy(&sem);
}

// Four threads increment one counter under a mutex, sleeping inside it now and then: the order
// in which they enter is the world's, the same in every launch.
void contention() {
  std::mutex m;
  long counter = 0;
  std::string order;
  std::vector<std::thread> threads;
  const long long t0 = now_ns();
  for (int id = 0; id < 4; ++id) {
    threads.emplace_back([&, id] {
      for (int i = 0; i < 250; ++i) {
        std::lock_guard<std::mutex> lock(m);
        ++counter;
        if (i % 50 == 0) {
          order += static_cast<char>('a' + id);
          std::this_thread::sleep_for(milliseconds(1));
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  std::printf("mutex: counter %ld, entries %s, %lld ns\n", counter, order.c_str(), now_ns() - t0);
}

// Three threads meet at a barrier; the last comes 30 ms late. A writer holds a shared_mutex for
// 5 ms while a reader waits.
void barrier_and_rwlock() {
  pthread_barrier_t barrier;
  pthread_barrier_init(&barrier, nullptr, 3);
  const long long t0 = now_ns();
  std::atomic<int> serial{0};
  std::vector<long long> left(3);
  std::vector<std::thread> threads;
  for (int id = 0; id < 3; ++id) {
    threads.emplace_back([&, id] {
      std::this_thread::sleep_for(milliseconds(10 * (id + 1)));
      if (pthread_barrier_wait(&barrier) == PTHREAD_BARRIER_SERIAL_THREAD) ++serial;
      left[static_cast<std::size_t>(id)] = now_ns() - t0;
    });
  }
  for (auto& t : threads) t.join();
  pthread_barrier_destroy(&barrier);
  std::printf("barrier: left at %lld %lld %lld ns, %d serial\n", left[0], left[1], left[2],
              serial.load());

  std::shared_mutex rw;
  long long t1 = 0;
  std::unique_lock<std::shared_mutex> write(rw);
  const long long t2 = now_ns();
  std::thread reader([&] {
    std::shared_lock<std::shared_mutex> read(rw);
    t1 = now_ns() - t2;
  });
  std::this_thread::sleep_for(milliseconds(5));
  write.unlock();
  reader.join();
  std::printf("shared_mutex reader got it after %lld ns\n", t1);
}

// Joins a thread that sleeps 2 s, then one that has already ended.
void joins() {
  const long long t0 = now_ns();
  std::thread sleeper([] { std::this_thread::sleep_for(std::chrono::seconds(2)); });
  sleeper.join();
  std::printf("join returned at +%lld ns\n", now_ns() - t0);
  std::thread quick([] {});
  std::this_thread::sleep_for(milliseconds(1));
  quick.join();
  std::printf("join of an ended thread: +%lld ns\n", now_ns() - t0);
}

void deadlock() {
  std::mutex a;
  std::mutex b;
  std::thread one([&] {
    std::lock_guard<std::mutex> first(a);
    std::this_thread::sleep_for(milliseconds(1));
    std::lock_guard<std::mutex> second(b);
  });
  std::thread two([&] {
    std::lock_guard<std::mutex> first(b);
    std::this_thread::sleep_for(milliseconds(1));
    std::lock_guard<std::mutex> second(a);
  });
  one.join();
  two.join();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "deadlock") == 0) {
    deadlock();
    return 0;
  }
  producer_consumer();
  timeouts();
  semaphore();
  contention();
  barrier_and_rwlock();
  joins();
  return 0;
}
