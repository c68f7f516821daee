// The model library against the KV sizes of hardware.md 3, computed from each model's shape.
#include "sim/llm_model.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "model/errors.h"

namespace kvsim::sim {
namespace {

// Whole-model KV bytes per token in BF16: 2 tensors x layers x elements x 2 bytes.
double kv_bytes_per_token(const LlmModel& m) {
  return 2.0 * m.layers * static_cast<double>(m.kv_elements_per_token(1)) * 2.0;
}

TEST(LlmModel, KvBytesPerTokenMatchTheSpecTable) {
  // hardware.md 3: Llama-3-8B 128 KiB, Llama-3-70B 320 KiB, Qwen2.5-72B 320 KiB,
  // Qwen3-235B-A22B 188 KiB, DeepSeek-V3 MLA BF16 68.6 KiB (61 x 576 x 2 B).
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(load_model("llama-3-8b")), 128.0 * 1024);
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(load_model("llama-3-70b")), 320.0 * 1024);
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(load_model("qwen2.5-72b")), 320.0 * 1024);
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(load_model("qwen3-235b-a22b")), 188.0 * 1024);
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(load_model("deepseek-v3")), 61.0 * 576 * 2);
}

TEST(LlmModel, TensorParallelShardsGqaHeadsButNotMla) {
  const LlmModel llama = load_model("llama-3-70b");
  EXPECT_EQ(llama.kv_elements_per_token(8), 128u);   // one KV head per rank
  EXPECT_EQ(llama.kv_elements_per_token(16), 128u);  // never less than one head
  const LlmModel ds = load_model("deepseek-v3");
  EXPECT_EQ(ds.kv_elements_per_token(8), ds.kv_elements_per_token(1));
}

TEST(LlmModel, DenseParameterCountIsTheKnownSize) {
  // Llama-3-70B has 70.6 B parameters, of which ~2.1 B are embeddings and the LM head.
  const LlmModel m = load_model("llama-3-70b");
  EXPECT_NEAR(m.active_params_per_layer() * m.layers / 1e9, 68.5, 0.5);
  // Prefill FLOPs grow with the square of the prompt through attention.
  EXPECT_GT(m.prefill_flops_per_layer(8192), 2.0 * m.prefill_flops_per_layer(4096));
}

TEST(LlmModel, UnknownModelListsTheLibrary) {
  try {
    load_model("llama-9");
    FAIL();
  } catch (const model::ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("llama-3-70b"), std::string::npos) << e.what();
  }
}

TEST(LlmModel, ALibraryThatIsNotAMappingNamesItsFileAndLine) {
  const std::string path = ::testing::TempDir() + "models_list.yaml";
  std::ofstream(path) << "# models\n- llama-3-70b\n- qwen3-235b\n";
  ::setenv("KVSIM_MODELS", path.c_str(), 1);
  std::string what;
  try {
    load_model("llama-3-70b");
  } catch (const model::ModelError& e) {
    what = e.what();
  }
  ::unsetenv("KVSIM_MODELS");
  std::remove(path.c_str());
  EXPECT_NE(what.find(path + ":2: the model library must map model names"), std::string::npos)
      << what;
}

}  // namespace
}  // namespace kvsim::sim
