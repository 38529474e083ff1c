#include <pacts/conformance/fault_backend.h>
#include <pacts/conformance/input_limits.h>
#include <pacts/conformance/mustpass.h>
#include <pacts/conformance/runner.h>

#include "case_io.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <exception>
#include <filesystem>
#include <set>

namespace pacts::conformance {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

spec::Status refuse(const std::string& manifest, const std::string& what) {
  return spec::invalid_argument("mustpass manifest " + manifest + ": " + what);
}

// Every key required, no other key (the reading rules of spec/case_files.md §2.1).
spec::Status exact_keys(const std::string& manifest, const std::string& where, const json& j,
                        const std::set<std::string>& keys) {
  if (!j.is_object()) return refuse(manifest, where + ": expected an object");
  for (const auto& [key, value] : j.items())
    if (!keys.count(key)) return refuse(manifest, where + "." + key + ": unknown key");
  for (const std::string& key : keys)
    if (!j.contains(key)) return refuse(manifest, where + "." + key + ": missing");
  return spec::Status::ok();
}

spec::Status read_entry(const std::string& manifest, const fs::path& dir, size_t index,
                        const json& j, MustpassEntry& entry) {
  const std::string where = "cases[" + std::to_string(index) + "]";
  if (auto s = exact_keys(manifest, where, j, {"file", "properties", "fault", "guards"}); !s)
    return s;
  if (!j["file"].is_string() || !j["guards"].is_string() || !j["fault"].is_string() ||
      !j["properties"].is_array() || j["properties"].empty())
    return refuse(manifest, where + ": expected file, fault and guards strings and a non-empty "
                                    "properties array");
  entry.fault = j["fault"].get<std::string>();
  if (!entry.fault.empty() && !fault_from_name(entry.fault))
    return refuse(manifest, where + ".fault \"" + entry.fault +
                                "\": accepted: \"\" or a fault of conformance/fault_backend.h");
  const std::string name = j["file"].get<std::string>();
  if (name.empty() || name.find('/') != std::string::npos || fs::path(name).extension() != ".json")
    return refuse(manifest, where + ".file \"" + name + "\": accepted: a .json file name in " +
                                dir.string());
  entry.path = (dir / name).string();
  entry.guards = j["guards"].get<std::string>();
  for (const json& p : j["properties"]) {
    const std::string id = p.is_string() ? p.get<std::string>() : p.dump();
    if (!p.is_string() || find_property(id) == nullptr)
      return refuse(manifest, where + ".properties: " + id + " is not in this build's catalogue");
    entry.properties.push_back(id);
  }
  auto file = read_case_file(entry.path);
  if (!file) return refuse(manifest, where + ": " + file.status().message());
  entry.file = std::move(file).value();
  const std::string own = entry.file.property.empty() ? "PACTS-ACC-1" : entry.file.property;
  if (std::find(entry.properties.begin(), entry.properties.end(), own) == entry.properties.end())
    return refuse(manifest, where + ": " + name + " names " + own +
                                ", which its properties list must include");
  return spec::Status::ok();
}

spec::Result<Mustpass> load(const std::string& dir_text) {
  const fs::path dir(dir_text);
  const std::string manifest = (dir / "manifest.json").string();
  // Depth and repeated keys are checked before a document exists (spec/case_files.md §7).
  auto text = read_json_file(manifest);
  if (!text) return spec::invalid_argument("mustpass manifest: " + text.status().message());
  json j;
  try {
    j = json::parse(text.value());
  } catch (const std::exception& e) {
    return refuse(manifest, std::string("not JSON: ") + e.what());
  }
  if (auto s = exact_keys(manifest, "", j, {"mustpass_version", "spec_version", "cases"}); !s)
    return s;
  if (!j["mustpass_version"].is_number_integer() || j["mustpass_version"] != kMustpassVersion)
    return refuse(manifest, "mustpass_version " + j["mustpass_version"].dump() +
                                ": this pacts reads version " + std::to_string(kMustpassVersion));
  if (!j["cases"].is_array() || j["cases"].empty())
    return refuse(manifest, "cases: expected a non-empty array");
  Mustpass m;
  m.version = kMustpassVersion;
  m.dir = dir_text;
  std::set<std::string> listed;
  for (size_t i = 0; i < j["cases"].size(); ++i) {
    MustpassEntry entry;
    if (auto s = read_entry(manifest, dir, i, j["cases"][i], entry); !s) return s;
    if (!listed.insert(fs::path(entry.path).filename().string()).second)
      return refuse(manifest, "cases[" + std::to_string(i) + "].file: listed twice");
    m.entries.push_back(std::move(entry));
  }
  // A committed case file the manifest forgot would silently never run.
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() == ".json" && name != "manifest.json" && !listed.count(name))
      return refuse(manifest, name + " is in " + dir_text + " but not listed");
  }
  return m;
}

}  // namespace

spec::Result<Mustpass> load_mustpass(const std::string& dir_text) {
  return io::refuse_on_throw("mustpass manifest " + dir_text + "/manifest.json",
                             [&] { return load(dir_text); });
}

Outcome check_mustpass(const MustpassEntry& entry, const Property& property, Backend& backend,
                       Backend& reference) {
  try {
    return check_case(property, backend, reference, entry.file.spec);
  } catch (const std::exception& e) {
    return Outcome::fail(std::string("the check threw: ") + e.what());
  }
}

}  // namespace pacts::conformance
