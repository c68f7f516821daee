#include "sim/engine_profile.h"

#include <algorithm>
#include <cstdlib>

#include "model/errors.h"
#include "model/preset.h"
#include "model/yaml_reader.h"

#ifndef KVSIM_SOURCE_DIR
#define KVSIM_SOURCE_DIR "."
#endif

namespace kvsim::sim {

using model::ErrorKind;
using model::ModelError;

namespace {

YAML::Node library(const std::string& path) {
  const YAML::Node root = model::load_yaml_file(path);
  if (!root.IsMap()) {
    throw ModelError(ErrorKind::kFormat,
                     path + ":" + std::to_string(root.Mark().line + 1) +
                         ": the engine library must map engine names to their costs (file named "
                         "by KVSIM_ENGINES, else scenarios/engines.yaml)");
  }
  return root;
}

}  // namespace

std::string engine_library_path() {
  if (const char* env = std::getenv("KVSIM_ENGINES")) return env;
  return std::string(KVSIM_SOURCE_DIR) + "/scenarios/engines.yaml";
}

std::vector<std::string> available_engines() {
  const std::string path = engine_library_path();
  std::vector<std::string> names{"none"};
  for (const auto& kv : library(path)) {
    if (!kv.first.IsScalar() || !kv.second.IsMap()) {
      throw ModelError(ErrorKind::kFormat, path + ":" + std::to_string(kv.first.Mark().line + 1) +
                                               ": each engine entry must be 'name: {...}'");
    }
    names.push_back(kv.first.as<std::string>());
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

EngineProfile load_engine(const std::string& name) {
  EngineProfile e;
  if (name == "none") return e;
  const std::string path = engine_library_path();
  const YAML::Node root = library(path);
  if (!root[name]) {
    std::string names;
    for (const auto& n : available_engines()) names += (names.empty() ? "" : ", ") + n;
    throw ModelError(ErrorKind::kUnknownPreset,
                     "engine '" + name + "' is not in " + path + " (available: " + names + ")");
  }
  model::YamlReader r(root[name], path, name);
  e.name = name;
  e.decodes = true;
  for (const auto& [key, field] : e.costs()) *field = r.time(key);
  if (r.has("kv_cache_dtype")) {
    const std::string kv = r.text("kv_cache_dtype");
    if (kv != "auto" && kv != "model") r.fail_key("kv_cache_dtype", "must be auto or model");
    e.kv_in_activation_dtype = kv == "auto";
  }
  if (r.has("decode_blocks")) {
    const std::string blocks = r.text("decode_blocks");
    if (blocks != "incremental" && blocks != "reserve") {
      r.fail_key("decode_blocks", "must be incremental or reserve");
    }
    e.incremental_decode_blocks = blocks == "incremental";
  }
  if (r.has("uncertain")) e.uncertain = model::read_uncertain(root[name], path);
  r.finish();
  return e;
}

}  // namespace kvsim::sim
