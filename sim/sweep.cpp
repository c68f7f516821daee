#include "sim/sweep.h"

#include <sstream>
#include <stdexcept>

#include "sim/serving/metrics.h"

namespace kvsim::sim {
namespace {

double us(model::SimTime t) {
  return static_cast<double>(t) / 1e6;
}

}  // namespace

std::vector<std::string> split_values(const std::string& list) {
  std::vector<std::string> values;
  std::stringstream ss(list);
  for (std::string v; std::getline(ss, v, ',');) values.push_back(v);
  return values;
}

std::vector<std::vector<ScenarioOverride>> cross_product(const std::vector<SweepAxis>& axes) {
  std::size_t count = 1;
  for (const SweepAxis& axis : axes) {
    if (axis.values.empty()) {
      throw std::invalid_argument("sweep axis '" + axis.key + "' has no values");
    }
    if (axis.values.size() > kMaxSweepPoints / count) {
      throw std::invalid_argument("sweep: the axes make more than " +
                                  std::to_string(kMaxSweepPoints) + " points");
    }
    count *= axis.values.size();
  }
  std::vector<std::vector<ScenarioOverride>> points(1);
  for (const SweepAxis& axis : axes) {
    std::vector<std::vector<ScenarioOverride>> next;
    for (const auto& p : points) {
      for (const auto& v : axis.values) {
        next.push_back(p);
        next.back().emplace_back(axis.key, v);
      }
    }
    points = std::move(next);
  }
  return points;
}

SweepRow sweep_row(const RunResult& r) {
  SweepRow row;
  double exposed = 0, ttft = 0, bytes = 0, effective = 0;
  for (const RequestResult& q : r.requests) {
    effective += q.effective_bandwidth() / 1e9;
    exposed += us(q.exposed());
    ttft += us(q.ttft());
    bytes += static_cast<double>(q.bytes);
  }
  const double n = static_cast<double>(r.requests.size());
  row.requests = n;
  row.mean_exposed_us = exposed / n;
  row.mean_ttft_us = ttft / n;
  row.exposed_share_pct = ttft > 0 ? 100 * exposed / ttft : 0;
  row.kv_bytes_per_request = bytes / n;
  row.effective_gbps = effective / n;
  row.line_rate_gbps = r.line_rate / 1e9;
  const serving::ServingMetrics m = serving::serving_metrics(r);
  row.ttft_p50_us = m.ttft.p50;
  row.ttft_p99_us = m.ttft.p99;
  row.kv_ready_p99_us = m.kv_ready.p99;
  row.exposed_p99_us = m.exposed.p99;
  if (r.scenario.serving) {
    row.slo_attainment = m.slo_attainment;
    row.goodput_rps = m.goodput_rps;
  }
  return row;
}

std::string sweep_csv(const std::vector<SweepAxis>& axes, const std::vector<PointOutcome>& points) {
  std::ostringstream csv;
  for (const SweepAxis& axis : axes) csv << axis.key << ',';
  csv << "point,requests,mean_exposed_us,mean_ttft_us,exposed_share_pct,kv_bytes_per_request,"
         "effective_gbps,line_rate_gbps,ttft_p50_us,ttft_p99_us,kv_ready_p99_us,exposed_p99_us,"
         "slo_attainment,goodput_rps,status\n";
  for (std::size_t i = 0; i < points.size(); ++i) {
    for (const auto& [key, value] : points[i].overrides) csv << value << ',';
    if (!points[i].result) {
      csv << i << ",0,,,,,,,,,,,,,failed\n";
      continue;
    }
    const SweepRow row = sweep_row(*points[i].result);
    csv << i << ',' << row.requests << ',' << row.mean_exposed_us << ',' << row.mean_ttft_us << ','
        << row.exposed_share_pct << ',' << row.kv_bytes_per_request << ',' << row.effective_gbps
        << ',' << row.line_rate_gbps << ',' << row.ttft_p50_us << ',' << row.ttft_p99_us << ','
        << row.kv_ready_p99_us << ',' << row.exposed_p99_us << ',';
    if (row.slo_attainment) csv << *row.slo_attainment;
    csv << ',';
    if (row.goodput_rps) csv << *row.goodput_rps;
    csv << ',' << (points[i].exit_code == 0 ? "ok" : "failed") << '\n';
  }
  return csv.str();
}

std::string progress_bar(std::size_t done, std::size_t total) {
  const std::size_t width = 30;
  const std::size_t filled = total == 0 ? width : width * done / total;
  return "  [" + std::string(filled, '#') + std::string(width - filled, ' ') + "] " +
         std::to_string(done) + "/" + std::to_string(total) + " points";
}

}  // namespace kvsim::sim
