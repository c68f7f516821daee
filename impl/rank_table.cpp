#include "impl/rank_table.h"

#include <nlohmann/json.hpp>

#include <set>

#include "impl/errors.h"

namespace kvsim::impl {

namespace {

using nlohmann::json;

const json& field(const json& object, const char* key, const std::string& path) {
  const auto it = object.find(key);
  if (it == object.end()) throw_param_invalid(path + "." + key, "is missing");
  return *it;
}

std::string string_field(const json& object, const char* key, const std::string& path) {
  const json& v = field(object, key, path);
  if (!v.is_string()) throw_param_invalid(path + "." + key, "must be a string");
  return v.get<std::string>();
}

// A number written as a string of digits (HCCL's style) or as a JSON integer.
std::uint32_t uint_field(const json& object, const char* key, const std::string& path) {
  const json& v = field(object, key, path);
  const std::string at = path + "." + key;
  if (v.is_number_unsigned()) {
    const std::uint64_t n = v.get<std::uint64_t>();
    if (n > UINT32_MAX) throw_param_invalid(at, "must fit in uint32");
    return static_cast<std::uint32_t>(n);
  }
  if (!v.is_string()) throw_param_invalid(at, "must be a non-negative integer or its string");
  const std::string s = v.get<std::string>();
  if (s.empty() || s.size() > 10 || s.find_first_not_of("0123456789") != std::string::npos) {
    throw_param_invalid(at, "\"" + s + "\" is not a non-negative integer");
  }
  const std::uint64_t n = std::stoull(s);
  if (n > UINT32_MAX) throw_param_invalid(at, "must fit in uint32");
  return static_cast<std::uint32_t>(n);
}

std::string id_field(const json& object, const char* key, const std::string& path) {
  const json& v = field(object, key, path);
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return std::to_string(v.get<std::int64_t>());
  throw_param_invalid(path + "." + key, "must be a string or an integer");
}

}  // namespace

std::vector<RankTableDevice> parse_rank_table(const std::string& text) {
  const std::string root = "rank_table";
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) throw_param_invalid(root, "is not valid JSON");
  if (!doc.is_object()) throw_param_invalid(root, "must be a JSON object");
  const std::string version = string_field(doc, "version", root);
  if (version != "1.0" && version != "1.2") {
    throw_param_invalid(root + ".version", "\"" + version + "\" is not \"1.0\" or \"1.2\"");
  }
  const json& servers = field(doc, "server_list", root);
  if (!servers.is_array() || servers.empty()) {
    throw_param_invalid(root + ".server_list", "must be a non-empty array");
  }
  std::vector<RankTableDevice> out;
  std::set<std::uint32_t> ranks;
  for (std::size_t s = 0; s < servers.size(); ++s) {
    const std::string spath = root + ".server_list[" + std::to_string(s) + "]";
    const json& server = servers[s];
    if (!server.is_object()) throw_param_invalid(spath, "must be an object");
    const std::string server_id =
        server.contains("server_id") ? id_field(server, "server_id", spath) : std::to_string(s);
    const json& devices = field(server, "device", spath);
    if (!devices.is_array() || devices.empty()) {
      throw_param_invalid(spath + ".device", "must be a non-empty array");
    }
    for (std::size_t d = 0; d < devices.size(); ++d) {
      const std::string dpath = spath + ".device[" + std::to_string(d) + "]";
      const json& device = devices[d];
      if (!device.is_object()) throw_param_invalid(dpath, "must be an object");
      RankTableDevice entry;
      entry.rank_id = uint_field(device, "rank_id", dpath);
      entry.device_ip = string_field(device, "device_ip", dpath);
      entry.device_id = id_field(device, "device_id", dpath);
      entry.server_id = server_id;
      if (!ranks.insert(entry.rank_id).second) {
        throw_param_invalid(dpath + ".rank_id",
                            "rank " + std::to_string(entry.rank_id) + " appears twice");
      }
      out.push_back(std::move(entry));
    }
  }
  return out;
}

}  // namespace kvsim::impl
