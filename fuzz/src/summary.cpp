#include "summary.h"

#include <pacts/conformance/junit.h>
#include <pacts/conformance/out_dir.h>
#include <pacts/conformance/property.h>

#include <algorithm>
#include <ctime>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>


namespace pacts::fuzz {
namespace {

using Json = nlohmann::json;

std::string shard_text(const Shard& s) {
  return std::to_string(s.index) + "/" + std::to_string(s.count);
}


// Typed reading of a summary document: every refusal names the key path and the value.
struct FieldError {
  std::string what;
};

class Reader {
 public:
  Reader(const Json& j, std::string path) : j_(j), path_(std::move(path)) {
    if (!j_.is_object()) throw FieldError{where("") + " " + brief(j_) + ": expected an object"};
  }
  const Json& get(const char* key) const {
    const auto it = j_.find(key);
    if (it == j_.end()) throw FieldError{where(key) + ": missing"};
    return *it;
  }
  std::string str(const char* key) const {
    const Json& v = get(key);
    if (!v.is_string()) bad(key, v, "expected a string");
    return v.get<std::string>();
  }
  int64_t integer(const char* key, int64_t lo = 0) const {
    const Json& v = get(key);
    if (!v.is_number_integer() || v.get<int64_t>() < lo)
      bad(key, v, "expected an integer >= " + std::to_string(lo));
    return v.get<int64_t>();
  }
  double number(const char* key) const {
    const Json& v = get(key);
    if (!v.is_number() || v.get<double>() < 0) bad(key, v, "expected a number >= 0");
    return v.get<double>();
  }
  bool boolean(const char* key) const {
    const Json& v = get(key);
    if (!v.is_boolean()) bad(key, v, "expected true or false");
    return v.get<bool>();
  }
  // Seeds are decimal strings, as in case files (spec/case_files.md §2.2: JSON numbers lose bits).
  uint64_t seed(const char* key) const {
    const std::string s = str(key);
    uint64_t x = 0;
    bool ok = !s.empty() && s.size() <= 20;
    for (char c : s) {
      if (c < '0' || c > '9') ok = false;
      else if (x > (UINT64_MAX - static_cast<uint64_t>(c - '0')) / 10) ok = false;
      else x = x * 10 + static_cast<uint64_t>(c - '0');
    }
    if (!ok) bad(key, get(key), "expected a decimal string of a 64-bit unsigned seed");
    return x;
  }
  Shard shard(const char* key) const {
    auto s = parse_shard(str(key));
    if (!s) bad(key, get(key), "expected \"K/N\" with 0 <= K < N");
    return s.value();
  }
  const Json& array(const char* key) const {
    const Json& v = get(key);
    if (!v.is_array()) bad(key, v, "expected an array");
    return v;
  }
  // A case file of the summary's own folder, "failures/NAME.json": merge copies it, and a path
  // that left the folder would read and write files anywhere.
  std::string case_file(const char* key) const {
    const std::string s = str(key);
    const std::string name = s.rfind("failures/", 0) == 0 ? s.substr(9) : "";
    if (name.find('/') != std::string::npos || !name.ends_with(".json"))
      bad(key, get(key), "expected \"failures/NAME.json\", a case file of the summary's folder");
    return s;
  }
  std::string path(const char* key) const { return where(key); }

 private:
  static std::string brief(const Json& v) {
    std::string s = v.dump();
    return s.size() > 40 ? s.substr(0, 37) + "..." : s;
  }
  std::string where(const char* key) const {
    return "summary: " + (path_.empty() ? std::string(key) : path_ + (*key ? "." : "") + key);
  }
  [[noreturn]] void bad(const char* key, const Json& v, const std::string& why) const {
    throw FieldError{where(key) + " " + brief(v) + ": " + why};
  }
  const Json& j_;
  std::string path_;
};

Json campaign_json(const CampaignRecord& c) {
  return {{"suite_version", c.suite_version},
          {"seed", std::to_string(c.seed)},
          {"shard", shard_text(c.shard)},
          {"backend", c.backend},
          {"workers", c.workers},
          {"seconds_budget", c.seconds_budget},
          {"cases_budget", c.cases_budget},
          {"started_utc", c.started_utc},
          {"elapsed_s", c.elapsed_s},
          {"cases", c.cases},
          {"cases_per_s", c.elapsed_s > 0 ? static_cast<double>(c.cases) / c.elapsed_s : 0.0},
          {"interrupted", c.interrupted},
          {"stop_reason", c.stop_reason},
          {"worker_seconds",
           {{"generate", c.generate_s},
            {"check", c.check_s},
            {"backend", c.backend_s},
            {"shrink", c.shrink_s}}}};
}

CampaignRecord campaign_from(const Json& j, const std::string& path) {
  Reader r(j, path);
  CampaignRecord c;
  if (j.contains("suite_version")) c.suite_version = r.str("suite_version");  // absent before it was kept
  c.seed = r.seed("seed");
  c.shard = r.shard("shard");
  c.backend = r.str("backend");
  for (const Json& w : r.array("workers")) {
    if (!w.is_string()) throw FieldError{r.path("workers") + ": expected strings"};
    c.workers.push_back(w.get<std::string>());
  }
  c.seconds_budget = r.number("seconds_budget");
  c.cases_budget = r.integer("cases_budget");
  c.started_utc = r.str("started_utc");
  c.elapsed_s = r.number("elapsed_s");
  c.cases = r.integer("cases");
  c.interrupted = r.boolean("interrupted");
  c.stop_reason = r.str("stop_reason");
  Reader t(r.get("worker_seconds"), path + ".worker_seconds");
  c.generate_s = t.number("generate");
  c.check_s = t.number("check");
  c.backend_s = t.number("backend");
  c.shrink_s = t.number("shrink");
  return c;
}

Json property_json(const PropertyCounts& p) {
  return {{"id", p.id},
          {"name", p.name},
          {"test_name", p.test_name},
          {"cases", p.cases},
          {"passed", p.passed},
          {"not_supported", p.not_supported},
          {"failed", p.failed},
          {"quality_warnings", p.quality_warnings},
          {"not_applicable", p.not_applicable},
          {"skipped", p.skipped},
          {"discarded", p.discarded},
          {"worst_ratio", p.worst_ratio},
          {"seconds", p.seconds},
          {"not_supported_reason", p.not_supported_reason},
          {"not_applicable_reason", p.not_applicable_reason}};
}

PropertyCounts property_from(const Json& j, const std::string& path) {
  Reader r(j, path);
  PropertyCounts p;
  p.id = r.str("id");
  p.name = r.str("name");
  p.test_name = r.str("test_name");
  p.cases = r.integer("cases");
  p.passed = r.integer("passed");
  p.not_supported = r.integer("not_supported");
  p.failed = r.integer("failed");
  p.quality_warnings = r.integer("quality_warnings");
  p.skipped = r.integer("skipped");
  p.discarded = r.integer("discarded");
  p.worst_ratio = r.number("worst_ratio");
  p.seconds = r.number("seconds");
  // Absent from the summaries of earlier versions.
  if (j.is_object() && j.contains("not_supported_reason") && j["not_supported_reason"].is_string())
    p.not_supported_reason = j["not_supported_reason"].get<std::string>();
  // Absent before NotApplicable was a state of its own (such cases counted as not_supported).
  if (j.is_object() && j.contains("not_applicable")) p.not_applicable = r.integer("not_applicable");
  if (j.is_object() && j.contains("not_applicable_reason") && j["not_applicable_reason"].is_string())
    p.not_applicable_reason = j["not_applicable_reason"].get<std::string>();
  if (p.passed + p.not_supported + p.failed + p.quality_warnings + p.not_applicable != p.cases)
    throw FieldError{r.path("cases") + " " + std::to_string(p.cases) +
                     ": expected passed + not_supported + failed + quality_warnings + not_applicable"};
  return p;
}

Json failure_json(const FailureRecord& f) {
  Json j = {{"signature", f.signature},
          {"property", f.property},
          {"backend", f.backend},
          {"device", f.device},
          {"verdict", f.verdict},
          {"detail", f.detail},
          {"case_file", f.case_file},
          {"replay", "pacts-fuzz replay " + f.case_file},
          {"campaign_seed", std::to_string(f.campaign_seed)},
          {"shard", shard_text(f.shard)},
          {"index", f.index},
          {"size", f.size},
          {"shrink_steps", f.shrink_steps},
          {"shrink_tries", f.shrink_tries},
          {"shrink_bounded", f.shrink_bounded},
          {"original", f.original},
          {"minimal", f.minimal},
          {"occurrences", f.occurrences}};
  if (!f.summarised) j["summarised"] = false;
  return j;
}

FailureRecord failure_from(const Json& j, const std::string& path) {
  Reader r(j, path);
  FailureRecord f;
  f.signature = r.str("signature");
  f.property = r.str("property");
  f.backend = r.str("backend");
  f.device = r.str("device");
  f.verdict = r.str("verdict");
  f.detail = r.str("detail");
  f.case_file = r.case_file("case_file");
  f.campaign_seed = r.seed("campaign_seed");
  f.shard = r.shard("shard");
  f.index = r.integer("index");
  f.size = static_cast<int32_t>(r.integer("size"));
  f.shrink_steps = static_cast<int32_t>(r.integer("shrink_steps"));
  f.shrink_tries = static_cast<int32_t>(r.integer("shrink_tries"));
  f.shrink_bounded = r.boolean("shrink_bounded");
  f.original = r.str("original");
  f.minimal = r.str("minimal");
  f.occurrences = r.integer("occurrences", 1);
  if (j.contains("summarised")) f.summarised = r.boolean("summarised");
  return f;
}


}  // namespace

int64_t Summary::cases() const {
  int64_t n = 0;
  for (const PropertyCounts& p : properties) n += p.cases;
  return n;
}

int64_t Summary::failed() const {
  int64_t n = 0;
  for (const PropertyCounts& p : properties) n += p.failed;
  return n;
}

int64_t Summary::unsummarised() const {
  int64_t n = 0;
  for (const FailureRecord& f : failures) n += f.summarised ? 0 : 1;
  return n;
}

Json Summary::to_json() const {
  Json props = Json::array(), fails = Json::array(), camps = Json::array();
  int64_t passed = 0, not_supported = 0, warnings = 0, skipped = 0, discarded = 0, inapplicable = 0;
  for (const PropertyCounts& p : properties) {
    props.push_back(property_json(p));
    passed += p.passed;
    not_supported += p.not_supported;
    inapplicable += p.not_applicable;
    warnings += p.quality_warnings;
    skipped += p.skipped;
    discarded += p.discarded;
  }
  for (const FailureRecord& f : failures) fails.push_back(failure_json(f));
  for (const CampaignRecord& c : campaigns) camps.push_back(campaign_json(c));
  Json doc = {{"pacts_fuzz_summary_version", kSummaryVersion},
          {"complete", complete},
          {"totals",
           {{"cases", cases()},
            {"passed", passed},
            {"not_supported", not_supported},
            {"failed", failed()},
            {"quality_warnings", warnings},
            {"not_applicable", inapplicable},
            {"skipped", skipped},
            {"discarded", discarded},
            {"distinct_failures", static_cast<int64_t>(failures.size())},
            {"unsummarised_failures", unsummarised()}}},
          {"campaigns", camps},
          {"properties", props},
          {"failures", fails},
          {"coverage", coverage.to_json()}};
  if (!incomplete.empty()) doc["incomplete"] = incomplete;
  return doc;
}

spec::Result<Summary> summary_from_json(const Json& doc) {
  try {
    Reader r(doc, "");
    const int64_t version = r.integer("pacts_fuzz_summary_version");
    if (version != kSummaryVersion)
      return spec::invalid_argument("summary: pacts_fuzz_summary_version " +
                                    std::to_string(version) + ": this pacts-fuzz reads " +
                                    std::to_string(kSummaryVersion));
    Summary s;
    s.complete = r.boolean("complete");
    size_t i = 0;
    for (const Json& c : r.array("campaigns"))
      s.campaigns.push_back(campaign_from(c, "campaigns[" + std::to_string(i++) + "]"));
    i = 0;
    for (const Json& p : r.array("properties"))
      s.properties.push_back(property_from(p, "properties[" + std::to_string(i++) + "]"));
    i = 0;
    for (const Json& f : r.array("failures"))
      s.failures.push_back(failure_from(f, "failures[" + std::to_string(i++) + "]"));
    if (doc.contains("incomplete")) {
      for (const Json& line : r.array("incomplete")) {
        if (!line.is_string()) throw FieldError{r.path("incomplete") + ": expected strings"};
        s.incomplete.push_back(line.get<std::string>());
      }
    }
    Reader cov(r.get("coverage"), "coverage");
    const Json& cells = cov.get("cells");
    if (!cells.is_object()) throw FieldError{cov.path("cells") + ": expected an object"};
    for (const auto& [key, n] : cells.items()) {
      if (!n.is_number_integer() || n.get<int64_t>() < 0)
        throw FieldError{cov.path("cells") + "." + key + ": expected an integer >= 0"};
      s.coverage.add_cell(key, n.get<int64_t>());
    }
    return s;
  } catch (const FieldError& e) {
    return spec::invalid_argument(e.what);
  }
}

void merge_into(Summary& into, const Summary& part) {
  into.campaigns.insert(into.campaigns.end(), part.campaigns.begin(), part.campaigns.end());
  into.complete = into.complete && part.complete;
  into.incomplete.insert(into.incomplete.end(), part.incomplete.begin(), part.incomplete.end());
  for (const PropertyCounts& p : part.properties) {
    auto it = std::find_if(into.properties.begin(), into.properties.end(),
                           [&](const PropertyCounts& q) { return q.id == p.id; });
    if (it == into.properties.end()) {
      into.properties.push_back(p);
      continue;
    }
    it->cases += p.cases;
    it->passed += p.passed;
    it->not_supported += p.not_supported;
    if (it->not_supported_reason.empty()) it->not_supported_reason = p.not_supported_reason;
    it->not_applicable += p.not_applicable;
    if (it->not_applicable_reason.empty()) it->not_applicable_reason = p.not_applicable_reason;
    it->failed += p.failed;
    it->quality_warnings += p.quality_warnings;
    it->skipped += p.skipped;
    it->discarded += p.discarded;
    it->worst_ratio = std::max(it->worst_ratio, p.worst_ratio);
    it->seconds += p.seconds;
  }
  std::sort(into.properties.begin(), into.properties.end(),
            [](const PropertyCounts& a, const PropertyCounts& b) { return a.id < b.id; });
  for (const FailureRecord& f : part.failures) {
    auto it = std::find_if(into.failures.begin(), into.failures.end(),
                           [&](const FailureRecord& g) { return g.signature == f.signature; });
    if (it == into.failures.end()) {
      into.failures.push_back(f);
    } else if (it->summarised == f.summarised) {
      if (f.summarised) it->occurrences += f.occurrences;  // a case file alone counts once
    } else if (f.summarised) {  // a summary counted what was known from its case file only
      it->occurrences = f.occurrences;
      it->summarised = true;
    }
  }
  into.coverage.merge(part.coverage);
}

std::string Summary::junit_xml() const {
  // One testcase per property (its spec test name); a property with failures fails, one whose
  // every case was NotSupported (or that got none) is skipped (spec/properties.md §1).
  double seconds = 0;
  for (const CampaignRecord& c : campaigns) seconds = std::max(seconds, c.elapsed_s);
  // A case file no summary counts (FailureRecord::summarised) fails its property too: its
  // verdict is unknown until replayed, and a report must not pass what may have failed.
  const auto unsummarised_of = [&](const std::string& id) {
    int64_t n = 0;
    for (const FailureRecord& f : failures) n += !f.summarised && f.property == id;
    return n;
  };
  int64_t failing = 0, skipped = 0;
  for (const PropertyCounts& p : properties) {
    if (p.failed > 0 || unsummarised_of(p.id) > 0) ++failing;
    else if (p.passed + p.quality_warnings == 0) ++skipped;
  }
  // One stable name per test, as pacts-qualify's: classname pacts.fuzz.<backend>, name the
  // property ID. Campaigns of several backends merged: "mixed" (each campaign is a property).
  std::string backend;
  for (const CampaignRecord& c : campaigns) {
    const std::string part = conformance::junit_class_part(c.backend);
    backend = backend.empty() || backend == part ? part : "mixed";
  }
  if (backend.empty()) backend = "unnamed";
  const std::string classname = "pacts.fuzz." + backend;
  // When: the earliest campaign's start (ISO 8601 UTC, sortable as text); where: this machine.
  std::string started;
  for (const CampaignRecord& c : campaigns)
    if (!c.started_utc.empty() && (started.empty() || c.started_utc < started)) started = c.started_utc;
  if (started.empty()) {
    const std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
    started = text;
  }
  std::ostringstream x;
  x << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x << "<testsuites name=\"pacts-fuzz\" tests=\"" << properties.size() << "\" failures=\""
    << failing << "\" skipped=\"" << skipped << "\" time=\"" << seconds << "\">\n";
  x << "  <testsuite name=\"" << conformance::xml_escaped(classname) << "\" tests=\"" << properties.size() << "\" failures=\""
    << failing << "\" skipped=\"" << skipped << "\" errors=\"0\" time=\"" << seconds << "\" timestamp=\""
    << conformance::xml_escaped(started) << "\" hostname=\"" << conformance::xml_escaped(conformance::host_name()) << "\">\n";
  x << "    <properties>\n";
  for (const CampaignRecord& c : campaigns)
    x << "      <property name=\"campaign\" value=\"seed " << c.seed << " shard "
      << shard_text(c.shard) << " backend " << conformance::xml_escaped(c.backend) << " cases " << c.cases
      << " stop " << conformance::xml_escaped(c.stop_reason) << "\"/>\n";
  x << "    </properties>\n";
  for (const PropertyCounts& p : properties) {
    x << "    <testcase classname=\"" << conformance::xml_escaped(classname) << "\" name=\"" << conformance::xml_escaped(p.id) << "\" time=\""
      << p.seconds << "\">\n";
    if (const int64_t unsummarised = unsummarised_of(p.id); p.failed > 0 || unsummarised > 0) {
      std::string files;
      for (const FailureRecord& f : failures)
        if (f.property == p.id && (f.verdict == "Fail" || !f.summarised))
          files += f.case_file + " (" + f.backend + ", " +
                   (f.summarised ? std::to_string(f.occurrences) + " occurrences"
                                 : std::string("in no summary: verdict unknown")) +
                   "): " + f.detail + "\n";
      std::string message = std::to_string(p.failed) + " of " + std::to_string(p.cases) + " cases failed";
      if (unsummarised > 0)
        message += ", and " + std::to_string(unsummarised) + " case files that no summary counts";
      x << "      <failure message=\"" << conformance::xml_escaped(message) << "\">"
        << conformance::xml_escaped(files + "replay: pacts-fuzz replay <case file>") << "</failure>\n";
    } else if (p.passed + p.quality_warnings == 0) {
      // As pacts-qualify's: "NotSupported (LEVEL) on BACKEND: the backend's reason".
      const conformance::Property* known = conformance::find_property(p.id);
      const std::string level = known == nullptr ? "unknown level"
                                : known->level == conformance::Level::kMandatory ? "Mandatory"
                                                                                 : "QualityWarning";
      x << "      <skipped message=\""
        << conformance::xml_escaped(
               p.cases == 0 ? std::string("no cases ran: none of the campaign's cases reached it")
               : p.not_supported == 0
                   ? "NotApplicable (" + level + ") on " + backend + ", every case: " +
                         (p.not_applicable_reason.empty() ? std::string("no reason recorded")
                                                          : p.not_applicable_reason)
                   : "NotSupported (" + level + ") on " + backend + ", every case: " +
                         (p.not_supported_reason.empty() ? std::string("the backend gave no reason")
                                                         : p.not_supported_reason))
        << "\"/>\n";
    }
    x << "      <system-out>" << conformance::xml_escaped(p.test_name) << ": " << p.cases << " cases, " << p.passed << " passed, "
      << p.not_supported << " not supported, " << p.failed << " failed, " << p.quality_warnings
      << " quality warnings, " << p.not_applicable << " not applicable, " << p.skipped << " skipped, " << p.discarded
      << " discarded, worst error/bound " << p.worst_ratio
      << "</system-out>\n";
    x << "    </testcase>\n";
  }
  x << "  </testsuite>\n</testsuites>\n";
  return x.str();
}

spec::Status write_summary(const std::string& dir, const Summary& summary) {
  const std::filesystem::path d(dir);
  // Both or neither, each through a temporary file unique to this process: a failed write (a full
  // disk) leaves the previous checkpoint's pair as it was.
  return conformance::write_files_atomically({{(d / "summary.json").string(), summary.to_json().dump(2) + "\n"},
                                              {(d / "junit.xml").string(), summary.junit_xml()}});
}

}  // namespace pacts::fuzz
