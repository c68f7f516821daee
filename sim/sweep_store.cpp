#include "sim/sweep_store.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "sim/result_codec.h"
#include "sim/results_writer.h"

namespace kvsim::sim {
namespace {

namespace fs = std::filesystem;

std::string point_dir(const std::string& dir, std::size_t index) {
  return (fs::path(dir) / ("point-" + std::to_string(index))).string();
}

std::optional<std::string> read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Removes what a writer killed mid-write left in a point's folder: write_file_atomic's
// temporaries, "<name>.tmp<pid>", whose rename never came.
void remove_partial_writes(const std::string& d) {
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(d, ec)) {
    const std::string name = e.path().filename().string();
    const std::size_t at = name.rfind(".tmp");
    if (at == std::string::npos || at + 4 == name.size()) continue;
    if (name.find_first_not_of("0123456789", at + 4) != std::string::npos) continue;
    fs::remove(e.path(), ec);
  }
}

}  // namespace

void begin_sweep_folder(const std::string& dir, const SweepManifest& m) {
  nlohmann::ordered_json j;
  j["schema"] = kResultSchema;
  j["scenario"] = m.scenario;
  j["cwd"] = m.cwd;
  auto& axes = j["axes"] = nlohmann::ordered_json::array();
  for (const SweepAxis& a : m.axes) axes.push_back({{"key", a.key}, {"values", a.values}});
  write_file_atomic((fs::path(dir) / "sweep.json").string(), j.dump(1) + "\n");
  write_file_atomic(
      (fs::path(dir) / "INCOMPLETE").string(),
      "This sweep has not finished. Resume it with: kvsim sweep --resume " + dir + "\n");
}

SweepManifest read_sweep_manifest(const std::string& dir) {
  const fs::path path = fs::path(dir) / "sweep.json";
  const std::optional<std::string> text = read_all(path);
  if (!text) throw std::runtime_error(path.string() + ": missing (not a sweep folder)");
  SweepManifest m;
  try {
    const nlohmann::json j = nlohmann::json::parse(*text);
    const int schema = j.value("schema", 0);
    if (schema != kResultSchema) {
      throw std::runtime_error("schema " + std::to_string(schema) +
                               " (written by another kvsim); " + "this kvsim reads schema " +
                               std::to_string(kResultSchema));
    }
    m.scenario = j.at("scenario").get<std::string>();
    m.cwd = j.at("cwd").get<std::string>();
    for (const auto& a : j.at("axes")) {
      m.axes.push_back(
          {a.at("key").get<std::string>(), a.at("values").get<std::vector<std::string>>()});
    }
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(path.string() + ": not a sweep manifest: " + e.what());
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(path.string() + ": " + e.what());
  }
  return m;
}

void write_sweep_point(const std::string& dir, std::size_t index, const PointOutcome& point) {
  if (!point.result) return;
  const std::string d = point_dir(dir, index);
  remove_partial_writes(d);  // a resumed point may have been cut off while being written
  write_results(*point.result, d);
  write_file_atomic((fs::path(d) / "result.cbor").string(), encode_result(*point.result));
}

std::optional<RunResult> read_sweep_point(const std::string& dir, std::size_t index,
                                          const Scenario& scenario) {
  const fs::path path = fs::path(point_dir(dir, index)) / "result.cbor";
  const std::optional<std::string> bytes = read_all(path);
  if (!bytes) return std::nullopt;
  try {
    return decode_result(*bytes, scenario);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(path.string() + ": " + e.what());
  }
}

void end_sweep_folder(const std::string& dir) {
  std::error_code ec;
  fs::remove(fs::path(dir) / "INCOMPLETE", ec);
}

bool sweep_folder_incomplete(const std::string& dir) {
  return fs::exists(fs::path(dir) / "INCOMPLETE");
}

}  // namespace kvsim::sim
