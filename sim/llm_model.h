// The model library (scenarios/models.yaml): the shapes that decide KV-cache bytes per layer and
// prefill FLOPs per layer, for transfer sizes and simulated compute times.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kvsim::model {
class YamlReader;
}  // namespace kvsim::model

namespace kvsim::sim {

/// Multi-head latent attention: one compressed latent plus a RoPE part per token and layer.
struct Mla {
  int kv_lora_rank = 0;
  int qk_rope_head_dim = 0;
};

/// One LLM's shape.
struct LlmModel {
  std::string name;
  int layers = 0;
  int hidden = 0;
  int intermediate = 0;  ///< dense MLP width, or one expert's for MoE
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int experts_active = 1;  ///< experts a token passes through (1 for dense)
  int experts = 1;         ///< routed experts per layer (1 for dense)
  int vocab = 0;           ///< vocabulary: the LM head a decode step reads (0: not given)
  std::optional<Mla> mla;

  /// Elements of one KV tensor (K or V) per token and layer on one tensor-parallel rank. GQA
  /// shards KV heads over ranks (at least one head per rank); MLA latents are not sharded and are
  /// split evenly over the two tensors ([I]: llm_datadist caches carry 2 equal tensors per layer,
  /// so latent + RoPE (512 + 64) becomes 2 x 288; the bytes per layer are exact).
  std::uint64_t kv_elements_per_token(int tensor_parallel) const;
  /// Parameters of one layer a token's compute touches (attention + active MLP experts).
  double active_params_per_layer() const;
  /// Attention parameters of one layer (Q, K and V or the latent, output projection).
  double attention_params_per_layer() const;
  /// Parameters of one MLP expert (gate, up, down), or of the dense MLP.
  double expert_params() const;
  /// FLOPs of one layer's prefill over `tokens` prompt tokens, whole model (all ranks):
  /// 2 x tokens x active parameters + 2 x tokens^2 x heads x head_dim (causal attention).
  double prefill_flops_per_layer(std::uint64_t tokens) const;
};

/// Reads a model's shape keys (layers ... head_dim, experts_active, experts, vocab, mla) from a
/// library entry or a scenario's inline model section; other keys are the caller's.
LlmModel read_model_shape(model::YamlReader& r, const std::string& name);
/// Path of the model library: $KVSIM_MODELS or the source tree's scenarios/models.yaml.
std::string model_library_path();
/// Names in the library, sorted.
std::vector<std::string> available_models();
/// A model from the library; ModelError(kFormat) for a bad file, kUnknownPreset for a bad name.
LlmModel load_model(const std::string& name);
/// Model `name` of library text; `origin` names it in errors (as load_model).
LlmModel parse_model(const std::string& yaml_text, const std::string& origin,
                     const std::string& name);

}  // namespace kvsim::sim
