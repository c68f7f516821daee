// The frames a sweep's child process sends its parent over a pipe: a tag byte, the body's length
// (64-bit, host order) and the body. Pure bytes: no pipes, no processes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace kvsim::sim {

/// Tags of child-to-parent frames.
inline constexpr char kFrameProgress = 'P';  ///< two uint64: requests done, total
inline constexpr char kFrameResult = 'R';    ///< an encoded RunResult (result_codec.h)
inline constexpr char kFrameError = 'E';     ///< an error message

/// The largest body a parent accepts (a result of the whole Mooncake trace is ~10 MB).
inline constexpr std::uint64_t kMaxFrameBytes = std::uint64_t{1} << 32;

/// One frame.
struct ChildFrame {
  char tag = 0;
  std::string body;
};

/// A frame's bytes, as the child writes them.
std::string encode_frame(char tag, const std::string& body);

/// Splits a byte stream into frames, whatever the chunks it arrives in.
class FrameReader {
 public:
  /// Appends received bytes.
  void feed(const char* data, std::size_t n);
  /// The next whole frame, if one has arrived. Throws std::runtime_error for a frame longer
  /// than kMaxFrameBytes (the stream is then unusable).
  std::optional<ChildFrame> next();
  /// True if bytes of an unfinished frame are waiting.
  bool pending() const { return inbox_.size() > at_; }

 private:
  std::string inbox_;
  std::size_t at_ = 0;  ///< start of the first unread frame in inbox_
};

}  // namespace kvsim::sim
