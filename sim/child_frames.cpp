#include "sim/child_frames.h"

#include <cstring>
#include <stdexcept>

namespace kvsim::sim {

namespace {
constexpr std::size_t kHead = 1 + sizeof(std::uint64_t);
}

std::string encode_frame(char tag, const std::string& body) {
  std::string out(kHead, '\0');
  out[0] = tag;
  const std::uint64_t len = body.size();
  std::memcpy(out.data() + 1, &len, sizeof len);
  return out + body;
}

void FrameReader::feed(const char* data, std::size_t n) {
  if (at_ > 0 && at_ == inbox_.size()) {
    inbox_.clear();
    at_ = 0;
  }
  inbox_.append(data, n);
}

std::optional<ChildFrame> FrameReader::next() {
  const std::size_t avail = inbox_.size() - at_;
  if (avail < kHead) return std::nullopt;
  std::uint64_t len = 0;
  std::memcpy(&len, inbox_.data() + at_ + 1, sizeof len);
  if (len > kMaxFrameBytes) {
    throw std::runtime_error("a child process sent a frame of " + std::to_string(len) +
                             " bytes (the bound is 2^32): its output is corrupt");
  }
  if (avail - kHead < len) return std::nullopt;
  ChildFrame f{inbox_[at_], inbox_.substr(at_ + kHead, static_cast<std::size_t>(len))};
  at_ += kHead + static_cast<std::size_t>(len);
  // Drop consumed bytes once they dominate, so a long stream stays O(bytes) overall.
  if (at_ > (1u << 20) && at_ * 2 > inbox_.size()) {
    inbox_.erase(0, at_);
    at_ = 0;
  }
  return f;
}

}  // namespace kvsim::sim
