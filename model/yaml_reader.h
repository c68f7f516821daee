// Strict reading of one YAML mapping: every required key present, no unknown key, each value
// parsed by a given rule; errors name the file, the line and the dotted key.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "model/errors.h"
#include "model/units.h"

namespace kvsim::model {

/// Reads one mapping. When it goes out of scope normally it checks that every key was read
/// and throws ModelError(kFormat) naming the first unknown one (hence the throwing destructor).
class YamlReader {
 public:
  /// `origin` names the file in errors; `path` is the dotted key of this mapping ("" at the top).
  YamlReader(const YAML::Node& node, std::string origin, std::string path);
  ~YamlReader() noexcept(false);
  YamlReader(const YamlReader&) = delete;
  YamlReader& operator=(const YamlReader&) = delete;
  YamlReader(YamlReader&&) = default;

  /// Checks now that every key was read (the destructor's check, for a reader whose scope ends
  /// after its result was built: a destructor that throws then would leak that result).
  void finish();

  /// Throws ModelError(kFormat) "origin:line: key 'path.key' rule".
  [[noreturn]] void fail(const YAML::Node& at, const std::string& key,
                         const std::string& rule) const;
  [[noreturn]] void fail_key(const std::string& key, const std::string& rule) const;

  /// The value of a required key (marks it read).
  YAML::Node need(const std::string& key);
  /// True if the key is present (marks it read, so optional keys are not "unknown").
  bool has(const std::string& key);
  /// A child mapping.
  YamlReader child(const std::string& key);

  std::string text(const std::string& key);
  /// A scalar parsed by `parse`; a ModelError from it becomes "has a bad value: ...".
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
  std::int64_t integer(const std::string& key, std::int64_t lo, std::int64_t hi);
  /// A number in (lo, hi].
  double real(const std::string& key, double lo, double hi);
  bool boolean(const std::string& key);
  std::uint64_t bytes(const std::string& key) { return parsed<std::uint64_t>(key, parse_bytes); }
  Bandwidth rate(const std::string& key) { return parsed<Bandwidth>(key, parse_bandwidth); }
  SimTime time(const std::string& key) { return parsed<SimTime>(key, parse_time); }

  const YAML::Node& node() const { return node_; }
  const std::string& origin() const { return origin_; }
  /// "path.key".
  std::string qualified(const std::string& key) const;

 private:
  YAML::Node node_;
  std::string origin_;
  std::string path_;
  std::set<std::string> used_;
  bool finished_ = false;
  std::vector<std::string> expected_;
};

/// Bounds on any YAML document kvsim reads, checked right after loading with aliases expanded.
inline constexpr std::size_t kMaxYamlNodes = 1'000'000;
inline constexpr int kMaxYamlDepth = 64;

/// Loads a YAML file; a syntax error or a bound passed becomes ModelError(kFormat) with the file.
YAML::Node load_yaml_file(const std::string& path);
/// Parses YAML text; `origin` names it in errors.
YAML::Node load_yaml_text(const std::string& text, const std::string& origin);

}  // namespace kvsim::model
