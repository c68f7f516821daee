#include "model/yaml_reader.h"

#include <yaml-cpp/depthguard.h>

#include <exception>

namespace kvsim::model {

YamlReader::YamlReader(const YAML::Node& node, std::string origin, std::string path)
    : node_(node), origin_(std::move(origin)), path_(std::move(path)) {
  if (!node_.IsMap()) fail(node_, path_.empty() ? "(top level)" : path_, "must be a mapping");
}

YamlReader::~YamlReader() noexcept(false) {
  if (std::uncaught_exceptions() > 0) return;
  finish();
}

void YamlReader::finish() {
  if (finished_ || !node_.IsMap()) return;
  finished_ = true;
  for (const auto& kv : node_) {
    const std::string key = kv.first.Scalar();  // a plain scalar: load_yaml_* checked
    if (!used_.count(key)) {
      std::string known;
      for (const auto& k : expected_) known += (known.empty() ? "" : ", ") + k;
      fail(kv.first, qualified(key), "is not a known key here (known: " + known + ")");
    }
  }
}

void YamlReader::fail(const YAML::Node& at, const std::string& key, const std::string& rule) const {
  // A value given by --set has no position of its own: the line of the mapping it sits in.
  YAML::Mark m = at.Mark();
  if (m.line < 0) m = node_.Mark();
  const std::string line = m.line < 0 ? "" : ":" + std::to_string(m.line + 1);
  throw ModelError(ErrorKind::kFormat, origin_ + line + ": key '" + key + "' " + rule);
}

void YamlReader::fail_key(const std::string& key, const std::string& rule) const {
  const YAML::Node v = node_[key];
  fail(v ? v : node_, qualified(key), rule);
}

std::string YamlReader::qualified(const std::string& key) const {
  return path_.empty() ? key : path_ + "." + key;
}

YAML::Node YamlReader::need(const std::string& key) {
  used_.insert(key);
  expected_.push_back(key);
  const YAML::Node v = node_[key];
  if (!v) fail(node_, qualified(key), "is missing");
  return v;
}

bool YamlReader::has(const std::string& key) {
  used_.insert(key);
  expected_.push_back(key);
  return static_cast<bool>(node_[key]);
}

YamlReader YamlReader::child(const std::string& key) {
  return YamlReader(need(key), origin_, qualified(key));
}

std::string YamlReader::text(const std::string& key) {
  const YAML::Node v = need(key);
  if (!v.IsScalar()) fail(v, qualified(key), "must be a scalar");
  return v.Scalar();
}

std::int64_t YamlReader::integer(const std::string& key, std::int64_t lo, std::int64_t hi) {
  return parsed<std::int64_t>(key, [&](const std::string& s) {
    std::size_t pos = 0;
    long long v = 0;
    try {
      v = std::stoll(s, &pos);
    } catch (const std::exception&) {
      pos = 0;
    }
    if (pos != s.size() || s.empty() || v < lo || v > hi) {
      throw ModelError(ErrorKind::kInvalidArgument, "'" + s + "' must be an integer in [" +
                                                        std::to_string(lo) + ", " +
                                                        std::to_string(hi) + "]");
    }
    return static_cast<std::int64_t>(v);
  });
}

double YamlReader::real(const std::string& key, double lo, double hi) {
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

bool YamlReader::boolean(const std::string& key) {
  return parsed<bool>(key, [](const std::string& s) {
    if (s == "true") return true;
    if (s == "false") return false;
    throw ModelError(ErrorKind::kInvalidArgument, "'" + s + "' must be true or false");
  });
}

namespace {

// Walks the document as readers will, aliases expanded, and gives up past the bounds: a few
// hundred bytes of nested aliases (a "billion laughs") would otherwise expand to gigabytes in
// whatever reads them first. Every mapping key must be a plain scalar (every schema's keys are
// names). Throws ModelError(kFormat) at the first bound passed or other key.
void check_bounds(const YAML::Node& node, int depth, std::size_t& visits,
                  const std::string& origin) {
  if (++visits > kMaxYamlNodes || depth > kMaxYamlDepth) {
    throw ModelError(ErrorKind::kFormat,
                     origin + ": expands to more than " + std::to_string(kMaxYamlNodes) +
                         " nodes or nests deeper than " + std::to_string(kMaxYamlDepth) +
                         " levels (aliases count as often as they are used)");
  }
  if (node.IsMap()) {
    for (const auto& kv : node) {
      if (!kv.first.IsScalar()) {
        throw ModelError(ErrorKind::kFormat,
                         origin + ":" + std::to_string(kv.first.Mark().line + 1) +
                             ": a key must be a plain name, not a mapping, a list or null");
      }
      check_bounds(kv.first, depth + 1, visits, origin);
      check_bounds(kv.second, depth + 1, visits, origin);
    }
  } else if (node.IsSequence()) {
    for (const auto& item : node) check_bounds(item, depth + 1, visits, origin);
  }
}

YAML::Node checked(YAML::Node root, const std::string& origin) {
  std::size_t visits = 0;
  check_bounds(root, 0, visits, origin);
  return root;
}

// yaml-cpp's own depth guard (depthguard.h) trips before check_bounds and says only "bad file".
ModelError too_deep(const std::string& origin, const YAML::DeepRecursion& e) {
  return ModelError(ErrorKind::kFormat, origin + ":" + std::to_string(e.mark.line + 1) +
                                            ": nests deeper than " + std::to_string(e.depth()) +
                                            " levels (yaml-cpp's limit)");
}

}  // namespace

YAML::Node load_yaml_file(const std::string& path) {
  try {
    return checked(YAML::LoadFile(path), path);
  } catch (const YAML::BadFile&) {
    throw ModelError(ErrorKind::kFormat, path + ": cannot be read");
  } catch (const YAML::DeepRecursion& e) {
    throw too_deep(path, e);
  } catch (const YAML::Exception& e) {
    throw ModelError(ErrorKind::kFormat,
                     path + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
}

YAML::Node load_yaml_text(const std::string& text, const std::string& origin) {
  try {
    return checked(YAML::Load(text), origin);
  } catch (const YAML::DeepRecursion& e) {
    throw too_deep(origin, e);
  } catch (const YAML::Exception& e) {
    throw ModelError(ErrorKind::kFormat,
                     origin + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
}

}  // namespace kvsim::model
