#include "model/preset.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "model/errors.h"

#ifndef KVSIM_PRESET_DIR
#define KVSIM_PRESET_DIR "scenarios/presets"
#endif

namespace kvsim::model {
namespace {

namespace fs = std::filesystem;

// Reads one YAML mapping strictly: every key must be consumed, every required key present.
class Reader {
 public:
  Reader(const YAML::Node& node, std::string origin, std::string path)
      : node_(node), origin_(std::move(origin)), path_(std::move(path)) {
    if (!node_.IsMap()) fail(node_, path_.empty() ? "(top level)" : path_, "must be a mapping");
  }
  ~Reader() noexcept(false) {
    if (std::uncaught_exceptions() > 0) return;
    for (const auto& kv : node_) {
      const std::string key = kv.first.as<std::string>();
      if (!used_.count(key)) {
        fail(kv.first, qualified(key), "is not a known key here (known: " + known() + ")");
      }
    }
  }

  [[noreturn]] void fail(const YAML::Node& at, const std::string& key,
                         const std::string& rule) const {
    const YAML::Mark m = at.Mark();
    throw ModelError(ErrorKind::kPresetFormat,
                     origin_ + ":" + std::to_string(m.line + 1) + ": key '" + key + "' " + rule);
  }

  YAML::Node need(const std::string& key) {
    used_.insert(key);
    expected_.push_back(key);
    const YAML::Node v = node_[key];
    if (!v) fail(node_, qualified(key), "is missing");
    return v;
  }
  bool has(const std::string& key) const { return static_cast<bool>(node_[key]); }

  std::string text(const std::string& key) {
    const YAML::Node v = need(key);
    if (!v.IsScalar()) fail(v, qualified(key), "must be a scalar");
    return v.Scalar();
  }
  template <typename T, typename F>
  T parsed(const std::string& key, F parse) {
    const YAML::Node v = need(key);
    if (!v.IsScalar()) fail(v, qualified(key), "must be a scalar");
    try {
      return parse(v.Scalar());
    } catch (const ModelError& e) {
      fail(v, qualified(key), std::string("has a bad value: ") + e.what());
    }
  }
  int integer(const std::string& key, int lo, int hi) {
    return parsed<int>(key, [&](const std::string& s) {
      std::size_t pos = 0;
      long v = 0;
      try {
        v = std::stol(s, &pos);
      } catch (const std::exception&) {
        pos = 0;
      }
      if (pos != s.size() || s.empty() || v < lo || v > hi) {
        throw ModelError(ErrorKind::kInvalidArgument, "'" + s + "' must be an integer in [" +
                                                          std::to_string(lo) + ", " +
                                                          std::to_string(hi) + "]");
      }
      return static_cast<int>(v);
    });
  }
  double real(const std::string& key, double lo, double hi) {
    return parsed<double>(key, [&](const std::string& s) {
      std::size_t pos = 0;
      double v = 0;
      try {
        v = std::stod(s, &pos);
      } catch (const std::exception&) {
        pos = 0;
      }
      if (pos != s.size() || !(v > lo && v <= hi)) {
        throw ModelError(ErrorKind::kInvalidArgument, "'" + s + "' must be a number in (" +
                                                          std::to_string(lo) + ", " +
                                                          std::to_string(hi) + "]");
      }
      return v;
    });
  }
  bool boolean(const std::string& key) {
    return parsed<bool>(key, [](const std::string& s) {
      if (s == "true") return true;
      if (s == "false") return false;
      throw ModelError(ErrorKind::kInvalidArgument, "'" + s + "' must be true or false");
    });
  }
  std::uint64_t bytes(const std::string& key) { return parsed<std::uint64_t>(key, parse_bytes); }
  Bandwidth rate(const std::string& key) { return parsed<Bandwidth>(key, parse_bandwidth); }
  SimTime time(const std::string& key) { return parsed<SimTime>(key, parse_time); }
  Reader child(const std::string& key) { return Reader(need(key), origin_, qualified(key)); }

 private:
  std::string qualified(const std::string& key) const {
    return path_.empty() ? key : path_ + "." + key;
  }
  std::string known() const {
    std::string out;
    for (const auto& k : expected_) out += (out.empty() ? "" : ", ") + k;
    return out;
  }

  YAML::Node node_;
  std::string origin_;
  std::string path_;
  std::set<std::string> used_;
  std::vector<std::string> expected_;
};

LinkSpec read_link(Reader r, bool has_shape) {
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
        throw ModelError(ErrorKind::kPresetFormat,
                         origin + ": override key '" + key + "' does not exist in the preset");
      }
      if (i + 1 == parts.size()) {
        if (!node[parts[i]].IsScalar()) {
          throw ModelError(ErrorKind::kPresetFormat,
                           origin + ": override key '" + key + "' is not a scalar");
        }
        node[parts[i]] = value;
      } else {
        node.reset(node[parts[i]]);
      }
    }
  }
}

TopologySpec read_spec(const YAML::Node& root, const std::string& origin) {
  Reader top(root, origin, "");
  TopologySpec s;
  s.name = top.text("name");
  s.description = top.text("description");
  s.nodes = top.integer("nodes", 1, 254);
  s.devices_per_node = top.integer("devices_per_node", 1, 64);
  s.scale_up_nodes = top.integer("scale_up_nodes", 1, 254);
  s.device_kind = top.text("device_kind");
  {
    Reader hbm = top.child("hbm");
    s.hbm_capacity = hbm.bytes("capacity");
    s.hbm_bandwidth = hbm.rate("bandwidth");
  }
  {
    Reader host = top.child("host");
    s.host_capacity = host.bytes("capacity");
    s.host_bandwidth = host.rate("bandwidth");
  }
  {
    Reader dma = top.child("dma");
    s.dma.engines = dma.integer("engines", 1, 64);
    s.dma.descriptor_cost = dma.time("descriptor_cost");
    s.dma.batch_setup = dma.time("batch_setup");
    s.dma.chunk_descriptors = dma.integer("chunk_descriptors", 1, 1 << 20);
    s.dma.queue_depth = dma.integer("queue_depth", 1, 1024);
    s.dma.bandwidth = dma.rate("bandwidth");
  }
  s.scale_up = read_link(top.child("scale_up"), true);
  s.scale_out = read_link(top.child("scale_out"), false);
  s.host_link = read_link(top.child("host_link"), false);
  s.scale_up_over_scale_out = top.boolean("scale_up_over_scale_out");
  s.fault_detection_time = top.time("fault_detection_time");
  s.ip_base = top.text("ip_base");
  try {
    s.validate();
  } catch (const ModelError& e) {
    throw ModelError(ErrorKind::kPresetFormat, origin + ": " + e.what());
  }
  return s;
}

TopologySpec load_node(YAML::Node root, const std::string& origin,
                       const std::vector<Override>& overrides) {
  apply_overrides(root, origin, overrides);
  return read_spec(root, origin);
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
    if (fs::is_regular_file(name_or_path)) return name_or_path;
  } else {
    for (const auto& dir : preset_search_path()) {
      const fs::path p = fs::path(dir) / (name_or_path + ".yaml");
      if (fs::is_regular_file(p)) return p.string();
    }
  }
  std::string names;
  for (const auto& n : available_presets()) names += (names.empty() ? "" : ", ") + n;
  throw ModelError(ErrorKind::kUnknownPreset,
                   "preset '" + name_or_path + "' not found (available: " + names + ")");
}

TopologySpec load_preset(const std::string& name_or_path, const std::vector<Override>& overrides) {
  const std::string path = find_preset(name_or_path);
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    throw ModelError(ErrorKind::kPresetFormat,
                     path + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  return load_node(root, path, overrides);
}

TopologySpec parse_preset(const std::string& yaml_text, const std::string& origin,
                          const std::vector<Override>& overrides) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw ModelError(ErrorKind::kPresetFormat,
                     origin + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  return load_node(root, origin, overrides);
}

}  // namespace kvsim::model
