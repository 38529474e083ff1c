// The JUnit XML of pacts-qualify (with its report.md and report.json) and of pacts-fuzz, from a
// report and a summary built in memory: the XML parses, with every attribute value escaped so
// that it reads back as written; every testcase has the stable name pacts.<program>.<backend> /
// property ID, never a path in its classname; every testsuite has time, timestamp and hostname;
// a NotSupported property says why.
#include "../qualify_report.h"

#include "summary.h"  // pacts-fuzz's (fuzz/src)

#include <pacts/conformance/junit.h>

#include <gtest/gtest.h>

#include <cctype>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <vector>

namespace {

using namespace pacts::conformance;
using namespace pacts::conformance::report;

// ---- A small XML reader: as much XML as a JUnit report uses -----------------------------------

struct Element {
  std::string name;
  std::map<std::string, std::string> attributes;  // entities decoded
  std::vector<std::unique_ptr<Element>> children;
  std::string text;                                // character data, entities decoded
};

class XmlReader {
 public:
  explicit XmlReader(std::string x) : x_(std::move(x)) {}

  // The root element, or nullptr with fault() saying what is wrong.
  std::unique_ptr<Element> read() {
    const std::string decl = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>";
    if (x_.rfind(decl, 0) != 0) return fail("no XML declaration");
    i_ = decl.size();
    skip_space();
    auto root = element();
    if (!root) return nullptr;
    skip_space();
    if (i_ != x_.size()) return fail("content after the root element at " + std::to_string(i_));
    return root;
  }
  const std::string& fault() const { return fault_; }

 private:
  std::unique_ptr<Element> fail(const std::string& why) {
    if (fault_.empty()) fault_ = why;
    return nullptr;
  }
  void skip_space() {
    while (i_ < x_.size() && std::isspace(static_cast<unsigned char>(x_[i_]))) ++i_;
  }
  static bool name_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' || c == ':';
  }
  std::string name() {
    const size_t start = i_;
    while (i_ < x_.size() && name_char(x_[i_])) ++i_;
    return x_.substr(start, i_ - start);
  }
  // Decodes text up to `stop`; a raw '<' or a '&' that starts no predefined entity is a fault,
  // and so is a raw '"' inside an attribute value (it would have ended the value).
  bool decoded(char stop, std::string& out) {
    while (i_ < x_.size() && x_[i_] != stop) {
      const char c = x_[i_];
      if (c == '<') return static_cast<bool>(fail("raw '<' at " + std::to_string(i_)));
      if (c == '&') {
        bool known = false;
        for (const auto& [entity, ch] : {std::pair<const char*, char>{"&amp;", '&'}, {"&lt;", '<'},
                                         {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}}) {
          const size_t n = std::char_traits<char>::length(entity);
          if (x_.compare(i_, n, entity) == 0) {
            out += ch;
            i_ += n;
            known = true;
            break;
          }
        }
        if (!known) return static_cast<bool>(fail("bad entity at " + std::to_string(i_)));
        continue;
      }
      if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r')
        return static_cast<bool>(fail("control character at " + std::to_string(i_)));
      out += c;
      ++i_;
    }
    return i_ < x_.size() || stop == '<';
  }
  std::unique_ptr<Element> element() {
    if (i_ >= x_.size() || x_[i_] != '<') return fail("expected an element at " + std::to_string(i_));
    ++i_;
    auto e = std::make_unique<Element>();
    e->name = name();
    if (e->name.empty()) return fail("empty element name at " + std::to_string(i_));
    for (;;) {
      skip_space();
      if (i_ >= x_.size()) return fail("unterminated <" + e->name + ">");
      if (x_.compare(i_, 2, "/>") == 0) {
        i_ += 2;
        return e;
      }
      if (x_[i_] == '>') {
        ++i_;
        break;
      }
      const std::string key = name();
      if (key.empty()) return fail("bad attribute in <" + e->name + "> at " + std::to_string(i_));
      if (x_.compare(i_, 2, "=\"") != 0) return fail("attribute " + key + " not quoted");
      i_ += 2;
      std::string value;
      if (!decoded('"', value)) return fail("attribute " + key + " of <" + e->name + ">: " + fault_);
      ++i_;  // the closing quote
      if (i_ < x_.size() && !std::isspace(static_cast<unsigned char>(x_[i_])) && x_[i_] != '>' &&
          x_[i_] != '/')
        return fail("attribute " + key + " of <" + e->name + "> ends inside a value");
      if (!e->attributes.emplace(key, value).second) return fail("attribute " + key + " twice");
    }
    for (;;) {
      if (!decoded('<', e->text)) return nullptr;
      if (i_ >= x_.size()) return fail("unclosed <" + e->name + ">");
      if (x_.compare(i_, 2, "</") == 0) {
        i_ += 2;
        if (name() != e->name || i_ >= x_.size() || x_[i_] != '>') return fail("mismatched </" + e->name + ">");
        ++i_;
        return e;
      }
      auto child = element();
      if (!child) return nullptr;
      e->children.push_back(std::move(child));
    }
  }

  std::string x_;
  size_t i_ = 0;
  std::string fault_;
};

void collect(const Element& e, const std::string& name, std::vector<const Element*>& out) {
  if (e.name == name) out.push_back(&e);
  for (const auto& c : e.children) collect(*c, name, out);
}
std::vector<const Element*> all(const Element& root, const std::string& name) {
  std::vector<const Element*> out;
  collect(root, name, out);
  return out;
}
const Element* child(const Element& e, const std::string& name) {
  for (const auto& c : e.children)
    if (c->name == name) return c.get();
  return nullptr;
}

// What a JUnit report must hold, as a list of faults ("" when none): the checker the tests run.
std::vector<std::string> junit_faults(const Element& root) {
  std::vector<std::string> faults;
  if (root.name != "testsuites") faults.push_back("root <" + root.name + ">");
  const std::regex number(R"([0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?)");
  const std::regex iso_utc(R"([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?Z)");
  const std::regex classname(R"(pacts\.[a-z]+\.[A-Za-z0-9_.-]+)");
  for (const Element* s : all(root, "testsuite")) {
    const auto get = [&](const char* key) {
      auto it = s->attributes.find(key);
      return it == s->attributes.end() ? std::string() : it->second;
    };
    const std::string suite = get("name");
    if (!std::regex_match(get("time"), number)) faults.push_back("testsuite " + suite + ": time \"" + get("time") + "\"");
    if (!std::regex_match(get("timestamp"), iso_utc))
      faults.push_back("testsuite " + suite + ": timestamp \"" + get("timestamp") + "\"");
    if (get("hostname").empty()) faults.push_back("testsuite " + suite + ": no hostname");
  }
  for (const Element* t : all(root, "testcase")) {
    const std::string cls = t->attributes.count("classname") ? t->attributes.at("classname") : "";
    const std::string name = t->attributes.count("name") ? t->attributes.at("name") : "";
    if (!std::regex_match(cls, classname)) faults.push_back("classname \"" + cls + "\" of " + name);
    // A path in a classname: a JUnit reader splits it at its dots (".../libk.so" reads as "so").
    for (const char* path_like : {"/", "\\", ".so", ".dll", ".dylib", "lib:", "exec:"})
      if (cls.find(path_like) != std::string::npos)
        faults.push_back("classname \"" + cls + "\" holds a path (" + path_like + ")");
    if (name.empty()) faults.push_back("testcase " + cls + " without a name");
    if (const Element* skipped = child(*t, "skipped")) {
      const std::string message = skipped->attributes.count("message") ? skipped->attributes.at("message") : "";
      // "NotSupported ... on BACKEND: REASON": the reason after the colon is not empty.
      const size_t colon = message.find(": ");
      if (colon == std::string::npos || colon + 2 >= message.size())
        faults.push_back("skipped " + cls + " " + name + " without a reason: \"" + message + "\"");
    }
  }
  return faults;
}

// ---- The report ---------------------------------------------------------------------------------

const char* const kHostReason = "large buffers: the backend declares no large_buffers capability";
const char* const kPluginName = "k<&\"nel> 2.0";  // every character XML escapes, and a space
const char* const kPluginPath = "/opt/vendor k/lib<&\"k>.so";

PropertyRow row(const std::string& id, Verdict v, bool mandatory = true) {
  PropertyRow r;
  r.id = id;
  r.name = "Name<&\"" + id;
  r.mandatory = mandatory;
  r.verdict = v;
  r.seconds = 0.25;
  if (v == Verdict::kPass) r.generated.pass = 3;
  if (v == Verdict::kNotSupported) r.generated.not_supported = 3;
  if (v == Verdict::kFail) {
    r.generated.fail = 1;
    r.detail = "error 3 > bound 1 at <b=0 & h=\"1\">";
    r.failing_case_files = {"/tmp/out dir/failures/PACTS-ACC-1-lib_k.json"};
    r.replay = "pacts case run '/tmp/out dir/x.json' --backend lib:" + std::string(kPluginPath);
  }
  return r;
}

Report sample() {
  Report r;
  r.suite_version = "0.1 <&\"test\">";
  r.started_utc = "2026-12-06T10:00:00Z";
  r.hostname = "node<&\"1>";
  r.seconds = 4.5;
  r.seed = 7;
  BackendSection host;
  host.name = "host";
  host.device = "CPU threads";
  host.rows = {row("PACTS-ACC-1", Verdict::kPass), row("PACTS-DEV-2", Verdict::kNotSupported)};
  host.rows[1].not_supported_reason = kHostReason;
  BackendSection plugin;
  plugin.name = "lib:" + std::string(kPluginPath);
  plugin.plugin_path = kPluginPath;
  plugin.plugin_name = kPluginName;
  plugin.device = "dev <&\"0>";
  // A NotSupported row whose backend gave no reason still says so.
  plugin.rows = {row("PACTS-ACC-1", Verdict::kFail), row("PACTS-DEV-2", Verdict::kNotSupported)};
  r.backends = {host, plugin};
  CheckResult c;
  c.id = "PACTS-REF-1";
  c.name = "closed <form> & \"cases\"";
  c.verdict = Verdict::kFail;
  c.detail = "off by <1 & more>";
  r.self_checks = {c};
  return r;
}

std::unique_ptr<Element> parsed(const std::string& xml) {
  XmlReader reader(xml);
  auto root = reader.read();
  EXPECT_NE(root, nullptr) << reader.fault() << "\n" << xml;
  return root;
}

// ---- The checker bites what it must -------------------------------------------------------------

TEST(QualifyJunit, CheckerBites) {
  const std::string head = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  const std::string suite =
      "<testsuite name=\"s\" time=\"1\" timestamp=\"2026-12-06T10:00:00Z\" hostname=\"h\">";
  const auto faults = [&](const std::string& body) {
    auto root = parsed(head + "<testsuites>" + body + "</testsuites>\n");
    return root ? junit_faults(*root).size() : size_t{99};
  };
  EXPECT_EQ(faults(suite + "<testcase classname=\"pacts.qualify.host\" name=\"PACTS-ACC-1\"/></testsuite>"), 0u);
  // A path in a classname; a testcase without a name.
  EXPECT_GT(faults(suite + "<testcase classname=\"pacts.lib:/opt/libk.so\" name=\"PACTS-ACC-1\"/></testsuite>"), 0u);
  EXPECT_GT(faults(suite + "<testcase classname=\"pacts.qualify.so\" name=\"\"/></testsuite>"), 0u);
  // A suite without timestamp, hostname or time, or with a local time.
  EXPECT_GT(faults("<testsuite name=\"s\" time=\"1\" hostname=\"h\"></testsuite>"), 0u);
  EXPECT_GT(faults("<testsuite name=\"s\" time=\"1\" timestamp=\"2026-12-06T10:00:00Z\"></testsuite>"), 0u);
  EXPECT_GT(faults("<testsuite name=\"s\" timestamp=\"2026-12-06T10:00:00Z\" hostname=\"h\"></testsuite>"), 0u);
  EXPECT_GT(faults("<testsuite name=\"s\" time=\"1\" timestamp=\"2026-12-06 10:00\" hostname=\"h\"></testsuite>"), 0u);
  // A skipped test without a reason.
  EXPECT_GT(faults(suite + "<testcase classname=\"pacts.qualify.host\" name=\"PACTS-DEV-2\">"
                           "<skipped message=\"NotSupported on host\"/></testcase></testsuite>"),
            0u);
  // Unescaped characters do not parse.
  for (const char* bad : {"<a x=\"<\"/>", "<a x=\"&\"/>", "<a x=\"a\"b\"/>", "<a>x & y</a>", "<a>x < y</a>"}) {
    XmlReader reader(head + bad + "\n");
    EXPECT_EQ(reader.read(), nullptr) << bad;
  }
}

// ---- pacts-qualify's report ----------------------------------------------------------------------

TEST(QualifyJunit, ParsesAndEveryValueReadsBackAsWritten) {
  const Report r = sample();
  auto root = parsed(to_junit(r));
  ASSERT_NE(root, nullptr);
  std::vector<std::string> values;
  for (const Element* p : all(*root, "property")) values.push_back(p->attributes.at("value"));
  for (const std::string& want : {r.suite_version, r.backends[1].name, std::string(kPluginPath),
                                  r.backends[1].device})
    EXPECT_NE(std::find(values.begin(), values.end(), want), values.end()) << want;
  bool detail_seen = false;
  for (const Element* f : all(*root, "failure"))
    detail_seen |= f->attributes.at("message") == r.backends[1].rows[0].detail;
  EXPECT_TRUE(detail_seen);
  for (const Element* s : all(*root, "testsuite")) EXPECT_EQ(s->attributes.at("hostname"), r.hostname);
}

TEST(QualifyJunit, StableNamesNoPathSuiteAttributesAndReasons) {
  const Report r = sample();
  auto root = parsed(to_junit(r));
  ASSERT_NE(root, nullptr);
  const std::vector<std::string> faults = junit_faults(*root);
  for (const std::string& f : faults) ADD_FAILURE() << f;
  EXPECT_TRUE(faults.empty());

  std::vector<std::pair<std::string, std::string>> names;
  for (const Element* t : all(*root, "testcase"))
    names.emplace_back(t->attributes.at("classname"), t->attributes.at("name"));
  const std::vector<std::pair<std::string, std::string>> want = {
      {"pacts.qualify.host", "PACTS-ACC-1"},
      {"pacts.qualify.host", "PACTS-DEV-2"},
      {"pacts.qualify.k___nel__2.0", "PACTS-ACC-1"},  // the declared name, sanitised
      {"pacts.qualify.k___nel__2.0", "PACTS-DEV-2"},
      {"pacts.qualify.self-checks", "PACTS-REF-1"}};
  EXPECT_EQ(names, want);

  // The host backend's reason, word for word; the plugin gave none, and the report says so.
  std::vector<std::string> skipped;
  for (const Element* s : all(*root, "skipped")) skipped.push_back(s->attributes.at("message"));
  ASSERT_EQ(skipped.size(), 2u);
  EXPECT_NE(skipped[0].find(kHostReason), std::string::npos) << skipped[0];
  EXPECT_NE(skipped[0].find("Mandatory"), std::string::npos) << skipped[0];
  EXPECT_NE(skipped[1].find("no reason"), std::string::npos) << skipped[1];
}

TEST(QualifyJunit, MarkdownAndJsonSayWhyNotSupported) {
  const Report r = sample();
  const std::string md = to_markdown(r);
  EXPECT_NE(md.find("**PACTS-DEV-2** Mandatory, NotSupported: " + std::string(kHostReason)), std::string::npos) << md;
  const nlohmann::json j = to_json(r);
  EXPECT_EQ(j["backends"][0]["results"][1]["not_supported_reason"], kHostReason);
  EXPECT_TRUE(j["backends"][0]["results"][0]["not_supported_reason"].is_null());
  EXPECT_EQ(j["hostname"], r.hostname);
}

// A row none of whose cases could exercise its property is NotApplicable in every output: a
// skipped test with its own word and reason, its own JSON count and reason, its own Markdown list;
// never NotSupported, which would blame the backend.
TEST(QualifyJunit, NotApplicableRowsSayWhyAndAreNotNotSupported) {
  Report r = sample();
  PropertyRow na = row("PACTS-EDGE-6", Verdict::kPass);
  na.generated = {};
  na.generated.not_applicable = 3;
  na.not_applicable_reason = "MXFP4 K has no per-tensor scale";
  na.verdict = combine(na.mustpass, na.generated);
  EXPECT_EQ(na.verdict, Verdict::kNotApplicable);
  Counts refused_too = na.generated;
  refused_too.not_supported = 1;
  EXPECT_EQ(combine({}, refused_too), Verdict::kNotSupported);  // the backend's refusal wins
  EXPECT_EQ(combine({}, {}), Verdict::kNotSupported);           // no case at all
  r.backends[0].rows.push_back(na);
  auto root = parsed(to_junit(r));
  ASSERT_NE(root, nullptr);
  for (const std::string& f : junit_faults(*root)) ADD_FAILURE() << f;
  std::vector<std::string> skipped;
  for (const Element* e : all(*root, "skipped")) skipped.push_back(e->attributes.at("message"));
  ASSERT_EQ(skipped.size(), 3u);
  EXPECT_EQ(skipped[1], "NotApplicable (Mandatory) on host: MXFP4 K has no per-tensor scale");
  const nlohmann::json j = to_json(r);
  const nlohmann::json& jr = j["backends"][0]["results"][2];
  EXPECT_EQ(jr["verdict"], "NotApplicable");
  EXPECT_EQ(jr["generated"]["not_applicable"], 3);
  EXPECT_EQ(jr["not_applicable_reason"], "MXFP4 K has no per-tensor scale");
  EXPECT_TRUE(jr["not_supported_reason"].is_null());
  const std::string md = to_markdown(r);
  EXPECT_NE(md.find("### NotApplicable, and why"), std::string::npos);
  EXPECT_NE(md.find("**PACTS-EDGE-6** Mandatory, NotApplicable: MXFP4 K has no per-tensor scale"),
            std::string::npos)
      << md;
}

// A qualification run is the whole catalogue, the committed mustpass set, at least 40 cases per
// property and a clean, non-Debug build; each deviation is named, and only such a run without a
// Mandatory failure is "qualified".
TEST(QualifyReport, WhatMakesAQualificationRun) {
  RunScope full;
  full.suite_version = "0.1.0 (git abc1234)";
  full.build_type = "RelWithDebInfo";
  EXPECT_TRUE(not_a_qualification_run(full).empty());
  RunScope s = full;
  s.every_property = false;
  s.default_mustpass = false;
  s.cases = 39;
  s.suite_version = "0.1.0 (git abc1234-dirty)";
  s.build_type = "Debug";
  const std::vector<std::string> why = not_a_qualification_run(s);
  ASSERT_EQ(why.size(), 5u);
  EXPECT_EQ(why[2], "39 generated cases per property, fewer than 40");
  Report r = sample();
  r.backends[1].rows[0] = row("PACTS-ACC-1", Verdict::kPass);  // no Mandatory failure left
  r.self_checks.clear();
  EXPECT_TRUE(qualified(r));
  r.not_qualification = why;
  EXPECT_FALSE(qualified(r));
  EXPECT_EQ(to_json(r)["not_a_qualification_run"].size(), 5u);
}

// ---- pacts-fuzz's summary -----------------------------------------------------------------------

pacts::fuzz::Summary fuzz_sample() {
  pacts::fuzz::Summary s;
  pacts::fuzz::CampaignRecord c;
  c.seed = 7;
  c.backend = "lib:/opt/vendor k<&\">/libk<&>.so";
  c.started_utc = "2026-12-06T10:00:00Z";
  c.elapsed_s = 2;
  c.stop_reason = "cases <&\">";
  s.campaigns = {c};
  pacts::fuzz::PropertyCounts pass;
  pass.id = "PACTS-ACC-1";
  pass.test_name = "PACTS_ACC_1_AccurateOutput";
  pass.cases = pass.passed = 3;
  pacts::fuzz::PropertyCounts refused;
  refused.id = "PACTS-DEV-2";
  refused.test_name = "PACTS_DEV_2_LargeBuffers";
  refused.cases = refused.not_supported = 3;
  refused.not_supported_reason = kHostReason;
  s.properties = {pass, refused};
  return s;
}

TEST(FuzzJunit, StableNamesNoPathSuiteAttributesAndReasons) {
  auto root = parsed(fuzz_sample().junit_xml());
  ASSERT_NE(root, nullptr);
  const std::vector<std::string> faults = junit_faults(*root);
  for (const std::string& f : faults) ADD_FAILURE() << f;
  EXPECT_TRUE(faults.empty());
  std::vector<std::pair<std::string, std::string>> names;
  for (const Element* t : all(*root, "testcase"))
    names.emplace_back(t->attributes.at("classname"), t->attributes.at("name"));
  const std::vector<std::pair<std::string, std::string>> want = {{"pacts.fuzz.k___", "PACTS-ACC-1"},
                                                                 {"pacts.fuzz.k___", "PACTS-DEV-2"}};
  EXPECT_EQ(names, want);
  const auto skipped = all(*root, "skipped");
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_NE(skipped[0]->attributes.at("message").find(kHostReason), std::string::npos);
  EXPECT_EQ(skipped[0]->attributes.at("message").rfind("NotSupported (Mandatory) on k___", 0), 0u)
      << skipped[0]->attributes.at("message");
  bool stop_seen = false;
  for (const Element* p : all(*root, "property"))
    stop_seen |= p->attributes.at("value").find("stop cases <&\">") != std::string::npos;
  EXPECT_TRUE(stop_seen);
}

// `s` written as summary.json, read back, and merged with itself (two shards of one campaign).
pacts::fuzz::Summary read_back_and_merged_twice(const pacts::fuzz::Summary& s) {
  auto back = pacts::fuzz::summary_from_json(s.to_json());
  EXPECT_TRUE(back.is_ok()) << back.status().message();
  pacts::fuzz::Summary merged;
  if (!back.is_ok()) return merged;
  pacts::fuzz::merge_into(merged, back.value());
  pacts::fuzz::merge_into(merged, back.value());
  return merged;
}

// The reason survives summary.json and a merge (pacts-fuzz merge writes the merged junit.xml).
TEST(FuzzJunit, NotSupportedReasonSurvivesSummaryJsonAndMerge) {
  const pacts::fuzz::Summary merged = read_back_and_merged_twice(fuzz_sample());
  ASSERT_EQ(merged.properties.size(), 2u);
  EXPECT_EQ(merged.properties[1].not_supported_reason, kHostReason);
  auto root = parsed(merged.junit_xml());
  ASSERT_NE(root, nullptr);
  for (const std::string& f : junit_faults(*root)) ADD_FAILURE() << f;
}

// NotApplicable counts and their reason survive summary.json and a merge; a property with no
// other case is a skipped test that says NotApplicable; a summary of an earlier version (no
// not_applicable field) still reads.
TEST(FuzzJunit, NotApplicableSurvivesSummaryJsonAndMerge) {
  pacts::fuzz::Summary s = fuzz_sample();
  pacts::fuzz::PropertyCounts na;
  na.id = "PACTS-EDGE-6";
  na.test_name = "PACTS_EDGE_6_TopOfRangeKeys";
  na.cases = na.not_applicable = 2;
  na.not_applicable_reason = "every K code is zero";
  s.properties.push_back(na);
  const pacts::fuzz::Summary merged = read_back_and_merged_twice(s);
  ASSERT_EQ(merged.properties.size(), 3u);
  EXPECT_EQ(merged.properties[2].not_applicable, 4);
  EXPECT_EQ(merged.properties[2].not_applicable_reason, "every K code is zero");
  EXPECT_EQ(merged.to_json()["totals"]["not_applicable"], 4);
  auto root = parsed(merged.junit_xml());
  ASSERT_NE(root, nullptr);
  for (const std::string& f : junit_faults(*root)) ADD_FAILURE() << f;
  const auto skipped = all(*root, "skipped");
  ASSERT_EQ(skipped.size(), 2u);
  EXPECT_EQ(skipped[1]->attributes.at("message").rfind("NotApplicable (Mandatory) on k___", 0), 0u)
      << skipped[1]->attributes.at("message");
  nlohmann::json old_version = fuzz_sample().to_json();
  for (auto& p : old_version["properties"]) p.erase("not_applicable"), p.erase("not_applicable_reason");
  EXPECT_TRUE(pacts::fuzz::summary_from_json(old_version).is_ok());
}

TEST(QualifyJunit, ClassPartIsSanitised) {
  EXPECT_EQ(junit_class_part("host"), "host");
  EXPECT_EQ(junit_class_part("my-kernel_v1.2"), "my-kernel_v1.2");
  EXPECT_EQ(junit_class_part("a/b c<&\">"), "a_b_c____");
  EXPECT_EQ(junit_class_part(""), "unnamed");
  EXPECT_EQ(junit_class_part("lib:/opt/k/libmy_kernel.so"), "my_kernel");
  EXPECT_EQ(junit_class_part("exec:python3 /opt/k/serve.py"), "serve");
  EXPECT_EQ(xml_escaped("a<'&\">\x01"), "a&lt;&apos;&amp;&quot;&gt; ");
}

}  // namespace
