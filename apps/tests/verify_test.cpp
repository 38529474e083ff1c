// `pacts verify` (apps/verify.h): a package written by pacts-qualify's own report writer for a
// complete qualification run of this suite is accepted; each way a package can lie or fall short
// is rejected with its reason: a file changed after the run, a schema violation, a flag that
// disagrees with the rows, a partial run (a property or mustpass cases missing), too few cases, a
// dirty build, another mustpass set. The schema validator itself bites on each keyword it uses.
#include "../qualify_report.h"
#include "../verify.h"

#include <pacts/conformance/mustpass.h>
#include <pacts/conformance/property.h>
#include <pacts/conformance/provenance.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>

#ifndef PACTS_MUSTPASS_DIR
#error "PACTS_MUSTPASS_DIR must name conformance/mustpass/v1"
#endif
#ifndef PACTS_REPORT_SCHEMA
#error "PACTS_REPORT_SCHEMA must name spec/report.schema.json"
#endif
#ifndef PACTS_TEST_OUT
#error "PACTS_TEST_OUT must name a scratch folder"
#endif

namespace {

namespace fs = std::filesystem;
namespace pc = pacts::conformance;
namespace rpt = pacts::conformance::report;
using nlohmann::json;

const pc::Mustpass& mustpass() {
  static const pc::Mustpass m = pc::load_mustpass(PACTS_MUSTPASS_DIR).value();
  return m;
}

const json& schema() {
  static const json s = [] {
    std::ifstream in(PACTS_REPORT_SCHEMA);
    return json::parse(in);
  }();
  return s;
}

// The report of a complete qualification run of this suite on one backend, every property passed.
rpt::Report qualified_report() {
  rpt::Report r;
  r.suite_version = "0.1.0 (git 1234abc)";
  r.compiler = "GCC 12.2.0";
  r.build_type = "RelWithDebInfo";
  r.started_utc = "2026-12-06T10:00:00Z";
  r.hostname = "node";
  r.seed = 7;
  r.cases_per_property = rpt::kQualificationCases;
  r.mustpass_dir = mustpass().dir;
  r.mustpass_version = mustpass().version;
  r.mustpass_files = static_cast<int64_t>(mustpass().entries.size());
  r.mustpass_sha256 = pc::mustpass_sha256(mustpass());
  r.command_line = {"pacts-qualify", "--backend", "host"};
  std::map<std::string, int64_t> per_property;
  for (const pc::MustpassEntry& e : mustpass().entries)
    for (const std::string& id : e.properties) ++per_property[id];
  rpt::BackendSection b;
  b.name = "host";
  b.device = "CPU";
  for (const pc::Property& p : pc::catalogue()) {
    rpt::PropertyRow row;
    row.id = p.id;
    row.name = p.name;
    row.mustpass.pass = per_property[p.id];
    row.generated.pass = rpt::kQualificationCases;
    b.rows.push_back(row);
  }
  r.backends = {b};
  return r;
}

std::string write(const rpt::Report& r, const std::string& name) {
  const std::string dir = std::string(PACTS_TEST_OUT) + "/verify/" + name;
  fs::remove_all(dir);
  EXPECT_TRUE(rpt::write_report(r, dir).is_ok());
  return dir;
}

std::vector<std::string> verify(const std::string& dir, bool official = true) {
  return pacts::apps::verify_package(dir, mustpass(), schema(), {official}).rejections;
}

// Some rejection mentions `what`.
bool rejected_for(const std::vector<std::string>& why, const std::string& what) {
  for (const std::string& w : why)
    if (w.find(what) != std::string::npos) return true;
  return false;
}

std::string text(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void put(const std::string& path, const std::string& body) { std::ofstream(path) << body; }

// Rewrites report.json through `edit` and writes a manifest that matches again: a forger who
// knows the format. What is left to catch such a package is its consistency.
void forge(const std::string& dir, const std::function<void(json&)>& edit) {
  json j = json::parse(text(dir + "/report.json"));
  edit(j);
  const std::string js = j.dump(2) + "\n";
  put(dir + "/report.json", js);
  const std::string manifest = pc::sha256_hex(text(dir + "/report.md")) + "  report.md\n" +
                               pc::sha256_hex(js) + "  report.json\n" +
                               pc::sha256_hex(text(dir + "/report.junit.xml")) + "  report.junit.xml\n";
  put(dir + "/report.sha256", manifest);
}

TEST(Verify, AcceptsAWholeQualificationRunOfThisSuite) {
  const std::string dir = write(qualified_report(), "accepted");
  const std::vector<std::string> why = verify(dir);
  EXPECT_TRUE(why.empty()) << why.front();
}

TEST(Verify, RejectsAFileChangedAfterTheRun) {
  const std::string dir = write(qualified_report(), "tampered");
  std::string md = text(dir + "/report.md");
  md += "\nan extra line\n";
  put(dir + "/report.md", md);
  EXPECT_TRUE(rejected_for(verify(dir), "report.md: SHA-256"));
  fs::remove(dir + "/report.junit.xml");
  EXPECT_TRUE(rejected_for(verify(dir), "report.junit.xml: missing"));
}

// A bench set's plot is written under plots/, shown in report.md, listed in report.sha256 and
// checked like the report's own files.
TEST(Verify, BenchPlotsAreWrittenShownAndChecked) {
  rpt::Report r = qualified_report();
  r.backends[0].bench = "`peers`: a table";
  r.backends[0].bench_plots = {{"hip_0-peers.svg", "<svg xmlns=\"http://www.w3.org/2000/svg\"></svg>\n"}};
  const std::string dir = write(r, "plots");
  EXPECT_EQ(text(dir + "/plots/hip_0-peers.svg"), r.backends[0].bench_plots[0].svg);
  EXPECT_NE(text(dir + "/report.md").find("![hip_0-peers.svg](plots/hip_0-peers.svg)"), std::string::npos);
  EXPECT_NE(text(dir + "/report.sha256").find("  plots/hip_0-peers.svg\n"), std::string::npos);
  EXPECT_TRUE(verify(dir).empty());
  put(dir + "/plots/hip_0-peers.svg", "<svg></svg>\n");
  EXPECT_TRUE(rejected_for(verify(dir), "plots/hip_0-peers.svg: SHA-256"));
  put(dir + "/plots/extra.svg", "<svg></svg>\n");
  EXPECT_TRUE(rejected_for(verify(dir), "plots/extra.svg: not listed in report.sha256"));
}

TEST(Verify, RejectsAForgedFlagThatTheRowsContradict) {
  rpt::Report r = qualified_report();
  r.backends[0].rows[0].verdict = pacts::conformance::Verdict::kFail;
  r.backends[0].rows[0].generated.fail = 1;
  const std::string dir = write(r, "forged");
  EXPECT_TRUE(verify(dir, false).empty());  // honest: not qualified, and says so
  forge(dir, [](json& j) {
    j["qualified"] = true;
    j["mandatory_failure"] = false;
  });
  const std::vector<std::string> why = verify(dir, false);
  EXPECT_TRUE(rejected_for(why, "mandatory_failure is false but the rows say true"));
  EXPECT_TRUE(rejected_for(why, "report.md: its Result line disagrees"));
}

TEST(Verify, RejectsAPartialRun) {
  rpt::Report r = qualified_report();
  r.backends[0].rows.pop_back();  // the last property never ran
  EXPECT_TRUE(rejected_for(verify(write(r, "partial")), "has no result for " + pc::catalogue().back().id));
  r = qualified_report();
  for (rpt::PropertyRow& row : r.backends[0].rows)
    if (row.mustpass.pass > 0) {
      --row.mustpass.pass;  // one mustpass case of this property missing
      break;
    }
  EXPECT_TRUE(rejected_for(verify(write(r, "partial-mustpass")), "mustpass cases, this suite's set has"));
}

TEST(Verify, RejectsFewCasesADirtyBuildAndAnotherMustpassSet) {
  rpt::Report r = qualified_report();
  r.cases_per_property = 5;
  r.suite_version = "0.1.0 (git 1234abc-dirty)";
  r.mustpass_sha256 = std::string(64, '0');
  const std::string dir = write(r, "short");
  forge(dir, [](json& j) { j["spec_version"] = "pacts-spec-0"; });
  const std::vector<std::string> why = verify(dir);
  EXPECT_TRUE(rejected_for(why, "cases_per_property 5"));
  EXPECT_TRUE(rejected_for(why, "not a clean build"));
  EXPECT_TRUE(rejected_for(why, "this suite's set hashes to"));
  EXPECT_TRUE(rejected_for(why, "spec_version \"pacts-spec-0\", this suite implements pacts-spec-1"));
  EXPECT_TRUE(verify(write(r, "short"), /*official=*/false).empty());  // a consistent package
}

TEST(Verify, RejectsASchemaViolation) {
  const std::string dir = write(qualified_report(), "schema");
  forge(dir, [](json& j) {
    j["cases_per_property"] = "forty";
    j["backends"][0]["results"][0]["verdict"] = "Passed";
    j.erase("hostname");
    j["spec_version"] = 2;
  });
  const std::vector<std::string> why = verify(dir, false);
  EXPECT_TRUE(rejected_for(why, "report.json/cases_per_property: string, expected integer"));
  EXPECT_TRUE(rejected_for(why, "report.json/backends/0/results/0/verdict: \"Passed\", expected one of"));
  EXPECT_TRUE(rejected_for(why, "report.json: the key hostname is missing"));
  EXPECT_TRUE(rejected_for(why, "report.json/spec_version: integer, expected string"));
}

TEST(Verify, SchemaKeywordsEachBite) {
  const json s = json::parse(R"({"type": "object", "required": ["a"], "properties": {
      "a": {"type": "integer", "minimum": 2}, "b": {"const": 1}, "c": {"enum": ["x"]},
      "d": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/s"}}},
      "$defs": {"s": {"type": ["string", "null"]}}})");
  using pacts::apps::validate_schema;
  EXPECT_TRUE(validate_schema(json::parse(R"({"a": 3, "b": 1, "c": "x", "d": ["s", null]})"), s).empty());
  EXPECT_EQ(validate_schema(json::parse(R"({"a": 1})"), s).size(), 1u);         // minimum
  EXPECT_EQ(validate_schema(json::parse(R"({})"), s).size(), 1u);               // required
  EXPECT_EQ(validate_schema(json::parse(R"({"a": 2, "b": 2})"), s).size(), 1u); // const
  EXPECT_EQ(validate_schema(json::parse(R"({"a": 2, "c": "y"})"), s).size(), 1u);  // enum
  EXPECT_EQ(validate_schema(json::parse(R"({"a": 2, "d": []})"), s).size(), 1u);   // minItems
  EXPECT_EQ(validate_schema(json::parse(R"({"a": 2, "d": [3]})"), s).size(), 1u);  // items, $ref
  EXPECT_EQ(validate_schema(json::parse(R"({"a": 2.5})"), s).size(), 1u);          // type
}

}  // namespace
