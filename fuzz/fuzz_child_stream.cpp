// What a sweep's parent decodes from a child process or a Dask worker (sim/child_frames.h,
// sim/result_codec.h): the input arrives in chunks whose sizes its first bytes pick; every
// result frame is decoded against the default scenario. Rejected only with std::runtime_error.
#include "fuzz/fuzz_support.h"
#include "sim/child_frames.h"
#include "sim/result_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kvsim::sim;
  if (size < 2) return 0;
  const std::size_t chunk = 1 + data[0];
  data += 1;
  size -= 1;
  kvsim::fuzz::expect_only<std::runtime_error>([&] {
    FrameReader reader;
    for (std::size_t at = 0; at < size; at += chunk) {
      reader.feed(reinterpret_cast<const char*>(data + at), std::min(chunk, size - at));
      while (auto frame = reader.next()) {
        if (frame->tag == kFrameResult) decode_result(frame->body, Scenario{});
      }
    }
  });
  // A whole input is also a result file (sweep point folders keep result.cbor).
  kvsim::fuzz::expect_only<std::runtime_error>(
      [&] { decode_result(kvsim::fuzz::text_of(data, size), Scenario{}); });
  return 0;
}
