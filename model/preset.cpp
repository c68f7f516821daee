#include "model/preset.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "model/errors.h"
#include "model/yaml_reader.h"

#ifndef KVSIM_PRESET_DIR
#define KVSIM_PRESET_DIR "scenarios/presets"
#endif

namespace kvsim::model {
namespace {

namespace fs = std::filesystem;

// A route class's own descriptor costs, efficiencies and overlap (PathSpec); each key optional.
void read_path(YamlReader& r, PathSpec& p, bool with_efficiency) {
  if (r.has("descriptor_cost")) p.descriptor_cost = r.time("descriptor_cost");
  if (r.has("read_descriptor_cost")) p.read_descriptor_cost = r.time("read_descriptor_cost");
  if (with_efficiency && r.has("efficiency")) p.efficiency = r.real("efficiency", 0, 1);
  if (r.has("read_efficiency")) p.read_efficiency = r.real("read_efficiency", 0, 1);
  if (r.has("overlap")) p.overlap = r.boolean("overlap");
}

LinkSpec read_link(YamlReader r, bool has_shape, PathSpec* remote = nullptr) {
  LinkSpec l;
  l.type = r.parsed<LinkType>("type", link_type_from_string);
  if (has_shape) {
    l.shape = r.parsed<FabricShape>("shape", [](const std::string& s) {
      if (s == "mesh") return FabricShape::kMesh;
      if (s == "switch") return FabricShape::kSwitch;
      throw ModelError(ErrorKind::kInvalidArgument, "'" + s + "' must be mesh or switch");
    });
  }
  l.bandwidth = r.rate("bandwidth");
  l.latency = r.time("latency");
  l.efficiency = r.real("efficiency", 0, 1);
  read_path(r, l.path, false);
  if (remote != nullptr && r.has("remote")) {
    YamlReader rr = r.child("remote");
    read_path(rr, *remote, true);
    rr.finish();
  }
  return l;
}

void apply_overrides(YAML::Node root, const std::string& origin,
                     const std::vector<Override>& overrides) {
  for (const auto& [key, value] : overrides) {
    std::vector<std::string> parts;
    std::stringstream ss(key);
    for (std::string p; std::getline(ss, p, '.');) parts.push_back(p);
    YAML::Node node = root;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      if (!node.IsMap() || !node[parts[i]]) {
        throw ModelError(ErrorKind::kFormat,
                         origin + ": override key '" + key + "' does not exist in the preset");
      }
      if (i + 1 == parts.size()) {
        if (!node[parts[i]].IsScalar()) {
          throw ModelError(ErrorKind::kFormat,
                           origin + ": override key '" + key + "' is not a scalar");
        }
        node[parts[i]] = value;
      } else {
        node.reset(node[parts[i]]);
      }
    }
  }
}

// `path: NAME` chooses the transfer path's software among `paths: {NAME: {scale_up: {...},
// scale_out: {...}, host_link: {...}}}`: each tier the chosen entry lists
// takes that PathSpec whole (keys it leaves out inherit from the engine and links, as always);
// an entry that lists nothing ({}) is the path the preset's own sections describe.
void read_paths(YamlReader& top, TopologySpec& s) {
  const std::string chosen = top.text("path");
  std::string base = chosen;  // cleared once found
  if (top.has("paths")) {
    YamlReader paths = top.child("paths");
    for (const auto& kv : paths.node()) {
      const std::string name = kv.first.Scalar();
      YamlReader p = paths.child(name);
      PathSpec up = s.scale_up.path, out = s.scale_out.path, host = s.host_link.path;
      for (auto [key, spec] : {std::pair{"scale_up", &up}, std::pair{"scale_out", &out},
                               std::pair{"host_link", &host}}) {
        if (!p.has(key)) continue;
        *spec = PathSpec{};
        YamlReader tier = p.child(key);
        read_path(tier, *spec, true);
      }
      s.other_paths.push_back(name);
      if (name == chosen) {
        s.scale_up.path = up;
        s.scale_out.path = out;
        s.host_link.path = host;
        base.clear();
      }
    }
  }
  s.path = chosen;
  if (!base.empty()) {
    std::string known;
    for (const auto& n : s.other_paths) known += (known.empty() ? "" : ", ") + n;
    top.fail_key("path", "must name one of the preset's paths (" + known + ")");
  }
}

TopologySpec read_spec(const YAML::Node& root, const std::string& origin) {
  YamlReader top(root, origin, "");
  TopologySpec s;
  s.name = top.text("name");
  s.description = top.text("description");
  s.nodes = static_cast<int>(top.integer("nodes", 1, 254));
  s.devices_per_node = static_cast<int>(top.integer("devices_per_node", 1, 64));
  s.scale_up_nodes = static_cast<int>(top.integer("scale_up_nodes", 1, 254));
  s.device_kind = top.text("device_kind");
  {
    YamlReader hbm = top.child("hbm");
    s.hbm_capacity = hbm.bytes("capacity");
    s.hbm_bandwidth = hbm.rate("bandwidth");
  }
  {
    YamlReader host = top.child("host");
    s.host_capacity = host.bytes("capacity");
    s.host_bandwidth = host.rate("bandwidth");
  }
  {
    YamlReader dma = top.child("dma");
    s.dma.engines = static_cast<int>(dma.integer("engines", 1, 64));
    s.dma.descriptor_cost = dma.time("descriptor_cost");
    s.dma.batch_setup = dma.time("batch_setup");
    s.dma.chunk_descriptors = static_cast<int>(dma.integer("chunk_descriptors", 1, 1 << 20));
    s.dma.queue_depth = static_cast<int>(dma.integer("queue_depth", 1, 1024));
    s.dma.bandwidth = dma.rate("bandwidth");
  }
  s.scale_up = read_link(top.child("scale_up"), true, &s.scale_up_remote);
  s.scale_out = read_link(top.child("scale_out"), false);
  if (top.has("fabric")) {
    YamlReader f = top.child("fabric");
    if (f.has("nics_per_node")) {
      s.fabric.nics_per_node = static_cast<int>(f.integer("nics_per_node", 0, 64));
    }
    if (f.has("nodes_per_leaf")) {
      s.fabric.nodes_per_leaf = static_cast<int>(f.integer("nodes_per_leaf", 0, 254));
    }
    if (f.has("spines")) s.fabric.spines = static_cast<int>(f.integer("spines", 1, 64));
    if (f.has("oversubscription")) s.fabric.oversubscription = f.real("oversubscription", 0, 64);
    if (f.has("uplink_latency")) s.fabric.uplink_latency = f.time("uplink_latency");
  }
  s.host_link = read_link(top.child("host_link"), false);
  if (top.has("path")) read_paths(top, s);
  if (top.has("compute")) {
    YamlReader c = top.child("compute");
    for (auto [key, value] : {std::pair{"tflops_bf16", &s.compute.tflops_bf16},
                              std::pair{"tflops_fp16", &s.compute.tflops_fp16},
                              std::pair{"tflops_fp8", &s.compute.tflops_fp8},
                              std::pair{"tflops_int8", &s.compute.tflops_int8}}) {
      if (c.has(key)) *value = c.real(key, 0, 1e6);
    }
    for (auto [key, value] : {std::pair{"gemm_efficiency", &s.compute.gemm_efficiency},
                              std::pair{"attention_efficiency", &s.compute.attention_efficiency},
                              std::pair{"hbm_efficiency", &s.compute.hbm_efficiency},
                              std::pair{"allreduce_efficiency", &s.compute.allreduce_efficiency}}) {
      *value = c.real(key, 0, 1);
      if (!(*value > 0)) c.fail_key(key, "must be in (0, 1]");
    }
    s.compute.elementwise_passes = c.real("elementwise_passes", 0, 1000);
    s.compute.layer_overhead = c.time("layer_overhead");
  }
  s.scale_up_over_scale_out = top.boolean("scale_up_over_scale_out");
  s.fault_detection_time = top.time("fault_detection_time");
  s.ip_base = top.text("ip_base");
  s.host_ip_base = top.text("host_ip_base");
  (void)top.has("uncertain");  // read by read_uncertain, before overrides
  try {
    s.validate();
  } catch (const ModelError& e) {
    throw ModelError(ErrorKind::kFormat, origin + ": " + e.what());
  }
  top.finish();
  return s;
}

}  // namespace

std::vector<UncertainParameter> read_uncertain(const YAML::Node& root, const std::string& origin) {
  std::vector<UncertainParameter> out;
  if (!root.IsMap() || !root["uncertain"]) return out;
  const YAML::Node section = root["uncertain"];
  auto fail = [&origin](const YAML::Node& at, const std::string& key, const std::string& rule) {
    throw ModelError(ErrorKind::kFormat, origin + ":" + std::to_string(at.Mark().line + 1) +
                                             ": key '" + key + "' " + rule);
  };
  if (!section.IsMap()) fail(section, "uncertain", "must be a mapping of dotted keys");
  for (const auto& entry : section) {
    UncertainParameter p;
    p.key = entry.first.as<std::string>();
    YAML::Node value = root;
    std::stringstream ss(p.key);
    for (std::string part; std::getline(ss, part, '.');) {
      if (!value.IsMap() || !value[part] || part == "uncertain") {
        fail(entry.first, "uncertain." + p.key, "names no value of the preset");
      }
      value.reset(value[part]);
    }
    if (!value.IsScalar()) fail(entry.first, "uncertain." + p.key, "names no scalar");
    p.value = value.Scalar();
    // The keys read_spec reads with integer().
    static const char* const kIntegers[] = {
        "nodes",           "devices_per_node",      "scale_up_nodes",       "dma.engines",
        "dma.queue_depth", "dma.chunk_descriptors", "fabric.nics_per_node", "fabric.nodes_per_leaf",
        "fabric.spines"};
    for (const char* k : kIntegers) p.integer = p.integer || p.key == k;
    YamlReader r(entry.second, origin, "uncertain." + p.key);
    p.low = r.text("low");
    p.high = r.text("high");
    p.source = r.text("source");
    if (r.has("fitted_to")) p.fitted_to = r.text("fitted_to");
    try {
      const Quantity v = parse_quantity(value.Scalar()), lo = parse_quantity(p.low),
                     hi = parse_quantity(p.high);
      if (lo.kind != v.kind || hi.kind != v.kind) {
        throw ModelError(ErrorKind::kInvalidArgument, "low and high must be in the value's unit");
      }
      if (!(lo.value <= v.value && v.value <= hi.value)) {
        throw ModelError(ErrorKind::kInvalidArgument,
                         "needs low <= " + value.Scalar() + " <= high");
      }
    } catch (const ModelError& e) {
      fail(entry.second, "uncertain." + p.key, std::string("has a bad range: ") + e.what());
    }
    out.push_back(std::move(p));
  }
  return out;
}

namespace {

TopologySpec load_node(YAML::Node root, const std::string& origin,
                       const std::vector<Override>& overrides) {
  const YAML::Node pristine = YAML::Clone(root);  // the ranges bound the file's own values
  apply_overrides(root, origin, overrides);
  TopologySpec spec = read_spec(root, origin);  // the machine's own errors first
  spec.uncertain = read_uncertain(pristine, origin);
  return spec;
}

}  // namespace

std::vector<std::string> preset_search_path() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("KVSIM_PRESET_PATH")) {
    std::stringstream ss(env);
    for (std::string d; std::getline(ss, d, ':');) {
      if (!d.empty()) dirs.push_back(d);
    }
  }
  dirs.emplace_back(KVSIM_PRESET_DIR);
  return dirs;
}

std::vector<std::string> available_presets() {
  std::set<std::string> names;
  for (const auto& dir : preset_search_path()) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      if (entry.path().extension() == ".yaml") names.insert(entry.path().stem().string());
    }
  }
  return {names.begin(), names.end()};
}

std::string find_preset(const std::string& name_or_path) {
  if (name_or_path.find('/') != std::string::npos ||
      fs::path(name_or_path).extension() == ".yaml") {
    std::error_code ec;  // a name the OS cannot look up (too long, say) is simply not found
    if (fs::is_regular_file(name_or_path, ec)) return name_or_path;
  } else {
    for (const auto& dir : preset_search_path()) {
      const fs::path p = fs::path(dir) / (name_or_path + ".yaml");
      std::error_code ec;
      if (fs::is_regular_file(p, ec)) return p.string();
    }
  }
  std::string names;
  for (const auto& n : available_presets()) names += (names.empty() ? "" : ", ") + n;
  throw ModelError(ErrorKind::kUnknownPreset,
                   "preset '" + name_or_path + "' not found (available: " + names + ")");
}

TopologySpec load_preset(const std::string& name_or_path, const std::vector<Override>& overrides) {
  const std::string path = find_preset(name_or_path);
  return load_node(load_yaml_file(path), path, overrides);
}

TopologySpec parse_preset(const std::string& yaml_text, const std::string& origin,
                          const std::vector<Override>& overrides) {
  return load_node(load_yaml_text(yaml_text, origin), origin, overrides);
}

}  // namespace kvsim::model
