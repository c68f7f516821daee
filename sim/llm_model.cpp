#include "sim/llm_model.h"

#include <algorithm>
#include <cstdlib>

#include "model/errors.h"
#include "model/yaml_reader.h"

#ifndef KVSIM_SOURCE_DIR
#define KVSIM_SOURCE_DIR "."
#endif

namespace kvsim::sim {

using model::ErrorKind;
using model::ModelError;

std::uint64_t LlmModel::kv_elements_per_token(int tensor_parallel) const {
  if (mla) return static_cast<std::uint64_t>(mla->kv_lora_rank + mla->qk_rope_head_dim) / 2;
  const int heads_per_rank = std::max(1, kv_heads / std::max(1, tensor_parallel));
  return static_cast<std::uint64_t>(heads_per_rank) * static_cast<std::uint64_t>(head_dim);
}

double LlmModel::attention_params_per_layer() const {
  const double h = hidden;
  const double q = static_cast<double>(heads) * head_dim;
  const double kv = mla ? static_cast<double>(mla->kv_lora_rank + mla->qk_rope_head_dim)
                        : 2.0 * kv_heads * head_dim;
  return h * q + h * kv + q * h;  // Q, K and V (or the latent), output
}

double LlmModel::expert_params() const {
  return 3.0 * hidden * intermediate;  // gate, up, down
}

double LlmModel::active_params_per_layer() const {
  return attention_params_per_layer() + expert_params() * experts_active;
}

double LlmModel::prefill_flops_per_layer(std::uint64_t tokens) const {
  const double t = static_cast<double>(tokens);
  return 2.0 * t * active_params_per_layer() + 2.0 * t * t * heads * head_dim;
}

std::string model_library_path() {
  if (const char* env = std::getenv("KVSIM_MODELS")) return env;
  return std::string(KVSIM_SOURCE_DIR) + "/scenarios/models.yaml";
}

std::vector<std::string> available_models() {
  const std::string path = model_library_path();
  const YAML::Node root = model::load_yaml_file(path);
  if (!root.IsMap()) {
    throw ModelError(ErrorKind::kFormat,
                     path + ":" + std::to_string(root.Mark().line + 1) +
                         ": the model library must map model names to their parameters"
                         " (file named by KVSIM_MODELS, else scenarios/models.yaml)");
  }
  std::vector<std::string> names;
  for (const auto& kv : root) {
    if (!kv.first.IsScalar() || !kv.second.IsMap()) {
      throw ModelError(ErrorKind::kFormat, path + ":" + std::to_string(kv.first.Mark().line + 1) +
                                               ": each model library entry must be 'name: {...}'");
    }
    names.push_back(kv.first.as<std::string>());
  }
  std::sort(names.begin(), names.end());
  return names;
}

LlmModel read_model_shape(model::YamlReader& r, const std::string& name) {
  LlmModel m;
  m.name = name;
  m.layers = static_cast<int>(r.integer("layers", 1, 1024));
  m.hidden = static_cast<int>(r.integer("hidden", 1, 1 << 20));
  m.intermediate = static_cast<int>(r.integer("intermediate", 1, 1 << 22));
  m.heads = static_cast<int>(r.integer("heads", 1, 1024));
  m.kv_heads = static_cast<int>(r.integer("kv_heads", 1, 1024));
  m.head_dim = static_cast<int>(r.integer("head_dim", 1, 4096));
  if (r.has("experts_active"))
    m.experts_active = static_cast<int>(r.integer("experts_active", 1, 1024));
  m.experts = m.experts_active;
  if (r.has("experts")) {
    m.experts = static_cast<int>(r.integer("experts", 1, 65536));
    if (m.experts < m.experts_active) r.fail_key("experts", "must be at least experts_active");
  }
  if (r.has("vocab")) m.vocab = static_cast<int>(r.integer("vocab", 1, 1 << 24));
  if (r.has("mla")) {
    model::YamlReader mla = r.child("mla");
    m.mla = Mla{static_cast<int>(mla.integer("kv_lora_rank", 1, 65536)),
                static_cast<int>(mla.integer("qk_rope_head_dim", 0, 65536))};
  }
  return m;
}

namespace {

// The model `name` of a parsed library read from `origin`.
LlmModel model_from(const YAML::Node& root, const std::string& origin, const std::string& name,
                    const std::string& names) {
  if (!root.IsMap() || !root[name]) {
    throw ModelError(ErrorKind::kUnknownPreset,
                     "model '" + name + "' is not in " + origin + " (available: " + names + ")");
  }
  model::YamlReader r(root[name], origin, name);
  LlmModel m = read_model_shape(r, name);
  r.finish();
  return m;
}

}  // namespace

LlmModel load_model(const std::string& name) {
  const std::string path = model_library_path();
  const YAML::Node root = model::load_yaml_file(path);
  std::string names;
  if (!root.IsMap() || !root[name]) {
    for (const auto& n : available_models()) names += (names.empty() ? "" : ", ") + n;
  }
  return model_from(root, path, name, names);
}

LlmModel parse_model(const std::string& yaml_text, const std::string& origin,
                     const std::string& name) {
  return model_from(model::load_yaml_text(yaml_text, origin), origin, name, "");
}

}  // namespace kvsim::sim
