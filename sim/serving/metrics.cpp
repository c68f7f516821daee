#include "sim/serving/metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kvsim::sim::serving {
namespace {

double us(model::SimTime t) {
  return static_cast<double>(t) / 1e6;
}

}  // namespace

Percentiles percentiles(std::vector<double> v) {
  Percentiles p;
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  const auto rank = [&](double q) {
    const auto k = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
    return v[std::min(v.size(), std::max<std::size_t>(k, 1)) - 1];
  };
  p.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  p.p50 = rank(0.50);
  p.p90 = rank(0.90);
  p.p99 = rank(0.99);
  p.max = v.back();
  return p;
}

ServingMetrics serving_metrics(const RunResult& r) {
  ServingMetrics m;
  const ServingSpec spec = r.scenario.serving.value_or(ServingSpec{});
  std::vector<double> ttft, kv, exposed, queueing, tpot, e2e;
  std::size_t good = 0;
  for (const RequestResult& q : r.requests) {
    ++m.requests;
    m.checked += q.checked ? 1 : 0;
    m.verified += q.checked && q.verified ? 1 : 0;
    if (!q.ok) continue;
    ++m.succeeded;
    ttft.push_back(us(q.ttft()));
    kv.push_back(us(q.kv_ready()));
    exposed.push_back(us(q.exposed()));
    queueing.push_back(us(q.queueing()));
    if (q.output_tokens > 1) tpot.push_back(us(q.tpot()));
    if (q.completion > 0) e2e.push_back(us(q.completion - q.arrival));
    if (q.ttft() <= spec.slo_ttft && q.tpot() <= spec.slo_tpot) ++good;
  }
  m.ttft = percentiles(ttft);
  m.kv_ready = percentiles(kv);
  m.exposed = percentiles(exposed);
  m.queueing = percentiles(queueing);
  m.tpot = percentiles(tpot);
  m.e2e = percentiles(e2e);
  if (m.requests > 0)
    m.slo_attainment = static_cast<double>(good) / static_cast<double>(m.requests);
  const double seconds = model::to_seconds(r.end);
  if (seconds > 0) {
    m.goodput_rps = static_cast<double>(good) / seconds;
    m.throughput_rps = static_cast<double>(m.succeeded) / seconds;
  }
  return m;
}

}  // namespace kvsim::sim::serving
