// Simulated time, sizes and rates, and parsing of quantities such as "56GB/s" or "1.5us".
#pragma once

#include <cstdint>
#include <string>

namespace kvsim::model {

/// Simulated time in picoseconds (SystemC's default resolution). Integer, so runs are bit-exact.
using SimTime = std::uint64_t;

inline constexpr SimTime kPs = 1;
inline constexpr SimTime kNs = 1000;
inline constexpr SimTime kUs = 1000 * kNs;
inline constexpr SimTime kMs = 1000 * kUs;
inline constexpr SimTime kSec = 1000 * kMs;
/// The largest time a file or option may give (10^6 s, about 11.6 days): 1/9 of the 64-bit
/// picosecond range, so that arrivals plus durations cannot wrap.
inline constexpr SimTime kMaxTime = 1'000'000 * kSec;

/// Bandwidth in bytes per second.
using Bandwidth = double;

/// Time to move `bytes` at `rate` bytes/s, rounded up to the next picosecond.
SimTime transfer_time(double bytes, Bandwidth rate);

/// Seconds as a double, for reports.
inline double to_seconds(SimTime t) {
  return static_cast<double>(t) / static_cast<double>(kSec);
}

/// Parses a byte count: "4096", "16K"/"16KiB" (1024-based), "2MB" (1000-based), "64GiB".
std::uint64_t parse_bytes(const std::string& text);
/// Parses a rate: "56GB/s" (bytes, 1000-based), "200Gb/s" or "200Gbps" (bits), "1.6TB/s".
Bandwidth parse_bandwidth(const std::string& text);
/// Parses a duration: "1.5us", "300ns", "2ms", "1s", "100ps" into picoseconds (rounded);
/// ModelError(kInvalidArgument) without a unit or above kMaxTime.
SimTime parse_time(const std::string& text);

/// A preset or scenario value of any unit, for ranges and interpolation between them.
struct Quantity {
  enum class Kind { kNumber, kTime, kBandwidth, kBytes } kind = Kind::kNumber;
  double value = 0;  ///< a plain number, ps, bytes/s or bytes
};
/// Parses a plain number, else a time, a bandwidth or a size (in that order); throws ModelError.
Quantity parse_quantity(const std::string& text);

/// "1.25 GiB", "512 KiB": binary units for humans.
std::string format_bytes(double bytes);
/// "23.6 GB/s": decimal units, as vendors report.
std::string format_bandwidth(Bandwidth rate);
/// "6.71 ms", "815 us": an adaptive unit for humans.
std::string format_time(SimTime t);
/// "0x10000200000": an address in error messages.
std::string format_address(std::uint64_t addr);

}  // namespace kvsim::model
