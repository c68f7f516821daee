// Every fitted or inferred ([I]) preset value carries a plausible range and its source, and a bad
// `uncertain:` section is rejected naming file, line and key.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <tuple>

#include "model/errors.h"
#include "model/preset.h"

namespace kvsim::model {
namespace {

// The dotted keys of the lines whose comment carries [I] (indentation gives the nesting).
std::set<std::string> inferred_keys(const std::string& path) {
  std::ifstream in(path);
  const std::regex line_re(R"(^(\s*)([A-Za-z_][A-Za-z0-9_]*):\s*([^#\s][^#]*?)\s*#(.*)$)");
  std::vector<std::string> stack;
  std::set<std::string> keys;
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (!std::regex_match(line, m, line_re)) {
      const std::regex parent(R"(^(\s*)([A-Za-z_][A-Za-z0-9_]*):\s*(#.*)?$)");
      if (std::regex_match(line, m, parent)) {
        stack.resize(m[1].length() / 2);
        stack.push_back(m[2]);
      }
      continue;
    }
    stack.resize(m[1].length() / 2);
    stack.push_back(m[2]);
    if (m[4].str().find("[I]") == std::string::npos) continue;
    std::string key;
    for (const auto& part : stack) key += (key.empty() ? "" : ".") + part;
    keys.insert(key);
  }
  return keys;
}

TEST(PresetUncertainty, EveryInferredValueHasARangeAndASource) {
  for (const std::string& name : available_presets()) {
    const TopologySpec spec = load_preset(name);
    std::set<std::string> ranged;
    for (const UncertainParameter& p : spec.uncertain) {
      ranged.insert(p.key);
      EXPECT_FALSE(p.source.empty()) << name << ": " << p.key;
    }
    const std::set<std::string> inferred = inferred_keys(find_preset(name));
    EXPECT_FALSE(inferred.empty()) << name;
    for (const std::string& key : inferred) {
      EXPECT_TRUE(ranged.count(key)) << name << ": " << key << " is [I] but has no range";
    }
  }
}

TEST(PresetUncertainty, TheA2DescriptorCostsAreFittedAndRanged) {
  const TopologySpec a2 = load_preset("atlas-a2");
  for (const auto& [key, dataset, value] :
       {std::tuple{"scale_up.descriptor_cost", "hixl-a2", a2.scale_up.path.descriptor_cost},
        std::tuple{"scale_out.descriptor_cost", "hixl-a2-roce",
                   a2.scale_out.path.descriptor_cost}}) {
    const std::string name = key;  // C++17 lambdas cannot capture structured bindings
    const auto it = std::find_if(a2.uncertain.begin(), a2.uncertain.end(),
                                 [&](const UncertainParameter& p) { return p.key == name; });
    ASSERT_NE(it, a2.uncertain.end()) << key;
    ASSERT_TRUE(value) << key;
    EXPECT_EQ(it->fitted_to, dataset);
    EXPECT_LE(parse_time(it->low), *value) << key;
    EXPECT_GE(parse_time(it->high), *value) << key;
  }
}

TEST(PresetUncertainty, ABadSectionNamesFileLineAndKey) {
  std::ifstream in(find_preset("atlas-a2"));
  std::stringstream text;
  text << in.rdbuf();
  const std::string base = text.str().substr(0, text.str().find("\nuncertain:"));
  auto rejects = [&](const std::string& section, const std::string& words) {
    try {
      (void)parse_preset(base + "\nuncertain:\n" + section, "bad.yaml");
      ADD_FAILURE() << "accepted: " << section;
    } catch (const ModelError& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kFormat);
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("bad.yaml:"), std::string::npos) << e.what();
    }
  };
  rejects("  dma.no_such: {low: 1us, high: 2us, source: x}\n",
          "key 'uncertain.dma.no_such' names no value of the preset");
  rejects("  dma: {low: 1us, high: 2us, source: x}\n", "names no scalar");
  rejects("  dma.descriptor_cost: {low: 21us, high: 30us, source: x}\n",
          "needs low <= 20us <= high");
  rejects("  dma.descriptor_cost: {low: 1, high: 30us, source: x}\n", "in the value's unit");
  rejects("  dma.descriptor_cost: {low: 1us, high: 30us}\n", "source' is missing");
  rejects("  dma.descriptor_cost: {low: 1us, high: 30us, source: x, typo: 1}\n",
          "'uncertain.dma.descriptor_cost.typo' is not a known key");
  // Overrides change the value, not the range check (it is the file's value that is ranged).
  EXPECT_NO_THROW(parse_preset(base + "\nuncertain:\n  dma.descriptor_cost: {low: 9.5us, "
                                      "high: 25us, source: x}\n",
                               "ok.yaml", {{"dma.descriptor_cost", "50us"}}));
}

}  // namespace
}  // namespace kvsim::model
