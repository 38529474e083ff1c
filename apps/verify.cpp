#include "verify.h"

#include <pacts/conformance/property.h>
#include <pacts/conformance/provenance.h>
#include <pacts/spec/version.h>
#include "qualify_report.h"  // kQualificationCases

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace pacts::apps {
namespace {

using nlohmann::json;

std::string type_of(const json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "boolean";
  if (v.is_number_integer()) return "integer";
  if (v.is_number()) return "number";
  if (v.is_string()) return "string";
  if (v.is_array()) return "array";
  return "object";
}

bool has_type(const json& v, const std::string& t) {
  const std::string actual = type_of(v);
  return actual == t || (t == "number" && actual == "integer");
}

void check(const json& v, const json& s, const json& root, const std::string& path,
           std::vector<std::string>& out) {
  if (s.contains("$ref")) {
    const std::string ref = s["$ref"].get<std::string>();
    const std::string prefix = "#/$defs/";
    if (ref.rfind(prefix, 0) != 0 || !root.contains("$defs") || !root["$defs"].contains(ref.substr(prefix.size()))) {
      out.push_back(path + ": the schema's $ref " + ref + " does not resolve");
      return;
    }
    check(v, root["$defs"][ref.substr(prefix.size())], root, path, out);
  }
  if (s.contains("type")) {
    bool ok = false;
    std::string wanted;
    for (const json& t : s["type"].is_array() ? s["type"] : json::array({s["type"]})) {
      ok = ok || has_type(v, t.get<std::string>());
      wanted += (wanted.empty() ? "" : " or ") + t.get<std::string>();
    }
    if (!ok) {
      out.push_back(path + ": " + type_of(v) + ", expected " + wanted);
      return;
    }
  }
  if (s.contains("const") && v != s["const"])
    out.push_back(path + ": " + v.dump() + ", expected " + s["const"].dump());
  if (s.contains("enum") && std::find(s["enum"].begin(), s["enum"].end(), v) == s["enum"].end())
    out.push_back(path + ": " + v.dump() + ", expected one of " + s["enum"].dump());
  if (s.contains("minimum") && v.is_number() && v.get<double>() < s["minimum"].get<double>())
    out.push_back(path + ": " + v.dump() + ", expected at least " + s["minimum"].dump());
  if (v.is_object()) {
    if (s.contains("required"))
      for (const json& k : s["required"])
        if (!v.contains(k.get<std::string>())) out.push_back(path + ": the key " + k.get<std::string>() + " is missing");
    if (s.contains("properties"))
      for (const auto& [k, sub] : s["properties"].items())
        if (v.contains(k)) check(v[k], sub, root, path + "/" + k, out);
  }
  if (v.is_array()) {
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>())
      out.push_back(path + ": " + std::to_string(v.size()) + " items, expected at least " + s["minItems"].dump());
    if (s.contains("items"))
      for (size_t i = 0; i < v.size(); ++i) check(v[i], s["items"], root, path + "/" + std::to_string(i), out);
  }
}

std::string read_file(const std::filesystem::path& p, bool& ok) {
  std::ifstream in(p, std::ios::binary);
  ok = static_cast<bool>(in);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

std::vector<std::string> validate_schema(const json& value, const json& schema) {
  std::vector<std::string> out;
  check(value, schema, schema, "report.json", out);
  return out;
}

VerifyResult verify_package(const std::string& dir, const conformance::Mustpass& mustpass,
                            const json& schema, const VerifyOptions& options) {
  namespace fs = std::filesystem;
  VerifyResult r;
  auto reject = [&](std::string why) { r.rejections.push_back(std::move(why)); };
  const fs::path d(dir);
  const char* const names[] = {"report.json", "report.md", "report.junit.xml", "report.sha256"};
  std::map<std::string, std::string> text;
  for (const char* n : names) {
    bool ok = false;
    text[n] = read_file(d / n, ok);
    if (!ok) reject(std::string(n) + ": missing (a package holds report.json, report.md, report.junit.xml and report.sha256)");
  }
  if (!r.rejections.empty()) return r;

  // The manifest: every report file listed once with the SHA-256 of what the folder holds now.
  std::set<std::string> listed;
  std::istringstream manifest(text["report.sha256"]);
  for (std::string line; std::getline(manifest, line);) {
    const size_t sep = line.find("  ");
    if (line.size() < 67 || sep != 64) {
      reject("report.sha256: the line '" + line + "' is not '<64 hex digits>  <file>'");
      continue;
    }
    const std::string want = line.substr(0, 64), file = line.substr(66);
    const bool plot = file.rfind("plots/", 0) == 0 && file.find("..") == std::string::npos &&
                      file.find('/', 6) == std::string::npos;
    if ((!text.count(file) && !plot) || file == "report.sha256") {
      reject("report.sha256: lists '" + file + "', which is not a report file");
      continue;
    }
    if (plot) {
      bool ok = false;
      text[file] = read_file(d / file, ok);
      if (!ok) {
        reject(file + ": listed in report.sha256 but missing");
        continue;
      }
    }
    listed.insert(file);
    const std::string got = conformance::sha256_hex(text[file]);
    if (got != want) reject(file + ": SHA-256 " + got + ", report.sha256 says " + want + " (the file changed after the run)");
  }
  for (const char* n : {"report.json", "report.md", "report.junit.xml"})
    if (!listed.count(n)) reject(std::string("report.sha256: ") + n + " is not listed");
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(d / "plots", ec))
    if (!listed.count("plots/" + e.path().filename().string()))
      reject("plots/" + e.path().filename().string() + ": not listed in report.sha256");
  r.facts.push_back("report.sha256: " + std::to_string(listed.size()) + " files checked");

  const json j = json::parse(text["report.json"], nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    reject("report.json: not JSON");
    return r;
  }
  const std::vector<std::string> schema_errors = validate_schema(j, schema);
  for (const std::string& e : schema_errors) reject(e + " (spec/report.schema.json)");
  if (!schema_errors.empty()) return r;
  r.facts.push_back("report.json: valid against spec/report.schema.json");

  // What a schema cannot say: the flags agree with the rows they summarise. `rows` and `failing`
  // count the self-checks and every backend's results, and the failing ones (Fail, Crash,
  // Timeout: conformance::is_failure), once for the flags and the JUnit file alike.
  const auto failed = [](const json& verdict) {
    return verdict == "Fail" || verdict == "Crash" || verdict == "Timeout";
  };
  const auto total = [](const json& c) {
    return c["pass"].get<int64_t>() + c["fail"].get<int64_t>() + c["not_supported"].get<int64_t>() +
           c["quality_warning"].get<int64_t>() + c["not_applicable"].get<int64_t>();
  };
  size_t rows = j["self_checks"].size(), failing = 0;
  for (const json& c : j["self_checks"]) failing += failed(c["verdict"]);
  std::map<std::string, int64_t> mustpass_cases;  // property ID -> entries of this build's set
  for (const conformance::MustpassEntry& e : mustpass.entries)
    for (const std::string& id : e.properties) ++mustpass_cases[id];
  std::set<std::string> catalogue;
  for (const conformance::Property& p : conformance::catalogue()) catalogue.insert(p.id);
  const int64_t budget = j["cases_per_property"].get<int64_t>();
  for (const json& b : j["backends"]) {
    const std::string name = b["name"].get<std::string>();
    std::set<std::string> seen;
    for (const json& row : b["results"]) {
      const std::string id = row["id"].get<std::string>(), v = row["verdict"].get<std::string>();
      if (!seen.insert(id).second) reject("report.json: backend " + name + " holds " + id + " twice");
      ++rows;
      failing += failed(row["verdict"]);
      if (row["generated"]["fail"].get<int64_t>() + row["mustpass"]["fail"].get<int64_t>() > 0 && v == "Pass")
        reject("report.json: backend " + name + ", " + id + ": verdict Pass with failing cases counted");
      if (options.official) {
        if (mustpass_cases.count(id) && total(row["mustpass"]) != mustpass_cases[id])
          reject("report.json: backend " + name + ", " + id + ": " + std::to_string(total(row["mustpass"])) +
                 " mustpass cases, this suite's set has " + std::to_string(mustpass_cases[id]) + " (a partial run)");
      }
    }
    if (options.official)
      for (const std::string& id : catalogue)
        if (!seen.count(id)) reject("report.json: backend " + name + " has no result for " + id + " (a partial run)");
    r.facts.push_back("backend " + name + ": " + std::to_string(seen.size()) + " properties");
  }
  const bool any_failure = failing > 0;
  if (j["mandatory_failure"].get<bool>() != any_failure)
    reject("report.json: mandatory_failure is " + j["mandatory_failure"].dump() + " but the rows say " +
           (any_failure ? "true" : "false"));
  if (j["complete"].get<bool>() != j["interrupted"].is_null())
    reject("report.json: complete and interrupted disagree");
  if (j["qualification_run"].get<bool>() != j["not_a_qualification_run"].empty())
    reject("report.json: qualification_run disagrees with not_a_qualification_run");
  const bool claimed = j["qualified"].get<bool>();
  const bool follows = j["complete"].get<bool>() && j["qualification_run"].get<bool>() && !any_failure;
  if (claimed != follows)
    reject(std::string("report.json: qualified is ") + (claimed ? "true" : "false") + " but the report's own rows say " +
           (follows ? "true" : "false"));
  // report.md's result line says what report.json says.
  const std::string& md = text["report.md"];
  const bool md_qualified = md.find("**Result: qualified:") != std::string::npos;
  if (md_qualified != claimed) reject("report.md: its Result line disagrees with report.json's qualified");
  // report.junit.xml: one testcase per result and self-check, a failure element per failing one.
  size_t testcases = 0, failures = 0;
  for (size_t at = 0; (at = text["report.junit.xml"].find("<testcase ", at)) != std::string::npos; ++at) ++testcases;
  for (size_t at = 0; (at = text["report.junit.xml"].find("<failure", at)) != std::string::npos; ++at) ++failures;
  if (testcases != rows || failures != failing)
    reject("report.junit.xml: " + std::to_string(testcases) + " testcases, " + std::to_string(failures) +
           " failures; report.json has " + std::to_string(rows) + " and " + std::to_string(failing));

  if (options.official) {
    if (!j["complete"].get<bool>()) reject("report.json: the run was interrupted (" + j["interrupted"].dump() + ")");
    for (const json& why : j["not_a_qualification_run"])
      reject("report.json: not a qualification run: " + why.get<std::string>());
    if (budget < conformance::report::kQualificationCases)
      reject("report.json: cases_per_property " + std::to_string(budget) + ", a qualification run has at least " +
             std::to_string(conformance::report::kQualificationCases));
    const std::string version = j["suite_version"].get<std::string>();
    if (version.find("-dirty") != std::string::npos || version.find("not a git checkout") != std::string::npos)
      reject("report.json: suite_version '" + version + "': not a clean build of a committed tree");
    if (j["build_type"] == "Debug") reject("report.json: build_type Debug");
    if (j["spec_version"] != spec::kSpecVersion)
      reject("report.json: spec_version " + j["spec_version"].dump() + ", this suite implements " +
             spec::kSpecVersion);
    if (j["mustpass"]["version"].get<int>() != mustpass.version)
      reject("report.json: mustpass version " + j["mustpass"]["version"].dump() + ", this suite's is " +
             std::to_string(mustpass.version));
    if (j["mustpass"]["files"].get<int64_t>() != static_cast<int64_t>(mustpass.entries.size()))
      reject("report.json: mustpass files " + j["mustpass"]["files"].dump() + ", this suite's set has " +
             std::to_string(mustpass.entries.size()));
    const std::string want = conformance::mustpass_sha256(mustpass);
    if (j["provenance"]["mustpass_sha256"] != want)
      reject("report.json: mustpass_sha256 " + j["provenance"]["mustpass_sha256"].get<std::string>() +
             ", this suite's set hashes to " + want);
    if (j["backends"].empty()) reject("report.json: no backend ran");
  }
  r.facts.push_back(std::string("result: ") + (claimed ? "qualified" : "not qualified") +
                    (j["qualification_run"].get<bool>() ? ", a qualification run" : ", not a qualification run"));
  return r;
}

}  // namespace pacts::apps
