#include "sim/result_codec.h"

#include <nlohmann/json.hpp>

#include <stdexcept>

namespace kvsim::sim {

// CBOR keeps doubles as IEEE binary64 and integers exactly.
std::string encode_result(const RunResult& r) {
  nlohmann::json j;
  j["schema"] = kResultSchema;
  auto& reqs = j["requests"] = nlohmann::json::array();
  for (const RequestResult& q : r.requests) {
    reqs.push_back({q.id, q.prompt_tokens, q.arrival, q.prefill_start, q.transfer_start,
                    q.prefill_end, q.transfer_end, q.bytes, q.ok, q.status, q.verified, q.checked,
                    q.output_tokens, q.prefill_instance, q.decode_instance, q.decode_start,
                    q.first_token, q.completion});
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
  j["sample_times"] = r.sample_times;
  auto& series = j["series"] = nlohmann::json::array();
  for (const TimeSeries& t : r.series) series.push_back({t.name, t.values});
  const std::vector<std::uint8_t> bytes = nlohmann::json::to_cbor(j);
  return std::string(bytes.begin(), bytes.end());
}

RunResult decode_result(const std::string& bytes, Scenario scenario) {
  RunResult r;
  r.scenario = std::move(scenario);
  try {
    const nlohmann::json j = nlohmann::json::from_cbor(bytes);
    const int schema = j.value("schema", 0);
    if (schema != kResultSchema) {
      throw std::runtime_error("a result of schema " + std::to_string(schema) +
                               " (written by another kvsim); this kvsim reads schema " +
                               std::to_string(kResultSchema));
    }
    for (const auto& q : j.at("requests")) {
      RequestResult x;
      x.id = q.at(0).get<int>();
      x.prompt_tokens = q.at(1).get<std::uint64_t>();
      x.arrival = q.at(2).get<model::SimTime>();
      x.prefill_start = q.at(3).get<model::SimTime>();
      x.transfer_start = q.at(4).get<model::SimTime>();
      x.prefill_end = q.at(5).get<model::SimTime>();
      x.transfer_end = q.at(6).get<model::SimTime>();
      x.bytes = q.at(7).get<std::uint64_t>();
      x.ok = q.at(8).get<bool>();
      x.status = q.at(9).get<std::string>();
      x.verified = q.at(10).get<bool>();
      x.checked = q.at(11).get<bool>();
      x.output_tokens = q.at(12).get<std::uint64_t>();
      x.prefill_instance = q.at(13).get<int>();
      x.decode_instance = q.at(14).get<int>();
      x.decode_start = q.at(15).get<model::SimTime>();
      x.first_token = q.at(16).get<model::SimTime>();
      x.completion = q.at(17).get<model::SimTime>();
      r.requests.push_back(std::move(x));
    }
    for (const auto& c : j.at("compute")) {
      r.compute.push_back({c.at(0).get<int>(), c.at(1).get<int>(), c.at(2).get<model::SimTime>(),
                           c.at(3).get<model::SimTime>()});
    }
    for (const auto& l : j.at("links")) {
      r.links.push_back({l.at(0).get<std::string>(), l.at(1).get<std::string>(),
                         l.at(2).get<double>(), l.at(3).get<double>()});
    }
    r.diagnostics = j.at("diagnostics").get<std::vector<std::string>>();
    r.end = j.at("end").get<model::SimTime>();
    r.trace_json = j.at("trace").get<std::string>();
    r.line_rate = j.at("line_rate").get<double>();
    r.effective_rate = j.at("effective_rate").get<double>();
    r.sample_times = j.at("sample_times").get<std::vector<model::SimTime>>();
    for (const auto& t : j.at("series")) {
      r.series.push_back({t.at(0).get<std::string>(), t.at(1).get<std::vector<double>>()});
    }
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(std::string("not an encoded run result: ") + e.what());
  }
  return r;
}

}  // namespace kvsim::sim
