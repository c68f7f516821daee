// Hardware presets: YAML files under scenarios/presets/ that fill a TopologySpec, with overrides.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "model/topology.h"

namespace kvsim::model {

/// A "dotted.key=value" change applied to a preset before it is parsed ("scale_out.bandwidth",
/// "400Gb/s"). The key must exist in the preset.
using Override = std::pair<std::string, std::string>;

/// Directories searched for presets: $KVSIM_PRESET_PATH (colon-separated), then the source tree's
/// scenarios/presets.
std::vector<std::string> preset_search_path();
/// Names of the presets found on the search path, sorted.
std::vector<std::string> available_presets();
/// Path of the preset file for `name_or_path` (a name such as "atlas-a2" or a .yaml path).
/// Throws ModelError(kUnknownPreset) listing the available names.
std::string find_preset(const std::string& name_or_path);

/// Loads a preset by name or path and applies overrides. Every field is required; unknown keys,
/// bad values and unknown override keys throw ModelError(kFormat) naming file, line and key.
/// The `uncertain:` section of a mapping (a preset, an engine profile), checked against the
/// mapping's own values: every key names a scalar of it, and low <= value <= high in its unit.
std::vector<UncertainParameter> read_uncertain(const YAML::Node& root, const std::string& origin);

TopologySpec load_preset(const std::string& name_or_path,
                         const std::vector<Override>& overrides = {});
/// Parses preset text (for tests and embedded scenarios); `origin` names it in errors.
TopologySpec parse_preset(const std::string& yaml_text, const std::string& origin,
                          const std::vector<Override>& overrides = {});

}  // namespace kvsim::model
