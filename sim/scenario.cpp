#include "sim/scenario.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <random>
#include <regex>
#include <sstream>
#include <tuple>

#include "model/errors.h"
#include "model/yaml_reader.h"

namespace kvsim::sim {
namespace {

using model::ErrorKind;
using model::ModelError;
using model::SimTime;
using model::YamlReader;

// Bytes of one element of `dtype` (model.dtype, cache.kv_dtype); 0 if it is not one kvsim knows.
std::uint32_t dtype_bytes_of(const std::string& dtype) {
  if (dtype == "bf16" || dtype == "fp16") return 2;
  if (dtype == "fp32") return 4;
  if (dtype == "int8" || dtype == "fp8") return 1;
  return 0;
}

// One request's whole prefill may take at most this long: 64-bit picoseconds hold 213 days.
constexpr double kLongestPrefillSeconds = 1e6;

// Seconds to simulated time, rounded up (callers keep `seconds` within kLongestPrefillSeconds).
SimTime seconds_to_ps(double seconds) {
  return static_cast<SimTime>(std::ceil(seconds * 1e12));
}

// A copy of `n` whose nodes carry no position: errors in it then name the file's line of the key
// it replaces, as for a scalar override, not line 1 of the --set text.
YAML::Node without_marks(const YAML::Node& n) {
  if (n.IsSequence()) {
    YAML::Node out(YAML::NodeType::Sequence);
    for (const YAML::Node& item : n) out.push_back(without_marks(item));
    return out;
  }
  if (n.IsMap()) {
    YAML::Node out(YAML::NodeType::Map);
    for (const auto& kv : n) out[kv.first.Scalar()] = without_marks(kv.second);
    return out;
  }
  return n.IsNull() ? YAML::Node() : YAML::Node(n.Scalar());
}

// An override's value as YAML: a flow list or mapping ("[link_down, nic_lost]", "{min: 1}") is
// parsed, anything else stays the text it is (a scalar, as the file would give it).
YAML::Node override_value(const std::string& origin, const std::string& key,
                          const std::string& value) {
  if (value.empty() || (value.front() != '[' && value.front() != '{')) return YAML::Node(value);
  try {
    return without_marks(YAML::Load(value));
  } catch (const YAML::Exception& e) {
    throw ModelError(ErrorKind::kFormat, origin + ": override " + key + "=" + value +
                                             ": not a YAML flow list or mapping (" + e.msg + ")");
  }
}

void apply_overrides(YAML::Node root, const std::string& origin,
                     const std::vector<ScenarioOverride>& overrides) {
  for (const auto& [key, value] : overrides) {
    std::vector<std::string> parts;
    std::stringstream ss(key);
    for (std::string p; std::getline(ss, p, '.');) parts.push_back(p);
    if (parts.empty() || std::find(parts.begin(), parts.end(), "") != parts.end()) {
      throw ModelError(ErrorKind::kFormat,
                       origin + ": override key '" + key + "' is not a dotted key");
    }
    if (!root.IsMap() && !root.IsNull()) {
      throw ModelError(ErrorKind::kFormat, origin + ": override key '" + key +
                                               "' applies to a mapping, and the file is not one");
    }
    // Walk with fresh handles: YAML::Node assignment would rebind, not descend.
    std::vector<YAML::Node> chain{root};
    for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
      YAML::Node next = chain.back()[parts[i]];
      if (next && !next.IsMap()) {
        throw ModelError(ErrorKind::kFormat, origin + ": override key '" + key + "': '" + parts[i] +
                                                 "' is not a mapping");
      }
      chain.push_back(next);
    }
    chain.back()[parts.back()] = override_value(origin, key, value);
  }
}

// Flattens a mapping of preset values into dotted overrides ("scale_out.bandwidth", "200Gb/s").
void flatten(const YAML::Node& node, const std::string& prefix, std::vector<model::Override>& out) {
  for (const auto& kv : node) {
    const std::string key =
        prefix.empty() ? kv.first.as<std::string>() : prefix + "." + kv.first.as<std::string>();
    if (kv.second.IsMap())
      flatten(kv.second, key, out);
    else
      out.emplace_back(key, kv.second.Scalar());
  }
}

// A length: a number, {min, max} (uniform) or {distribution: lognormal, median, sigma, min, max}.
serving::LengthSpec read_length(YamlReader& w, const std::string& key) {
  serving::LengthSpec l;
  const YAML::Node given = w.node()[key];
  if (!given || !given.IsMap()) {
    l.value = static_cast<std::uint64_t>(w.integer(key, key == "output_tokens" ? 0 : 1, 1 << 24));
    return l;
  }
  YamlReader r = w.child(key);
  if (r.has("distribution")) {
    if (r.text("distribution") != "lognormal") {
      r.fail_key("distribution", "must be lognormal (or give min and max for uniform)");
    }
    l.kind = serving::LengthSpec::Kind::kLognormal;
    l.median = r.real("median", 0, 1 << 24);
    l.sigma = r.real("sigma", -1, 10);  // (-1, 10]: 0 is a fixed length at the median
    if (l.sigma < 0) r.fail_key("sigma", "must be >= 0");
    l.min = r.has("min") ? static_cast<std::uint64_t>(r.integer("min", 1, 1 << 24)) : 1;
    l.max = r.has("max") ? static_cast<std::uint64_t>(r.integer("max", 1, 1 << 24)) : 1 << 24;
  } else {
    l.kind = serving::LengthSpec::Kind::kUniform;
    l.min = static_cast<std::uint64_t>(r.integer("min", 1, 1 << 24));
    l.max = static_cast<std::uint64_t>(r.integer("max", 1, 1 << 24));
  }
  if (l.max < l.min) w.fail_key(key, "has max < min");
  r.finish();
  return l;
}

// workload.trace: a path, or {file, format, rate_scale, window: {from, to}, max_prompt_tokens,
// limit}.
std::vector<Request> read_workload_trace(YamlReader& w, const std::string& base_dir) {
  serving::TraceOptions o;
  std::string file;
  const YAML::Node given = w.node()["trace"];
  if (given && given.IsMap()) {
    YamlReader t = w.child("trace");
    file = t.text("file");
    if (t.has("format")) {
      o.format = t.parsed<serving::TraceFormat>("format", [](const std::string& f) {
        try {
          return serving::trace_format_from_string(f);
        } catch (const std::invalid_argument& e) {
          throw ModelError(ErrorKind::kInvalidArgument, e.what());
        }
      });
    }
    if (t.has("rate_scale")) o.rate_scale = t.real("rate_scale", 0, 1e6);
    if (t.has("window")) {
      YamlReader win = t.child("window");
      if (win.has("from")) o.window_from = win.time("from");
      if (win.has("to")) o.window_to = win.time("to");
      if (o.window_from && o.window_to && *o.window_to <= *o.window_from) {
        t.fail_key("window", "must end after it starts");
      }
    }
    if (t.has("max_prompt_tokens")) {
      o.max_prompt_tokens = static_cast<std::uint64_t>(t.integer("max_prompt_tokens", 1, 1 << 24));
    }
    if (t.has("limit")) o.limit = static_cast<std::size_t>(t.integer("limit", 1, 10'000'000));
  } else {
    file = w.text("trace");
  }
  std::filesystem::path p = file;
  if (p.is_relative()) p = std::filesystem::path(base_dir) / p;
  try {
    return serving::read_trace(p.string(), o);
  } catch (const std::invalid_argument& e) {
    w.fail_key("trace", std::string("is unusable: ") + e.what());
  }
}

// "2 x TP8" or "2": an instance count, with its tensor parallelism if given.
std::pair<int, int> read_instances(YamlReader& r, const std::string& key) {
  const std::string text = r.text(key);
  static const std::regex form(R"(^\s*(\d{1,4})\s*(?:[xX*]\s*[Tt][Pp]\s*(\d{1,3}))?\s*$)");
  std::smatch m;
  if (!std::regex_match(text, m, form)) {
    r.fail_key(key, "must be a count with an optional tensor parallelism, e.g. '2 x TP8'");
  }
  const int count = std::stoi(m[1]);
  if (count < 1 || count > 1024) r.fail_key(key, "must have 1 to 1024 instances");
  return {count, m[2].matched ? std::stoi(m[2]) : 0};
}

// serving: {engine, request_overhead, bootstrap, handoff, transfer_overhead,
// first_token_overhead, decode_request_overhead}: the engine profile, then the scenario's own
// values of its costs.
EngineProfile read_engine(YamlReader& r) {
  EngineProfile e;
  if (r.has("engine")) {
    try {
      e = load_engine(r.text("engine"));
    } catch (const ModelError& err) {
      r.fail_key("engine", err.what());
    }
  }
  for (const auto& [key, field] : e.costs()) {
    if (!r.has(key)) continue;
    if (e.name == "none") r.fail_key(key, "sets an engine cost: name the engine (serving.engine)");
    *field = r.time(key);
  }
  return e;
}

// instances: {prefill, decode} and serving: {router, token_budget, decode_batch, cache_blocks,
// memory_utilization, decode_efficiency, verify, slo: {ttft, tpot}}.
ServingSpec read_serving(YamlReader& top, Scenario& s) {
  ServingSpec v;
  {
    YamlReader in = top.child("instances");
    for (const char* side : {"prefill", "decode"}) {
      const auto [count, tp] = read_instances(in, side);
      if (tp != 0 && tp != s.tensor_parallel) {
        in.fail_key(side, "has TP" + std::to_string(tp) + " but model.tensor_parallel is " +
                              std::to_string(s.tensor_parallel) +
                              " (KV shards move rank to rank, so both sides use the model's TP)");
      }
      (std::string(side) == "prefill" ? v.prefill_instances : v.decode_instances) = count;
    }
  }
  if (!top.has("serving")) return v;
  YamlReader r = top.child("serving");
  s.engine = read_engine(r);
  if (r.has("router")) {
    const std::string router = r.text("router");
    if (router == "round_robin")
      v.router = ServingSpec::Router::kRoundRobin;
    else if (router == "least_loaded")
      v.router = ServingSpec::Router::kLeastLoaded;
    else
      r.fail_key("router", "must be round_robin or least_loaded");
  }
  if (r.has("token_budget")) {
    v.token_budget = static_cast<std::uint64_t>(r.integer("token_budget", 1, 1 << 24));
  }
  if (r.has("decode_batch")) v.decode_batch = static_cast<int>(r.integer("decode_batch", 1, 65536));
  if (r.has("cache_blocks")) v.cache_blocks = r.integer("cache_blocks", 1, 1 << 24);
  if (r.has("memory_utilization")) v.memory_utilization = r.real("memory_utilization", 0, 1);
  if (r.has("decode_efficiency")) v.decode_efficiency = r.real("decode_efficiency", 0, 1);
  if (r.has("verify")) {
    v.verify_fraction = r.real("verify", -1, 1);
    if (v.verify_fraction < 0) r.fail_key("verify", "must be a fraction in [0, 1]");
  }
  if (r.has("slo")) {
    YamlReader slo = r.child("slo");
    if (slo.has("ttft")) v.slo_ttft = slo.time("ttft");
    if (slo.has("tpot")) v.slo_tpot = slo.time("tpot");
  }
  if (r.has("recovery")) {
    YamlReader rec = r.child("recovery");
    if (rec.has("retries")) v.recovery.retries = static_cast<int>(rec.integer("retries", 0, 1000));
    if (rec.has("pause")) v.recovery.pause = rec.time("pause");
    if (rec.has("relink")) v.recovery.relink = rec.boolean("relink");
    if (rec.has("recompute")) {
      v.recovery.recompute = static_cast<int>(rec.integer("recompute", 0, 1000));
    }
    if (rec.has("link_timeout")) {
      v.recovery.link_timeout_ms = rec.integer("link_timeout", 1, 3'600'000);
    }
    rec.finish();
  }
  r.finish();
  return v;
}

// A [FIRST, LAST] pair of times under fault_plan.
std::pair<SimTime, SimTime> time_range(YamlReader& r, const std::string& key) {
  const YAML::Node v = r.need(key);
  if (!v.IsSequence() || v.size() != 2 || !v[0].IsScalar() || !v[1].IsScalar()) {
    r.fail(v, r.qualified(key), "must be [FIRST, LAST], two times (e.g. [10ms, 2s])");
  }
  SimTime t[2];
  for (std::size_t i = 0; i < 2; ++i) {
    try {
      t[i] = model::parse_time(v[i].Scalar());
    } catch (const model::ModelError& e) {
      r.fail(v[i], r.qualified(key), std::string("has a bad value: ") + e.what());
    }
  }
  if (t[1] < t[0]) r.fail(v, r.qualified(key), "must have FIRST <= LAST");
  return {t[0], t[1]};
}

// fault_plan: {kinds, window, duration, count, factor, delay, scope, processes}, what `kvsim run
// --faults` draws. `serving`: the scenario's instances, which processes: names.
FaultPlan read_fault_plan(YamlReader& top, const std::optional<ServingSpec>& serving) {
  YamlReader r = top.child("fault_plan");
  FaultPlan plan;
  if (r.has("kinds")) {
    const YAML::Node list = r.node()["kinds"];
    if (!list.IsSequence() || list.size() == 0) {
      r.fail(list, r.qualified("kinds"),
             "must be a non-empty list of link_down, link_degraded, "
             "nic_lost, device_oom, process_killed, completion_delay, queue_stall");
    }
    plan.kinds.clear();
    for (const YAML::Node& k : list) {
      const std::string name = k.IsScalar() ? k.Scalar() : "";
      if (name == "link_down")
        plan.kinds.push_back(FaultPlan::Kind::kLinkDown);
      else if (name == "link_degraded")
        plan.kinds.push_back(FaultPlan::Kind::kLinkDegraded);
      else if (name == "nic_lost")
        plan.kinds.push_back(FaultPlan::Kind::kNicLost);
      else if (name == "device_oom")
        plan.kinds.push_back(FaultPlan::Kind::kDeviceOom);
      else if (name == "completion_delay")
        plan.kinds.push_back(FaultPlan::Kind::kCompletionDelay);
      else if (name == "queue_stall")
        plan.kinds.push_back(FaultPlan::Kind::kQueueStall);
      else if (name == "process_killed" && serving)
        plan.kinds.push_back(FaultPlan::Kind::kProcessKilled);
      else if (name == "process_killed")
        r.fail(k, r.qualified("kinds"),
               "has process_killed, which kills serving instances, and the scenario has none (an "
               "instances: section makes a serving study)");
      else
        r.fail(k, r.qualified("kinds"),
               "has '" + name +
                   "': the kinds are link_down, link_degraded, nic_lost, device_oom, "
                   "process_killed, completion_delay and queue_stall");
    }
  }
  if (r.has("window")) std::tie(plan.window_first, plan.window_last) = time_range(r, "window");
  if (r.has("duration")) {
    std::tie(plan.duration_first, plan.duration_last) = time_range(r, "duration");
  }
  if (r.has("count")) plan.count = static_cast<int>(r.integer("count", 1, 1000));
  if (r.has("factor")) plan.factor = r.real("factor", 0, 1);
  if (r.has("delay")) {
    plan.delay = r.time("delay");
    if (plan.delay == 0 || plan.delay > 3600 * model::kSec) {
      r.fail_key("delay", "must be more than 0 and at most 1 hour");
    }
  }
  if (r.has("scope")) {
    const std::string scope = r.text("scope");
    if (scope != "node" && scope != "nic") r.fail_key("scope", "must be node or nic");
    plan.per_nic = scope == "nic";
  }
  if (r.has("processes")) {
    const YAML::Node list = r.node()["processes"];
    if (!serving) r.fail_key("processes", "names serving instances, and the scenario has none");
    const std::string rule = "must be a non-empty list of instance names (prefill0 to prefill" +
                             std::to_string(serving->prefill_instances - 1) +
                             ", decode0 to decode" + std::to_string(serving->decode_instances - 1) +
                             ")";
    if (!list.IsSequence() || list.size() == 0) r.fail(list, r.qualified("processes"), rule);
    for (const YAML::Node& k : list) {
      const std::string name = k.IsScalar() ? k.Scalar() : "";
      const auto index = [&](const std::string& prefix, int count) {
        if (name.rfind(prefix, 0) != 0 || name.size() == prefix.size() || name.size() > 12 ||
            name.find_first_not_of("0123456789", prefix.size()) != std::string::npos) {
          return false;
        }
        return std::stoi(name.substr(prefix.size())) < count;
      };
      if (!index("prefill", serving->prefill_instances) &&
          !index("decode", serving->decode_instances)) {
        r.fail(k, r.qualified("processes"), "has '" + name + "': " + rule);
      }
      plan.processes.push_back(name);
    }
  }
  r.finish();
  return plan;
}

// True if `text` is well-formed UTF-8 (results are JSON, which carries nothing else).
bool valid_utf8(const std::string& text) {
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    const std::size_t n = c < 0x80           ? 1
                          : (c >> 5) == 0x6  ? 2
                          : (c >> 4) == 0xE  ? 3
                          : (c >> 3) == 0x1E ? 4
                                             : 0;
    if (n == 0 || i + n > text.size() || (n == 2 && c < 0xC2)) return false;
    for (std::size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

Scenario read(const YAML::Node& root, const std::string& origin, const std::string& base_dir) {
  Scenario s;
  s.origin = origin;
  YamlReader top(root, origin, "");
  s.question = top.text("question");
  if (!valid_utf8(s.question)) top.fail_key("question", "must be valid UTF-8 text");
  {
    YamlReader hw = top.child("hardware");
    s.preset = hw.text("preset");
    for (const auto& kv : hw.node()) {
      const std::string key = kv.first.as<std::string>();
      if (key == "preset") continue;
      hw.has(key);
      if (kv.second.IsMap())
        flatten(kv.second, key, s.hardware_overrides);
      else
        s.hardware_overrides.emplace_back(key, kv.second.Scalar());
    }
    try {
      const model::TopologySpec spec = model::load_preset(s.preset, s.hardware_overrides);
      (void)spec;
    } catch (const ModelError& e) {
      hw.fail_key("preset", std::string("with its overrides is not a valid machine: ") + e.what());
    }
  }
  {
    YamlReader m = top.child("model");
    const std::string name = m.text("name");
    if (m.has("layers")) {
      // An inline shape (a model outside the library, or a synthetic one for calibration).
      s.model = read_model_shape(m, name);
    } else {
      try {
        s.model = load_model(name);
      } catch (const ModelError& e) {
        m.fail_key("name", e.what());
      }
    }
    s.tensor_parallel = static_cast<int>(m.integer("tensor_parallel", 1, 64));
    s.dtype = m.text("dtype");
    s.dtype_bytes = dtype_bytes_of(s.dtype);
    if (s.dtype_bytes == 0) m.fail_key("dtype", "must be one of bf16, fp16, fp32, int8, fp8");
  }
  std::optional<std::string> kv_dtype;  // cache.kv_dtype; its default needs the engine
  {
    YamlReader c = top.child("cache");
    const std::string layout = c.text("layout");
    if (layout == "paged") {
      s.paged = true;
      s.block_tokens = static_cast<std::uint32_t>(c.integer("block_tokens", 1, 65536));
      if (c.has("block_table")) {
        const std::string order = c.text("block_table");
        if (order == "vllm") {
          s.block_order = BlockOrder::kVllm;
        } else if (order == "sequential") {
          s.block_order = BlockOrder::kSequential;
        } else if (order == "scattered") {
          s.block_order = BlockOrder::kScattered;
        } else {
          c.fail_key("block_table", "must be vllm, sequential or scattered");
        }
      }
    } else if (layout != "contiguous") {
      c.fail_key("layout", "must be contiguous or paged");
    }
    if (c.has("kv_dtype")) {
      kv_dtype = c.text("kv_dtype");
      if (dtype_bytes_of(*kv_dtype) == 0) {
        c.fail_key("kv_dtype", "must be one of bf16, fp16, fp32, int8, fp8");
      }
    }
    for (const auto& [key, on_host] : {std::pair{"prompt_memory", &s.prompt_on_host},
                                       std::pair{"decode_memory", &s.decode_on_host}}) {
      if (!c.has(key)) continue;
      const std::string where = c.text(key);
      if (where != "device" && where != "host") c.fail_key(key, "must be device or host");
      *on_host = where == "host";
    }
  }
  {
    YamlReader w = top.child("workload");
    if (w.has("trace")) {
      s.requests = read_workload_trace(w, base_dir);
    } else {
      serving::SyntheticSpec spec;
      spec.count = static_cast<std::size_t>(w.integer("requests", 1, 1'000'000));
      if (w.has("arrivals")) {
        YamlReader a = w.child("arrivals");
        const std::string process = a.text("process");
        if (process == "poisson") {
          spec.process = serving::SyntheticSpec::Process::kPoisson;
        } else if (process == "gamma") {
          spec.process = serving::SyntheticSpec::Process::kGamma;
          spec.cv = a.real("cv", 0, 100);
        } else if (process == "uniform") {
          spec.process = serving::SyntheticSpec::Process::kUniform;
        } else {
          a.fail_key("process", "must be poisson, gamma or uniform");
        }
        spec.rate = a.real("rate", 0, 1e9);  // requests per second
        if (w.has("interval")) w.fail_key("interval", "cannot go with arrivals (give a rate)");
      } else {
        spec.interval = w.time("interval");
      }
      spec.prompt = read_length(w, "prompt_tokens");
      if (w.has("output_tokens")) spec.output = read_length(w, "output_tokens");
      spec.seed = w.has("seed") ? static_cast<std::uint64_t>(w.integer("seed", 0, INT64_MAX)) : 1;
      try {
        s.requests = serving::synthesize(spec);
      } catch (const std::invalid_argument& e) {
        w.fail_key("requests", std::string("cannot be drawn: ") + e.what());
      }
    }
  }
  {
    // Checked after the conversion to simulated time: a tiny but positive rate would overflow
    // the picosecond count and wrap to a silently wrong prefill.
    auto longest_prefill_s = [&s] {
      std::uint64_t longest = 0;
      for (const Request& q : s.requests) longest = std::max(longest, q.prompt_tokens);
      if (s.prefill_from_preset) {
        return std::pair{
            longest,
            s.compute.prefill_layer(s.model, longest, s.tensor_parallel, s.dtype_bytes).total() *
                s.model.layers};
      }
      const double flops = s.model.prefill_flops_per_layer(longest) / s.tensor_parallel;
      return std::pair{longest,
                       flops / (s.device_tflops * 1e12 * s.compute_efficiency) * s.model.layers};
    };
    auto rule = [&s](std::uint64_t longest, double prefill_s) {
      char text[200];
      std::snprintf(text, sizeof text,
                    "with efficiency %g gives a %.3g s prefill for the %llu-token prompt; "
                    "simulated time allows at most %.0f s",
                    s.compute_efficiency, prefill_s, static_cast<unsigned long long>(longest),
                    kLongestPrefillSeconds);
      return std::string(text);
    };
    const model::TopologySpec preset = model::load_preset(s.preset, s.hardware_overrides);
    s.compute = ComputeModel::from(preset, s.dtype);
    if (!top.has("prefill")) {
      // The preset's compute model at the scenario's dtype.
      s.device_tflops = s.compute.peak_flops / 1e12;
      s.compute_efficiency = preset.compute.gemm_efficiency;
      s.prefill_from_preset = true;
      if (!(s.device_tflops > 0 && s.compute_efficiency > 0)) {
        top.fail_key("prefill", "is required: preset " + s.preset + " gives no " + s.dtype +
                                    " compute (its compute: section)");
      }
      const auto [longest, prefill_s] = longest_prefill_s();
      if (!(prefill_s <= kLongestPrefillSeconds)) top.fail_key("prefill", rule(longest, prefill_s));
    } else {
      YamlReader p = top.child("prefill");
      if (p.has("layer_time")) {
        s.layer_time = p.time("layer_time");
      } else {
        s.device_tflops = p.real("device_tflops", 0, 1e6);
        s.compute_efficiency = p.real("efficiency", 0, 1);
        const auto [longest, prefill_s] = longest_prefill_s();
        if (!(prefill_s <= kLongestPrefillSeconds)) {
          p.fail_key("device_tflops", rule(longest, prefill_s));
        }
      }
    }
  }
  {
    YamlReader t = top.child("transfer");
    if (t.has("path")) {
      // The preset's transfer path software (its `paths:`), applied before the user's overrides
      // so those still win: the hixl_cs client or HCCL's comm domain on the same wires.
      s.hardware_overrides.insert(s.hardware_overrides.begin(), {"path", t.text("path")});
      try {
        (void)model::load_preset(s.preset, s.hardware_overrides);
      } catch (const ModelError& e) {
        t.fail_key("path", "must name one of the preset's transfer paths (its paths: section): " +
                               std::string(e.what()));
      }
    }
    const std::string method = t.text("method");
    if (method == "layerwise")
      s.method = TransferMethod::kLayerwise;
    else if (method == "pull_blocks")
      s.method = TransferMethod::kPullBlocks;
    else if (method == "push_blocks")
      s.method = TransferMethod::kPushBlocks;
    else
      t.fail_key("method", "must be layerwise, pull_blocks or push_blocks");
    s.api_version = static_cast<int>(t.integer("api", 1, 2));
    if (t.has("sync_kv_timeout")) s.sync_kv_timeout_ms = t.integer("sync_kv_timeout", 1, INT32_MAX);
    if (s.method != TransferMethod::kLayerwise && !s.paged) {
      t.fail_key("method", std::string(to_string(s.method)) + " needs cache.layout: paged");
    }
    if (s.prompt_on_host || s.decode_on_host) {
      // Host caches are CacheManager (v2) caches; transfer_cache_async takes no HOST source
      // (hixl src/python/llm_datadist/llm_datadist/v2/cache_manager.py transfer_cache_async:
      // "src cache not support placement HOST").
      if (s.api_version != 2) t.fail_key("api", "must be 2 with a cache in host memory");
      if (s.prompt_on_host && s.method != TransferMethod::kPullBlocks) {
        t.fail_key("method",
                   "must be pull_blocks with cache.prompt_memory: host "
                   "(transfer_cache_async takes no HOST source)");
      }
      if (top.node()["instances"]) {
        t.fail_key("method",
                   "serving studies keep their caches in HBM (cache.*_memory: host "
                   "is for single-request runs)");
      }
    }
    if (s.method == TransferMethod::kPushBlocks && !top.node()["instances"]) {
      t.fail_key("method", "push_blocks is run by the serving runner: add an instances section");
    }
  }
  const model::TopologySpec spec = model::load_preset(s.preset, s.hardware_overrides);
  if (top.has("instances")) {
    if (!s.paged) top.fail_key("instances", "serving studies need cache.layout: paged");
    if (s.api_version != 2) top.fail_key("instances", "serving studies need transfer.api: 2");
    if (top.has("placement")) {
      top.fail_key("placement", "cannot go with instances (instances place themselves)");
    }
    s.serving = read_serving(top, s);
    const int per_node = spec.devices_per_node / s.tensor_parallel;
    if (per_node < 1) {
      top.fail_key("instances", "TP" + std::to_string(s.tensor_parallel) + " does not fit a " +
                                    std::to_string(spec.devices_per_node) + "-device node");
    }
    const int needed = (s.serving->prefill_instances + per_node - 1) / per_node +
                       (s.serving->decode_instances + per_node - 1) / per_node;
    if (needed > spec.nodes) {
      top.fail_key("instances", "need " + std::to_string(needed) + " nodes but the machine has " +
                                    std::to_string(spec.nodes) +
                                    " (set hardware.nodes: " + std::to_string(needed) + ")");
    }
  } else {
    if (top.has("serving")) {
      // One request on a bare pair: only the engine around it (its per-request costs).
      YamlReader r = top.child("serving");
      s.engine = read_engine(r);
      const auto costs = s.engine.costs();
      for (const auto& kv : r.node()) {
        const std::string key = kv.first.as<std::string>();
        if (key != "engine" && std::none_of(costs.begin(), costs.end(),
                                            [&](const auto& c) { return key == c.first; })) {
          r.fail_key(key,
                     "needs an instances section (a single-request run takes only the "
                     "engine and its costs)");
        }
      }
    }
    YamlReader pl = top.child("placement");
    s.prompt_node = static_cast<int>(pl.integer("prompt_node", 0, spec.nodes - 1));
    s.decode_node = static_cast<int>(pl.integer("decode_node", 0, spec.nodes - 1));
    const int needed = s.prompt_node == s.decode_node ? 2 * s.tensor_parallel : s.tensor_parallel;
    if (needed > spec.devices_per_node) {
      pl.fail_key("decode_node", "leaves too few devices: " + std::to_string(needed) +
                                     " ranks on a " + std::to_string(spec.devices_per_node) +
                                     "-device node");
    }
  }
  // vLLM's CacheConfig.cache_dtype and SGLang's --kv-cache-dtype default to "auto": the model's
  // dtype (its activations, bf16 for an fp8 or int8 checkpoint), not the weights' quantization.
  const bool quantized_weights = s.dtype == "int8" || s.dtype == "fp8";
  s.kv_dtype = kv_dtype ? *kv_dtype
                        : (quantized_weights && s.engine.kv_in_activation_dtype ? "bf16" : s.dtype);
  s.kv_dtype_bytes = dtype_bytes_of(s.kv_dtype);
  if (s.engine.decodes && !(s.compute.hbm_rate > 0)) {
    top.fail_key("serving", "names engine " + s.engine.name + ", whose decode step needs the " +
                                "preset's compute: section (preset " + s.preset + " has none)");
  }
  if (top.has("sweep")) {
    const YAML::Node axes = top.node()["sweep"];
    if (!axes.IsMap() || axes.size() == 0) {
      top.fail_key("sweep", "must map dotted keys to lists of values");
    }
    for (const auto& kv : axes) {
      const std::string key = kv.first.as<std::string>();
      std::vector<std::string> values;
      if (kv.second.IsSequence()) {
        for (const auto& v : kv.second) {
          if (!v.IsScalar()) top.fail(v, "sweep." + key, "must list scalar values");
          values.push_back(v.Scalar());
        }
      }
      if (values.empty()) top.fail(kv.second, "sweep." + key, "must be a non-empty list of values");
      s.sweep.emplace_back(key, values);
    }
  }
  if (top.has("faults")) {
    const YAML::Node list = top.node()["faults"];
    if (!list.IsSequence()) top.fail_key("faults", "must be a list");
    model::FluidNetwork net;
    const model::Topology topo(spec, net);
    for (std::size_t i = 0; i < list.size(); ++i) {
      YamlReader f(list[i], origin, "faults[" + std::to_string(i) + "]");
      FaultSpec fs;
      fs.link = f.text("link");
      try {
        topo.link_index(fs.link);
      } catch (const ModelError& e) {
        f.fail_key("link", e.what());
      }
      fs.at = f.time("at");
      const std::string ev = f.text("event");
      if (ev == "down")
        fs.event.kind = model::LinkEvent::Kind::kDown;
      else if (ev == "up")
        fs.event.kind = model::LinkEvent::Kind::kUp;
      else if (ev == "degrade") {
        fs.event.kind = model::LinkEvent::Kind::kDegrade;
        fs.event.factor = f.real("factor", 0, 1);
      } else {
        f.fail_key("event", "must be down, up or degrade");
      }
      s.faults.push_back(fs);
    }
  }
  if (top.has("fault_plan")) s.fault_plan = read_fault_plan(top, s.serving);
  top.finish();
  return s;
}

}  // namespace

const char* to_string(TransferMethod method) {
  switch (method) {
    case TransferMethod::kLayerwise:
      return "layerwise";
    case TransferMethod::kPullBlocks:
      return "pull_blocks";
    case TransferMethod::kPushBlocks:
      return "push_blocks";
  }
  return "?";
}

SimTime Scenario::prefill_layer_time(std::uint64_t prompt_tokens) const {
  if (layer_time) return *layer_time;
  if (prefill_from_preset) {
    return seconds_to_ps(
        compute.prefill_layer(model, prompt_tokens, tensor_parallel, dtype_bytes).total());
  }
  const double flops = model.prefill_flops_per_layer(prompt_tokens) / tensor_parallel;
  return static_cast<SimTime>(
      std::ceil(flops / (device_tflops * 1e12 * compute_efficiency) * 1e12));
}

SimTime Scenario::decode_step_time(std::uint64_t batch, std::uint64_t kv_tokens) const {
  const double kv = static_cast<double>(kv_tokens) *
                    static_cast<double>(model.kv_elements_per_token(tensor_parallel)) * 2.0 *
                    model.layers * kv_dtype_bytes;
  return seconds_to_ps(compute.decode_step(model, tensor_parallel, dtype_bytes, batch, kv)) +
         static_cast<SimTime>(batch) * engine.decode_request_overhead;
}

Scenario load_scenario(const std::string& path, const std::vector<ScenarioOverride>& overrides) {
  YAML::Node root = model::load_yaml_file(path);
  apply_overrides(root, path, overrides);
  Scenario s = read(root, path, std::filesystem::path(path).parent_path().string());
  s.set = overrides;
  return s;
}

Scenario parse_scenario(const std::string& text, const std::string& origin,
                        const std::vector<ScenarioOverride>& overrides,
                        const std::string& base_dir) {
  YAML::Node root = model::load_yaml_text(text, origin);
  apply_overrides(root, origin, overrides);
  Scenario s = read(root, origin, base_dir);
  s.set = overrides;
  return s;
}

}  // namespace kvsim::sim
