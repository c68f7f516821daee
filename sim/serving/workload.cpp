#include "sim/serving/workload.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <istream>
#include <limits>
#include <random>
#include <sstream>
#include <stdexcept>

namespace kvsim::sim::serving {
namespace {

[[noreturn]] void bad(const std::string& where, const std::string& rule) {
  throw std::invalid_argument(where + ": " + rule);
}

std::string strip(std::string s) {
  if (s.size() >= 3 && s.compare(0, 3, "\xEF\xBB\xBF") == 0) s.erase(0, 3);  // UTF-8 BOM
  while (!s.empty() && (s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

// Times past model::kMaxTime are refused where they are read (callers name the line).
bool in_time_bound(double ps) {
  return ps >= 0 && ps <= static_cast<double>(model::kMaxTime);
}

// A trace timestamp in ms; `where` names the line if it is past the bound.
model::SimTime from_ms(double ms, const std::string& where) {
  const double ps = ms * static_cast<double>(model::kMs);
  if (!in_time_bound(ps)) bad(where, "is past the time bound of 10^6 s");
  return static_cast<model::SimTime>(std::llround(ps));
}

// Days since 1970-01-01 of a civil date (H. Hinnant's days_from_civil).
long long days_from_civil(long long y, unsigned m, unsigned d) {
  y -= m <= 2;
  const long long era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<long long>(doe) - 719468;
}

// "2023-11-16 18:15:46.6805900" -> whole seconds since 1970 and the fraction in ps (exact: the
// trace's 100 ns digits survive, which a double of seconds since 1970 would not keep).
bool azure_time(const std::string& text, long long& seconds, long long& frac_ps) {
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0;
  if (std::sscanf(text.c_str(), "%d-%d-%d%*1[ T]%d:%d:%d", &y, &mo, &d, &h, &mi, &sec) != 6) {
    return false;
  }
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h < 0 || h > 23 || mi < 0 || mi > 59 || sec < 0 ||
      sec > 60) {
    return false;
  }
  frac_ps = 0;
  const std::size_t dot = text.find('.');
  if (dot != std::string::npos) {
    long long scale = 100'000'000'000;  // ps of the first fraction digit
    for (std::size_t i = dot + 1; i < text.size(); ++i) {
      if (text[i] < '0' || text[i] > '9') return false;
      frac_ps += (text[i] - '0') * scale;
      scale /= 10;
    }
  }
  seconds = days_from_civil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d)) * 86400 +
            h * 3600 + mi * 60 + sec;
  return true;
}

std::uint64_t positive_tokens(const nlohmann::json& v, const std::string& where) {
  if (!v.is_number_integer() || v.get<long long>() < 0) bad(where, "must be an integer >= 0");
  return v.get<std::uint64_t>();
}

// A token count of a trace line, at most kMaxTraceTokens.
std::uint64_t bounded_tokens(const nlohmann::json& v, const std::string& where) {
  const std::uint64_t n = positive_tokens(v, where);
  if (n > kMaxTraceTokens) bad(where, "is above the bound of 2^24 tokens");
  return n;
}

// The next line of a trace (`n` counts lines), at most kMaxTraceLineBytes long; false at the
// end. Past kMaxTraceLines lines the trace is refused.
bool next_line(std::istream& in, std::string& line, const std::string& origin, int& n) {
  if (n >= kMaxTraceLines) bad(origin, "has more than 10^7 lines");
  line.clear();
  ++n;
  std::streambuf* buf = in.rdbuf();
  for (int c; (c = buf->sbumpc()) != std::char_traits<char>::eof();) {
    if (c == '\n') return true;
    if (line.size() == kMaxTraceLineBytes) {
      bad(origin + ":" + std::to_string(n), "is longer than the bound of 1 MiB");
    }
    line.push_back(static_cast<char>(c));
  }
  return !line.empty();
}

std::vector<WorkloadRequest> read_kvsim(std::istream& in, const std::string& path) {
  std::vector<WorkloadRequest> out;
  std::string line;
  for (int n = 0; next_line(in, line, path, n);) {
    line = strip(line);
    if (line.empty() || line[0] == '#' || line.rfind("arrival", 0) == 0) continue;
    std::stringstream ss(line);
    double arrival_ms = 0;
    char comma = 0;
    long long tokens = 0;
    if (!(ss >> arrival_ms >> comma >> tokens) || comma != ',' || arrival_ms < 0 || tokens <= 0 ||
        static_cast<std::uint64_t>(tokens) > kMaxTraceTokens) {
      bad(path + ":" + std::to_string(n),
          "expected 'arrival_ms,prompt_tokens' with arrival >= 0 and 0 < tokens <= 2^24");
    }
    out.push_back({from_ms(arrival_ms, path + ":" + std::to_string(n)),
                   static_cast<std::uint64_t>(tokens),
                   0,
                   {}});
  }
  return out;
}

std::vector<WorkloadRequest> read_mooncake(std::istream& in, const std::string& path) {
  std::vector<WorkloadRequest> out;
  std::string line;
  for (int n = 0; next_line(in, line, path, n);) {
    line = strip(line);
    if (line.empty()) continue;
    const std::string at = path + ":" + std::to_string(n);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception&) {
      bad(at, "is not a JSON object (Mooncake traces have one per line)");
    }
    if (!j.is_object()) bad(at, "is not a JSON object");
    for (const char* key : {"timestamp", "input_length", "output_length"}) {
      if (!j.contains(key)) bad(at, std::string("has no '") + key + "'");
    }
    if (!j["timestamp"].is_number() || j["timestamp"].get<double>() < 0) {
      bad(at + ": timestamp", "must be a number of ms >= 0");
    }
    WorkloadRequest r;
    r.arrival = from_ms(j["timestamp"].get<double>(), at + ": timestamp");
    r.prompt_tokens = bounded_tokens(j["input_length"], at + ": input_length");
    if (r.prompt_tokens == 0) bad(at + ": input_length", "must be > 0");
    r.output_tokens = bounded_tokens(j["output_length"], at + ": output_length");
    if (j.contains("hash_ids")) {
      if (!j["hash_ids"].is_array()) bad(at + ": hash_ids", "must be a list");
      for (const auto& h : j["hash_ids"])
        r.hash_ids.push_back(positive_tokens(h, at + ": hash_ids"));
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<WorkloadRequest> read_azure(std::istream& in, const std::string& path) {
  std::vector<WorkloadRequest> out;
  std::string line;
  long long first_s = 0, first_frac = 0;
  for (int n = 0; next_line(in, line, path, n);) {
    line = strip(line);
    if (line.empty()) continue;
    if (n == 1) {
      if (line != "TIMESTAMP,ContextTokens,GeneratedTokens") {
        bad(path + ":1", "expected the header 'TIMESTAMP,ContextTokens,GeneratedTokens'");
      }
      continue;
    }
    const std::string at = path + ":" + std::to_string(n);
    const std::size_t c1 = line.find(','), c2 = line.find(',', c1 + 1);
    long long sec = 0, frac = 0;
    if (c1 == std::string::npos || c2 == std::string::npos ||
        !azure_time(line.substr(0, c1), sec, frac)) {
      bad(at, "expected 'YYYY-MM-DD hh:mm:ss.fffffff,ContextTokens,GeneratedTokens'");
    }
    char* end1 = nullptr;
    char* end2 = nullptr;
    const long long context = std::strtoll(line.c_str() + c1 + 1, &end1, 10);
    const long long generated = std::strtoll(line.c_str() + c2 + 1, &end2, 10);
    if (context <= 0 || generated < 0 || end1 != line.c_str() + c2 || *end2 != '\0' ||
        static_cast<std::uint64_t>(context) > kMaxTraceTokens ||
        static_cast<std::uint64_t>(generated) > kMaxTraceTokens) {
      bad(at, "needs 0 < ContextTokens <= 2^24 and 0 <= GeneratedTokens <= 2^24");
    }
    if (out.empty()) first_s = sec, first_frac = frac;
    if (sec - first_s > static_cast<long long>(model::kMaxTime / model::kSec)) {
      bad(at, "is past the time bound of 10^6 s after the first request");
    }
    const long long ps = (sec - first_s) * 1'000'000'000'000LL + (frac - first_frac);
    if (ps < 0) bad(at, "goes back in time (the trace must be in arrival order)");
    out.push_back({static_cast<model::SimTime>(ps),
                   static_cast<std::uint64_t>(context),
                   static_cast<std::uint64_t>(generated),
                   {}});
  }
  return out;
}

// A uniform double in [0, 1) from the top 53 bits: the same on every platform.
double unit(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

double standard_normal(std::mt19937_64& rng) {  // Box-Muller, one of the pair
  const double u1 = 1.0 - unit(rng), u2 = unit(rng);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

double standard_gamma(double k, std::mt19937_64& rng) {  // Marsaglia and Tsang (2000)
  if (k < 1) return standard_gamma(k + 1, rng) * std::pow(1.0 - unit(rng), 1.0 / k);
  const double d = k - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    double x = 0, v = 0;
    do {
      x = standard_normal(rng);
      v = 1.0 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const double u = 1.0 - unit(rng);
    if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
  }
}

std::uint64_t draw(const LengthSpec& l, std::mt19937_64& rng) {
  switch (l.kind) {
    case LengthSpec::Kind::kFixed:
      return l.value;
    case LengthSpec::Kind::kUniform:
      return l.min + rng() % (l.max - l.min + 1);
    case LengthSpec::Kind::kLognormal: {
      const double x = std::round(l.median * std::exp(l.sigma * standard_normal(rng)));
      return static_cast<std::uint64_t>(
          std::clamp(x, static_cast<double>(l.min), static_cast<double>(l.max)));
    }
  }
  return l.value;
}

void check(const LengthSpec& l, const std::string& what) {
  switch (l.kind) {
    case LengthSpec::Kind::kFixed:
      return;
    case LengthSpec::Kind::kUniform:
      if (l.max < l.min) bad(what, "needs min <= max");
      return;
    case LengthSpec::Kind::kLognormal:
      if (!(l.median > 0) || !(l.sigma >= 0) || !std::isfinite(l.median * l.sigma)) {
        bad(what, "needs median > 0 and sigma >= 0");
      }
      if (l.max < l.min || l.max == 0) bad(what, "needs 0 < max and min <= max");
      return;
  }
}

}  // namespace

TraceFormat trace_format_from_string(const std::string& text) {
  if (text == "auto") return TraceFormat::kAuto;
  if (text == "kvsim") return TraceFormat::kKvsim;
  if (text == "mooncake") return TraceFormat::kMooncake;
  if (text == "azure") return TraceFormat::kAzure;
  throw std::invalid_argument("'" + text + "' must be auto, kvsim, mooncake or azure");
}

std::vector<WorkloadRequest> read_trace(const std::string& path, const TraceOptions& o) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) bad(path, "is not a regular file");
  std::ifstream in(path, std::ios::binary);
  if (!in) bad(path, "cannot be read");
  return parse_trace(in, path, o);
}

std::vector<WorkloadRequest> parse_trace(std::istream& in, const std::string& path,
                                         const TraceOptions& o) {
  if (!(o.rate_scale > 0) || !std::isfinite(o.rate_scale)) {
    bad(path, "rate_scale must be finite and > 0");
  }
  if (o.window_from && o.window_to && *o.window_to <= *o.window_from) {
    bad(path, "the window must end after it starts");
  }
  TraceFormat format = o.format;
  if (format == TraceFormat::kAuto) {
    std::string first;
    int n = 0;
    next_line(in, first, path, n);
    first = strip(first);
    format = !first.empty() && first[0] == '{'  ? TraceFormat::kMooncake
             : first.rfind("TIMESTAMP", 0) == 0 ? TraceFormat::kAzure
                                                : TraceFormat::kKvsim;
    in.clear();
    in.seekg(0);
  }
  std::vector<WorkloadRequest> all = format == TraceFormat::kMooncake ? read_mooncake(in, path)
                                     : format == TraceFormat::kAzure  ? read_azure(in, path)
                                                                      : read_kvsim(in, path);
  std::stable_sort(all.begin(), all.end(), [](const WorkloadRequest& a, const WorkloadRequest& b) {
    return a.arrival < b.arrival;
  });
  std::vector<WorkloadRequest> out;
  const model::SimTime from = o.window_from.value_or(0);
  for (WorkloadRequest& r : all) {
    if (r.arrival < from || (o.window_to && r.arrival >= *o.window_to)) continue;
    const double scaled = static_cast<double>(r.arrival - from) / o.rate_scale;
    if (!in_time_bound(scaled)) {
      bad(path, "scaled by rate_scale runs past the time bound of 10^6 s");
    }
    r.arrival = static_cast<model::SimTime>(std::llround(scaled));
    if (o.max_prompt_tokens) r.prompt_tokens = std::min(r.prompt_tokens, *o.max_prompt_tokens);
    out.push_back(std::move(r));
    if (o.limit && out.size() == *o.limit) break;
  }
  if (out.empty()) bad(path, "has no request left after the window and limit");
  return out;
}

std::vector<WorkloadRequest> synthesize(const SyntheticSpec& s) {
  if (!s.interval && (!(s.rate > 0) || !std::isfinite(s.rate))) {
    bad("arrivals.rate", "must be finite and > 0");
  }
  if (s.process == SyntheticSpec::Process::kGamma && (!(s.cv > 0) || !std::isfinite(s.cv))) {
    bad("arrivals.cv", "must be finite and > 0");
  }
  if (s.count == 0) bad("requests", "must be > 0");
  check(s.prompt, "prompt_tokens");
  check(s.output, "output_tokens");
  // One generator per stream, so that changing the arrival process or the output lengths never
  // changes the prompts drawn for a seed (the prompt stream is the seed's own, as it always was).
  std::mt19937_64 prompts(s.seed), outputs(s.seed ^ 0x5851f42d4c957f2dULL),
      gaps(s.seed ^ 0x2545f4914f6cdd1dULL);
  const double mean_gap_s = 1.0 / s.rate;
  const double shape = 1.0 / (s.cv * s.cv);
  std::vector<WorkloadRequest> out;
  double t = 0;  // seconds
  for (std::size_t i = 0; i < s.count; ++i) {
    WorkloadRequest r;
    if (!in_time_bound(t * static_cast<double>(model::kSec))) {
      bad("arrivals", "run past the time bound of 10^6 s");
    }
    r.arrival = static_cast<model::SimTime>(std::llround(t * static_cast<double>(model::kSec)));
    if (s.process == SyntheticSpec::Process::kUniform && s.interval) {
      if (i > 0 && *s.interval > model::kMaxTime / i) {
        bad("interval", "times the request count runs past the time bound of 10^6 s");
      }
      r.arrival = static_cast<model::SimTime>(i) * *s.interval;
    }
    r.prompt_tokens = std::max<std::uint64_t>(1, draw(s.prompt, prompts));
    r.output_tokens = draw(s.output, outputs);
    out.push_back(std::move(r));
    switch (s.process) {
      case SyntheticSpec::Process::kUniform:
        t = static_cast<double>(i + 1) * mean_gap_s;
        break;
      case SyntheticSpec::Process::kPoisson:
        t += -std::log(1.0 - unit(gaps)) * mean_gap_s;
        break;
      case SyntheticSpec::Process::kGamma:
        t += standard_gamma(shape, gaps) * mean_gap_s / shape;
        break;
    }
  }
  return out;
}

}  // namespace kvsim::sim::serving
