#include "sim/result_codec.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <type_traits>

namespace kvsim::sim {

// CBOR keeps doubles as IEEE binary64 and integers exactly.
std::string encode_result(const RunResult& r) {
  nlohmann::json j;
  j["schema"] = kResultSchema;
  auto& reqs = j["requests"] = nlohmann::json::array();
  for (const RequestResult& q : r.requests) {
    reqs.push_back({q.id,
                    q.prompt_tokens,
                    q.arrival,
                    q.prefill_start,
                    q.transfer_start,
                    q.prefill_end,
                    q.transfer_end,
                    q.bytes,
                    q.ok,
                    q.status,
                    q.verified,
                    q.checked,
                    q.output_tokens,
                    q.prefill_instance,
                    q.decode_instance,
                    q.decode_start,
                    q.first_token,
                    q.completion,
                    q.retries,
                    q.recomputes,
                    q.preemptions});
  }
  auto& compute = j["compute"] = nlohmann::json::array();
  for (const ComputeSpan& c : r.compute) compute.push_back({c.request, c.layer, c.start, c.end});
  auto& links = j["links"] = nlohmann::json::array();
  for (const LinkUsage& l : r.links) links.push_back({l.name, l.type, l.bytes, l.utilization});
  j["diagnostics"] = r.diagnostics;
  j["end"] = r.end;
  j["trace"] = r.trace_json;
  j["line_rate"] = r.line_rate;
  j["effective_rate"] = r.effective_rate;
  j["relinks"] = r.relinks;
  j["restarts"] = r.restarts;
  j["sample_times"] = r.sample_times;
  auto& series = j["series"] = nlohmann::json::array();
  for (const TimeSeries& t : r.series) series.push_back({t.name, t.values});
  const std::vector<std::uint8_t> bytes = nlohmann::json::to_cbor(j);
  return std::string(bytes.begin(), bytes.end());
}

namespace {

[[noreturn]] void malformed(const std::string& what) {
  throw std::runtime_error("not an encoded run result: " + what);
}

// An integer of type T, exactly: a float or an out-of-range value is malformed (a cast would be
// undefined behaviour).
template <class T>
T integer(const nlohmann::json& v) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<T>::max())) {
      malformed("an integer out of range");
    }
    return static_cast<T>(u);
  }
  if (v.is_number_integer()) {
    const auto i = v.get<std::int64_t>();
    if constexpr (std::is_unsigned_v<T>) {
      if (i < 0) malformed("a negative count");
    } else if (i < std::numeric_limits<T>::min() || i > std::numeric_limits<T>::max()) {
      malformed("an integer out of range");
    }
    return static_cast<T>(i);
  }
  malformed("a number where an integer belongs");
}

std::vector<model::SimTime> times(const nlohmann::json& v) {
  std::vector<model::SimTime> out;
  for (const auto& t : v) out.push_back(integer<model::SimTime>(t));
  return out;
}

}  // namespace

RunResult decode_result(const std::string& bytes, Scenario scenario) {
  RunResult r;
  r.scenario = std::move(scenario);
  try {
    const nlohmann::json j = nlohmann::json::from_cbor(bytes);
    const int schema = j.is_object() && j.contains("schema") ? integer<int>(j["schema"]) : 0;
    if (schema != kResultSchema) {
      throw std::runtime_error("a result of schema " + std::to_string(schema) +
                               " (written by another kvsim); this kvsim reads schema " +
                               std::to_string(kResultSchema));
    }
    for (const auto& q : j.at("requests")) {
      RequestResult x;
      x.id = integer<int>(q.at(0));
      x.prompt_tokens = integer<std::uint64_t>(q.at(1));
      x.arrival = integer<model::SimTime>(q.at(2));
      x.prefill_start = integer<model::SimTime>(q.at(3));
      x.transfer_start = integer<model::SimTime>(q.at(4));
      x.prefill_end = integer<model::SimTime>(q.at(5));
      x.transfer_end = integer<model::SimTime>(q.at(6));
      x.bytes = integer<std::uint64_t>(q.at(7));
      x.ok = q.at(8).get<bool>();
      x.status = q.at(9).get<std::string>();
      x.verified = q.at(10).get<bool>();
      x.checked = q.at(11).get<bool>();
      x.output_tokens = integer<std::uint64_t>(q.at(12));
      x.prefill_instance = integer<int>(q.at(13));
      x.decode_instance = integer<int>(q.at(14));
      x.decode_start = integer<model::SimTime>(q.at(15));
      x.first_token = integer<model::SimTime>(q.at(16));
      x.completion = integer<model::SimTime>(q.at(17));
      // Added within schema 1 (serving.recovery); results written before it have none.
      if (q.size() > 18) x.retries = integer<int>(q.at(18));
      if (q.size() > 19) x.recomputes = integer<int>(q.at(19));   // process_killed, also within 1
      if (q.size() > 20) x.preemptions = integer<int>(q.at(20));  // incremental decode blocks
      r.requests.push_back(std::move(x));
    }
    for (const auto& c : j.at("compute")) {
      r.compute.push_back({integer<int>(c.at(0)), integer<int>(c.at(1)),
                           integer<model::SimTime>(c.at(2)), integer<model::SimTime>(c.at(3))});
    }
    for (const auto& l : j.at("links")) {
      r.links.push_back({l.at(0).get<std::string>(), l.at(1).get<std::string>(),
                         l.at(2).get<double>(), l.at(3).get<double>()});
    }
    r.diagnostics = j.at("diagnostics").get<std::vector<std::string>>();
    r.end = integer<model::SimTime>(j.at("end"));
    r.trace_json = j.at("trace").get<std::string>();
    r.line_rate = j.at("line_rate").get<double>();
    r.effective_rate = j.at("effective_rate").get<double>();
    if (j.contains("relinks")) r.relinks = integer<int>(j.at("relinks"));
    if (j.contains("restarts")) r.restarts = integer<int>(j.at("restarts"));
    r.sample_times = times(j.at("sample_times"));
    for (const auto& t : j.at("series")) {
      r.series.push_back({t.at(0).get<std::string>(), t.at(1).get<std::vector<double>>()});
    }
  } catch (const nlohmann::json::exception& e) {
    malformed(e.what());
  }
  return r;
}

}  // namespace kvsim::sim
