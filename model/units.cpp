#include "model/units.h"

#include <cctype>
#include <cmath>
#include <cstdio>

#include "model/errors.h"

namespace kvsim::model {
namespace {

struct Split {
  double number;
  std::string unit;
};

Split split_number(const std::string& text, const char* what) {
  std::size_t pos = 0;
  double value = 0;
  try {
    value = std::stod(text, &pos);
  } catch (const std::exception&) {
    throw ModelError(ErrorKind::kInvalidArgument,
                     std::string(what) + " '" + text + "' does not start with a number");
  }
  std::string unit;
  for (std::size_t i = pos; i < text.size(); ++i) {
    if (!std::isspace(static_cast<unsigned char>(text[i]))) unit += text[i];
  }
  if (!std::isfinite(value) || value < 0) {
    throw ModelError(ErrorKind::kInvalidArgument,
                     std::string(what) + " '" + text + "' must be a finite, non-negative number");
  }
  return {value, unit};
}

// Decimal SI prefix at the start of a rate unit ("G" in "GB/s"); `used` is its length.
double si_prefix(const std::string& unit, std::size_t& used) {
  used = 1;
  switch (unit.empty() ? ' ' : unit[0]) {
    case 'K':
    case 'k':
      return 1e3;
    case 'M':
      return 1e6;
    case 'G':
      return 1e9;
    case 'T':
      return 1e12;
    default:
      used = 0;
      return 1;
  }
}

}  // namespace

SimTime transfer_time(double bytes, Bandwidth rate) {
  if (bytes <= 0) return 0;
  const double ps = std::ceil(bytes / rate * static_cast<double>(kSec) - 1e-6);
  return ps <= 0 ? 0 : static_cast<SimTime>(ps);
}

std::uint64_t parse_bytes(const std::string& text) {
  const Split s = split_number(text, "size");
  // Bare "16K"/"2M" and "KiB" are binary (block sizes are quoted that way); "KB"/"MB" decimal.
  static const struct {
    const char* unit;
    double scale;
  } kUnits[] = {{"", 1},         {"B", 1},      {"K", 0x1p10},   {"KiB", 0x1p10}, {"M", 0x1p20},
                {"MiB", 0x1p20}, {"G", 0x1p30}, {"GiB", 0x1p30}, {"T", 0x1p40},   {"TiB", 0x1p40},
                {"KB", 1e3},     {"MB", 1e6},   {"GB", 1e9},     {"TB", 1e12}};
  for (const auto& u : kUnits) {
    if (s.unit != u.unit) continue;
    const double bytes = s.number * u.scale;
    if (bytes >= 0x1p64) {
      throw ModelError(ErrorKind::kOutOfRange, "size '" + text + "' does not fit in 64 bits");
    }
    return static_cast<std::uint64_t>(std::llround(bytes));
  }
  throw ModelError(ErrorKind::kInvalidArgument, "size '" + text + "' has unknown unit '" + s.unit +
                                                    "' (use B, KiB, MiB, GiB, KB, MB, GB)");
}

Bandwidth parse_bandwidth(const std::string& text) {
  const Split s = split_number(text, "bandwidth");
  std::string unit = s.unit;
  std::size_t used = 0;
  const double scale = si_prefix(unit, used);
  const std::string rest = unit.substr(used);
  double per = 0;
  if (rest == "B/s" || rest == "Bps")
    per = 1;
  else if (rest == "b/s" || rest == "bps")
    per = 1.0 / 8.0;
  if (per == 0) {
    throw ModelError(ErrorKind::kInvalidArgument,
                     "bandwidth '" + text + "' needs a unit such as GB/s (bytes) or Gb/s (bits)");
  }
  const double rate = s.number * scale * per;
  if (!(rate > 0)) {
    throw ModelError(ErrorKind::kInvalidArgument, "bandwidth '" + text + "' must be positive");
  }
  return rate;
}

SimTime parse_time(const std::string& text) {
  const Split s = split_number(text, "time");
  double unit_ps = 0;
  if (s.unit == "ps")
    unit_ps = 1;
  else if (s.unit == "ns")
    unit_ps = static_cast<double>(kNs);
  else if (s.unit == "us")
    unit_ps = static_cast<double>(kUs);
  else if (s.unit == "ms")
    unit_ps = static_cast<double>(kMs);
  else if (s.unit == "s")
    unit_ps = static_cast<double>(kSec);
  else {
    throw ModelError(ErrorKind::kInvalidArgument,
                     "time '" + text + "' needs a unit: ps, ns, us, ms or s");
  }
  // Bounded well inside 64-bit picoseconds, so that sums of times cannot wrap either.
  const double ps = s.number * unit_ps;
  if (!(ps <= static_cast<double>(kMaxTime))) {
    throw ModelError(ErrorKind::kInvalidArgument, "time '" + text + "' exceeds the bound of " +
                                                      std::to_string(kMaxTime / kSec) + " s");
  }
  return static_cast<SimTime>(std::llround(ps));
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.3g %s", bytes, units[u]);
  return buf;
}

std::string format_bandwidth(Bandwidth rate) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f GB/s", rate / 1e9);
  return buf;
}

std::string format_time(SimTime t) {
  char buf[64];
  const double ps = static_cast<double>(t);
  if (t >= kSec)
    std::snprintf(buf, sizeof buf, "%.4g s", ps / static_cast<double>(kSec));
  else if (t >= kMs)
    std::snprintf(buf, sizeof buf, "%.4g ms", ps / static_cast<double>(kMs));
  else if (t >= kUs)
    std::snprintf(buf, sizeof buf, "%.4g us", ps / static_cast<double>(kUs));
  else if (t >= kNs)
    std::snprintf(buf, sizeof buf, "%.4g ns", ps / static_cast<double>(kNs));
  else
    std::snprintf(buf, sizeof buf, "%llu ps", static_cast<unsigned long long>(t));
  return buf;
}

std::string format_address(std::uint64_t addr) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(addr));
  return buf;
}

Quantity parse_quantity(const std::string& text) {
  char* end = nullptr;
  const double plain = std::strtod(text.c_str(), &end);
  if (!text.empty() && end != nullptr && *end == '\0') return {Quantity::Kind::kNumber, plain};
  try {
    return {Quantity::Kind::kTime, static_cast<double>(parse_time(text))};
  } catch (const ModelError&) {
  }
  try {
    return {Quantity::Kind::kBandwidth, parse_bandwidth(text)};
  } catch (const ModelError&) {
  }
  try {
    return {Quantity::Kind::kBytes, static_cast<double>(parse_bytes(text))};
  } catch (const ModelError&) {
  }
  throw ModelError(ErrorKind::kInvalidArgument,
                   "'" + text + "' is not a number, a time, a bandwidth or a size");
}

}  // namespace kvsim::model
