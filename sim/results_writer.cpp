#include "sim/results_writer.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <unistd.h>

#include "sim/result_codec.h"
#include "sim/serving/metrics.h"

namespace kvsim::sim {
namespace {

double us(model::SimTime t) {
  return static_cast<double>(t) / 1e6;
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  write_file_atomic(path.string(), text);
}

constexpr std::size_t kSummaryRequests = 20;  // a serving run lists its first requests only

std::string ms(double microseconds) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f ms", microseconds / 1e3);
  return b;
}

// The headline of a serving run: cluster, percentiles, SLOs and how much was verified.
std::string serving_summary(const RunResult& r) {
  const ServingSpec& v = *r.scenario.serving;
  const serving::ServingMetrics m = serving::serving_metrics(r);
  std::ostringstream o;
  o << "cluster: " << v.prefill_instances << "P" << v.decode_instances << "D, TP"
    << r.scenario.tensor_parallel << " each; " << m.requests << " requests, " << m.succeeded
    << " succeeded, over " << model::format_time(r.end) << "\n";
  o << "verified byte for byte: " << m.checked << " requests (serving.verify " << v.verify_fraction
    << "), " << m.verified << " equal\n";
  int preempted = 0, preemptions = 0;
  for (const RequestResult& q : r.requests) {
    preempted += q.preemptions > 0;
    preemptions += q.preemptions;
  }
  if (preemptions > 0) {
    o << "decode cache full: " << preempted << " requests preempted and computed again ("
      << preemptions << " preemptions)\n";
  }
  o << "\n";
  char line[256];
  std::snprintf(line, sizeof line, "%-12s %12s %12s %12s %12s\n", "", "mean", "p50", "p90", "p99");
  o << line;
  const auto row = [&](const char* name, const serving::Percentiles& p) {
    std::snprintf(line, sizeof line, "%-12s %12s %12s %12s %12s\n", name, ms(p.mean).c_str(),
                  ms(p.p50).c_str(), ms(p.p90).c_str(), ms(p.p99).c_str());
    o << line;
  };
  row("TTFT", m.ttft);
  row("KV ready", m.kv_ready);
  row("exposed KV", m.exposed);
  row("queueing", m.queueing);
  row("TPOT", m.tpot);
  row("end to end", m.e2e);
  std::snprintf(line, sizeof line,
                "\nSLOs TTFT <= %s, TPOT <= %s: %.1f%% met; goodput %.3f req/s of %.3f req/s\n\n",
                model::format_time(v.slo_ttft).c_str(), model::format_time(v.slo_tpot).c_str(),
                100 * m.slo_attainment, m.goodput_rps, m.throughput_rps);
  o << line;
  return o.str();
}

nlohmann::ordered_json percentiles_json(const serving::Percentiles& p) {
  return {{"mean", p.mean}, {"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}, {"max", p.max}};
}

}  // namespace

void write_file_atomic(const std::string& path, const std::string& text) {
  // A temporary beside the target, then rename: a reader sees the old file or the whole new one.
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      throw std::runtime_error("cannot write '" + path + "'");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw std::runtime_error("cannot write '" + path + "'");
  }
}

std::string summary_text(const RunResult& r) {
  std::ostringstream o;
  const Scenario& s = r.scenario;
  o << "scenario: " << s.origin << "\nquestion: " << s.question << "\n";
  o << "hardware: " << s.preset;
  for (const auto& [k, v] : s.hardware_overrides) o << " " << k << "=" << v;
  o << "\nmodel: " << s.model.name << " TP" << s.tensor_parallel << " " << s.dtype
    << (s.kv_dtype != s.dtype ? " (KV " + s.kv_dtype + ")" : std::string()) << ", "
    << (s.paged ? "paged (" + std::to_string(s.block_tokens) + "-token blocks)"
                : std::string("contiguous"))
    << ", "
    << (s.method == TransferMethod::kLayerwise    ? "layer-wise transfer_cache_async"
        : s.method == TransferMethod::kPushBlocks ? "layer-wise push_blocks"
                                                  : "pull_blocks after prefill")
    << ", API v" << s.api_version << "\n\n";
  char line[256];
  if (s.serving) o << serving_summary(r);
  std::snprintf(line, sizeof line, "%4s %7s %12s %12s %12s %12s %7s %10s %s\n", "req", "tokens",
                "arrival", "prefill end", "KV ready", "exposed", "share", "bytes", "status");
  o << line;
  std::size_t listed = 0;
  for (const RequestResult& q : r.requests) {
    if (s.serving && ++listed > kSummaryRequests) {
      o << "... " << r.requests.size() - kSummaryRequests << " more in requests.csv\n";
      break;
    }
    const double share =
        q.ttft() > 0 ? 100.0 * static_cast<double>(q.exposed()) / static_cast<double>(q.ttft()) : 0;
    std::snprintf(line, sizeof line, "%4d %7llu %12s %12s %12s %12s %6.2f%% %10s %s%s\n", q.id,
                  static_cast<unsigned long long>(q.prompt_tokens),
                  model::format_time(q.arrival).c_str(), model::format_time(q.prefill_end).c_str(),
                  model::format_time(q.transfer_end).c_str(),
                  model::format_time(q.exposed()).c_str(), share,
                  model::format_bytes(double(q.bytes)).c_str(), q.status.c_str(),
                  q.verified          ? " (bytes verified)"
                  : q.ok && q.checked ? " (BYTES DIFFER)"
                                      : "");
    o << line;
  }
  // Over every succeeded request, listed or not, as the serving table's "exposed KV" row.
  double exposed_sum = 0;
  std::size_t succeeded = 0;
  for (const RequestResult& q : r.requests) {
    if (!q.ok) continue;
    exposed_sum += us(q.exposed());
    ++succeeded;
  }
  if (succeeded > 0) {
    std::snprintf(line, sizeof line,
                  "\nmean exposed transfer: %.1f us over %zu succeeded requests\n",
                  exposed_sum / double(succeeded), succeeded);
    o << line;
  }
  o << "\nbusiest links:\n";
  for (std::size_t i = 0; i < r.links.size() && i < 8; ++i) {
    std::snprintf(line, sizeof line, "  %-24s %10s  %5.1f%% busy\n", r.links[i].name.c_str(),
                  model::format_bytes(r.links[i].bytes).c_str(), 100 * r.links[i].utilization);
    o << line;
  }
  o << "\ndiagnostics: " << (r.diagnostics.empty() ? "none" : std::to_string(r.diagnostics.size()))
    << "\n";
  for (const auto& d : r.diagnostics) o << "  " << d << "\n";
  return o.str();
}

std::string result_json(const RunResult& r) {
  nlohmann::ordered_json j;
  const Scenario& s = r.scenario;
  j["schema"] = kResultSchema;
  j["scenario"] = {{"origin", s.origin},
                   {"question", s.question},
                   {"preset", s.preset},
                   {"model", s.model.name},
                   {"layers", s.model.layers},
                   {"tensor_parallel", s.tensor_parallel},
                   {"paged", s.paged},
                   {"block_tokens", s.block_tokens},
                   {"method", to_string(s.method)},
                   {"api", s.api_version}};
  nlohmann::ordered_json hw = nlohmann::ordered_json::object();
  for (const auto& [k, v] : s.hardware_overrides) hw[k] = v;
  j["scenario"]["hardware_overrides"] = hw;
  j["line_rate_gbps"] = r.line_rate / 1e9;
  j["effective_rate_gbps"] = r.effective_rate / 1e9;
  j["end_us"] = us(r.end);
  auto& reqs = j["requests"] = nlohmann::ordered_json::array();
  for (const RequestResult& q : r.requests) {
    reqs.push_back({{"id", q.id},
                    {"prompt_tokens", q.prompt_tokens},
                    {"arrival_us", us(q.arrival)},
                    {"prefill_start_us", us(q.prefill_start)},
                    {"prefill_end_us", us(q.prefill_end)},
                    {"transfer_start_us", us(q.transfer_start)},
                    {"transfer_end_us", us(q.transfer_end)},
                    {"exposed_us", us(q.exposed())},
                    {"ttft_us", us(q.ttft())},
                    {"bytes", q.bytes},
                    {"effective_gbps", q.effective_bandwidth() / 1e9},
                    {"ok", q.ok},
                    {"status", q.status},
                    {"verified", q.verified}});
    if (!s.serving) continue;
    auto& x = reqs.back();
    x["checked"] = q.checked;
    x["output_tokens"] = q.output_tokens;
    x["prefill_instance"] = q.prefill_instance;
    x["decode_instance"] = q.decode_instance;
    x["queueing_us"] = us(q.queueing());
    x["kv_ready_us"] = us(q.kv_ready());
    if (q.retries > 0) x["retries"] = q.retries;
    if (q.recomputes > 0) x["recomputes"] = q.recomputes;
    if (q.preemptions > 0) x["preemptions"] = q.preemptions;
    x["decode_start_us"] = us(q.decode_start);
    x["first_token_us"] = us(q.first_token);
    x["completion_us"] = us(q.completion);
    x["tpot_us"] = us(q.tpot());
  }
  if (s.serving) {
    const serving::ServingMetrics m = serving::serving_metrics(r);
    j["serving"] = {{"prefill_instances", s.serving->prefill_instances},
                    {"decode_instances", s.serving->decode_instances},
                    {"verify_fraction", s.serving->verify_fraction},
                    {"slo_ttft_us", us(s.serving->slo_ttft)},
                    {"slo_tpot_us", us(s.serving->slo_tpot)},
                    {"requests", m.requests},
                    {"succeeded", m.succeeded},
                    {"checked", m.checked},
                    {"verified", m.verified},
                    {"ttft_us", percentiles_json(m.ttft)},
                    {"kv_ready_us", percentiles_json(m.kv_ready)},
                    {"exposed_us", percentiles_json(m.exposed)},
                    {"queueing_us", percentiles_json(m.queueing)},
                    {"tpot_us", percentiles_json(m.tpot)},
                    {"e2e_us", percentiles_json(m.e2e)},
                    {"slo_attainment", m.slo_attainment},
                    {"goodput_rps", m.goodput_rps},
                    {"throughput_rps", m.throughput_rps}};
    if (r.relinks > 0) j["serving"]["relinks"] = r.relinks;
    if (r.restarts > 0) j["serving"]["restarts"] = r.restarts;
    auto& series = j["series"] = nlohmann::ordered_json::object();
    std::vector<double> times;
    for (const model::SimTime t : r.sample_times) times.push_back(us(t));
    series["time_us"] = times;
    for (const TimeSeries& t : r.series) series[t.name] = t.values;
  }
  auto& links = j["links"] = nlohmann::ordered_json::array();
  for (const LinkUsage& l : r.links) {
    links.push_back(
        {{"name", l.name}, {"type", l.type}, {"bytes", l.bytes}, {"utilization", l.utilization}});
  }
  j["diagnostics"] = r.diagnostics;
  // Bytes that are not UTF-8 (a diagnostic quoting a user's bytes) become U+FFFD, not an error.
  return j.dump(1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

void write_results(const RunResult& r, const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error("cannot create output folder '" + dir + "': " + ec.message());
  const fs::path d(dir);
  write_file(d / "summary.txt", summary_text(r));
  write_file(d / "result.json", result_json(r));
  std::ostringstream req;
  req << "id,prompt_tokens,arrival_us,prefill_start_us,prefill_end_us,transfer_end_us,exposed_us,"
         "ttft_us,bytes,status,verified,checked,output_tokens,prefill_instance,decode_instance,"
         "queueing_us,kv_ready_us,first_token_us,tpot_us,completion_us,preemptions\n";
  for (const RequestResult& q : r.requests) {
    req << q.id << ',' << q.prompt_tokens << ',' << us(q.arrival) << ',' << us(q.prefill_start)
        << ',' << us(q.prefill_end) << ',' << us(q.transfer_end) << ',' << us(q.exposed()) << ','
        << us(q.ttft()) << ',' << q.bytes << ',' << q.status << ',' << (q.verified ? 1 : 0) << ','
        << (q.checked ? 1 : 0) << ',' << q.output_tokens << ',' << q.prefill_instance << ','
        << q.decode_instance << ',' << us(q.queueing()) << ',' << us(q.kv_ready()) << ','
        << us(q.first_token) << ',' << us(q.tpot()) << ',' << us(q.completion) << ','
        << q.preemptions << '\n';
  }
  write_file(d / "requests.csv", req.str());
  std::ostringstream links;
  links << "link,type,bytes,utilization\n";
  for (const LinkUsage& l : r.links)
    links << l.name << ',' << l.type << ',' << l.bytes << ',' << l.utilization << '\n';
  write_file(d / "links.csv", links.str());
  std::ostringstream compute;
  compute << "request,layer,start_us,end_us\n";
  for (const ComputeSpan& c : r.compute)
    compute << c.request << ',' << c.layer << ',' << us(c.start) << ',' << us(c.end) << '\n';
  write_file(d / "compute.csv", compute.str());
  std::string diags;
  for (const auto& x : r.diagnostics) diags += x + "\n";
  write_file(d / "diagnostics.txt", diags);
  if (!r.trace_json.empty()) write_file(d / "trace.json", r.trace_json);
}

}  // namespace kvsim::sim
