#include "cpp/wire/vector_clock.h"

#include <algorithm>

#include "cpp/wire/wire.h"

namespace kvsim::cpp::wire {

namespace {
bool by_thread(const std::pair<std::uint32_t, std::uint32_t>& e, std::uint32_t thread) {
  return e.first < thread;
}
}  // namespace

std::uint32_t VectorClock::get(std::uint32_t thread) const {
  const auto it = std::lower_bound(entries_.begin(), entries_.end(), thread, by_thread);
  return it != entries_.end() && it->first == thread ? it->second : 0;
}

void VectorClock::set(std::uint32_t thread, std::uint32_t count) {
  const auto it = std::lower_bound(entries_.begin(), entries_.end(), thread, by_thread);
  if (it != entries_.end() && it->first == thread) {
    it->second = count;
  } else {
    entries_.insert(it, {thread, count});
  }
}

void VectorClock::join(const VectorClock& other) {
  std::vector<std::pair<std::uint32_t, std::uint32_t>> merged;
  merged.reserve(entries_.size() + other.entries_.size());
  auto a = entries_.begin();
  auto b = other.entries_.begin();
  while (a != entries_.end() || b != other.entries_.end()) {
    if (b == other.entries_.end() || (a != entries_.end() && a->first < b->first)) {
      merged.push_back(*a++);
    } else if (a == entries_.end() || b->first < a->first) {
      merged.push_back(*b++);
    } else {
      merged.emplace_back(a->first, std::max(a->second, b->second));
      ++a;
      ++b;
    }
  }
  entries_ = std::move(merged);
}

std::string VectorClock::encode() const {
  if (entries_.empty()) return {};
  Writer w;
  w.u32(static_cast<std::uint32_t>(entries_.size()));
  for (const auto& [thread, count] : entries_) w.u32(thread).u32(count);
  return w.take();
}

VectorClock VectorClock::decode(const std::string& bytes) {
  VectorClock c;
  if (bytes.empty()) return c;
  Reader in(bytes);
  const std::uint32_t n = in.u32();
  if (bytes.size() != 4 + 8 * static_cast<std::size_t>(n)) {
    throw WireError("a vector clock of " + std::to_string(n) + " threads in " +
                    std::to_string(bytes.size()) + " bytes");
  }
  c.entries_.reserve(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    const std::uint32_t thread = in.u32();
    const std::uint32_t count = in.u32();
    if (!c.entries_.empty() && thread <= c.entries_.back().first) {
      throw WireError("a vector clock's threads out of order");
    }
    c.entries_.emplace_back(thread, count);
  }
  return c;
}

}  // namespace kvsim::cpp::wire
