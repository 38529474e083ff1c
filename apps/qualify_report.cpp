#include "qualify_report.h"

#include <pacts/spec/version.h>

#include <pacts/conformance/junit.h>
#include <pacts/conformance/out_dir.h>

#include <pacts/spec/formats.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace pacts::conformance::report {
namespace {

using nlohmann::json;

std::string mode_name(pacts_scale_mode m) {
  static const char* const kNames[] = {"none", "per_tensor", "per_token", "mx_block"};
  return m >= 0 && m <= 3 ? kNames[m] : "invalid";
}

std::vector<std::string> format_names(const std::vector<pacts_format>& formats) {
  std::vector<std::string> names;
  for (pacts_format f : formats) names.emplace_back(spec::format_name(f));
  return names;
}

std::string joined(const std::vector<std::string>& items, const char* separator = ", ") {
  std::string s;
  for (const std::string& x : items) s += (s.empty() ? "" : separator) + x;
  return s;
}

std::string ratio_text(double r) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3g", r);
  return buffer;
}

json counts_json(const Counts& c) {
  return {{"pass", c.pass}, {"fail", c.fail}, {"not_supported", c.not_supported},
          {"quality_warning", c.quality_warning}, {"not_applicable", c.not_applicable}};
}

json capabilities_json(const Capabilities& c) {
  std::vector<std::string> modes;
  for (pacts_scale_mode m : c.scale_modes) modes.push_back(mode_name(m));
  return {{"q_formats", format_names(c.q_formats)},
          {"kv_formats", format_names(c.kv_formats)},
          {"out_formats", format_names(c.out_formats)},
          {"scale_modes", modes},
          {"head_dims", c.head_dims},
          {"page_sizes", {c.min_page_size, c.max_page_size}},
          {"max_q_len", c.max_q_len},
          {"max_group", c.max_group},
          {"chunked_layouts", c.chunked_layouts},
          {"sinks", c.sinks},
          {"window", c.window},
          {"softcap", c.softcap},
          {"lse", c.lse},
          {"deterministic", c.deterministic},
          {"split_plans", c.split_plans},
          {"batch_invariant", c.batch_invariant},
          {"plan_replay", c.plan_replay},
          {"large_buffers", c.large_buffers},
          {"vector_alignment_bytes", c.requirements.vector_alignment_bytes},
          {"max_element_offset", c.requirements.max_element_offset}};
}

// The KV formats a query requantisation rule applies to (spec/tolerance.md §2.1).
// The formats whose bits (spec::format_bit) a mask holds.
std::vector<pacts_format> formats_in(uint32_t mask) {
  std::vector<pacts_format> formats;
  for (int f = 0; f < 32; ++f)
    if ((mask & spec::format_bit(static_cast<pacts_format>(f))) != 0)
      formats.push_back(static_cast<pacts_format>(f));
  return formats;
}

std::vector<pacts_format> requant_formats(const spec::QueryRequantRule& rule) {
  return rule.kind == spec::QueryRequant::kNone ? std::vector<pacts_format>{}
                                                : formats_in(rule.kv_formats);
}

json profile_json(const spec::NumericsProfile& p) {
  return {{"name", p.name},         {"u_logit", p.u_logit},     {"u_q", p.u_q},
          {"u_p", p.u_p},           {"eta_p", p.eta_p},
          {"eta_p_formats", {{"eta_p", p.eta_p_formats.eta_p},
                             {"kv_formats", format_names(formats_in(p.eta_p_formats.kv_formats))}}},
          {"p_rounded_in_denominator", p.p_rounded_in_denominator},
          {"u_acc", p.u_acc},       {"u_partial", p.u_partial}, {"eps_exp", p.eps_exp},
          {"eps_tanh", p.eps_tanh}, {"eps_log", p.eps_log},     {"ftz", p.ftz},
          {"q_requant", {{"rule", std::string(spec::requant_name(p.q_requant.kind))},
                         {"kv_formats", format_names(requant_formats(p.q_requant))}}}};
}


// Table cells: one line, no pipe.
std::string cell(std::string s) {
  for (char& ch : s)
    if (ch == '|' || ch == '\n') ch = ' ';
  return s;
}

std::string count_cell(const Counts& c) {
  return std::to_string(c.pass) + " / " + std::to_string(c.fail) + " / " +
         std::to_string(c.not_supported) + " / " + std::to_string(c.quality_warning) + " / " +
         std::to_string(c.not_applicable);
}

bool row_failed(const PropertyRow& r) { return is_failure(r.verdict); }

// What a NotSupported row says about why: the backend's reason, or that it gave none.
std::string not_supported_text(const PropertyRow& r) {
  return r.not_supported_reason.empty() ? std::string("the backend gave no reason") : r.not_supported_reason;
}

// What a NotApplicable row says: why its first such case could not exercise the property.
std::string not_applicable_text(const PropertyRow& r) {
  return r.not_applicable_reason.empty() ? std::string("no reason recorded") : r.not_applicable_reason;
}

// "### NotSupported, and why" (or NotApplicable): the rows of one backend with that verdict and
// their reason, nothing when there are none.
void list_rows_and_why(std::ostringstream& md, const BackendSection& b, Verdict v,
                       std::string (*why)(const PropertyRow&)) {
  bool any = false;
  for (const PropertyRow& row : b.rows) {
    if (row.verdict != v) continue;
    if (!any) md << "### " << verdict_name(v) << ", and why\n\n";
    any = true;
    md << "- **" << row.id << "** " << (row.mandatory ? "Mandatory" : "QualityWarning") << ", "
       << verdict_name(v) << ": " << cell(why(row)) << "\n";
  }
  if (any) md << "\n";
}

// A row the JUnit XML counts as skipped: neither passed nor failed.
bool row_skipped(const PropertyRow& r) {
  return r.verdict == Verdict::kNotSupported || r.verdict == Verdict::kNotApplicable;
}

}  // namespace


std::string declared_name(const BackendSection& b) {
  return b.plugin_name.empty() ? b.name : b.plugin_name;
}

Verdict combine(const Counts& mustpass, const Counts& generated) {
  if (mustpass.fail + generated.fail > 0) return Verdict::kFail;
  if (mustpass.quality_warning + generated.quality_warning > 0) return Verdict::kQualityWarning;
  if (mustpass.pass + generated.pass > 0) return Verdict::kPass;
  // No case passed: the backend refused some (NotSupported), or none could exercise the property
  // (NotApplicable); a property that ran no case at all is NotSupported (spec/properties.md §1).
  if (mustpass.not_supported + generated.not_supported == 0 &&
      mustpass.not_applicable + generated.not_applicable > 0)
    return Verdict::kNotApplicable;
  return Verdict::kNotSupported;
}

std::vector<std::string> not_a_qualification_run(const RunScope& s) {
  std::vector<std::string> why;
  if (!s.every_property) why.push_back("not every property ran (--property)");
  if (!s.default_mustpass) why.push_back("not the committed mustpass set (--mustpass)");
  if (s.cases < kQualificationCases)
    why.push_back(std::to_string(s.cases) + " generated cases per property, fewer than " +
                  std::to_string(kQualificationCases));
  if (s.suite_version.find("-dirty") != std::string::npos)
    why.push_back("built from a source tree with uncommitted changes (" + s.suite_version + ")");
  if (s.build_type == "Debug") why.push_back("a Debug build");
  return why;
}

bool qualified(const Report& r) {
  return r.interrupted.empty() && r.not_qualification.empty() && !mandatory_failure(r);
}

bool mandatory_failure(const Report& report) {
  for (const CheckResult& c : report.self_checks)
    if (c.verdict == Verdict::kFail) return true;
  for (const BackendSection& b : report.backends)
    if (std::any_of(b.rows.begin(), b.rows.end(), row_failed)) return true;
  return false;
}

json to_json(const Report& r) {
  json j;
  j["tool"] = "pacts-qualify";
  j["report_version"] = 1;
  j["suite_version"] = r.suite_version;
  j["spec_version"] = spec::kSpecVersion;
  j["compiler"] = r.compiler;
  j["build_type"] = r.build_type;
  j["started_utc"] = r.started_utc;
  j["hostname"] = r.hostname;
  j["seed"] = std::to_string(r.seed);  // decimal string: exact beyond 2^53 (spec/case_files.md §2.2)
  j["cases_per_property"] = r.cases_per_property;
  j["mustpass"] = {{"version", r.mustpass_version}, {"dir", r.mustpass_dir},
                   {"files", r.mustpass_files}};
  j["compile_checked_only"] = r.compile_only;
  j["notes"] = r.notes;
  j["complete"] = r.interrupted.empty();
  j["interrupted"] = r.interrupted.empty() ? json(nullptr) : json(r.interrupted);
  j["qualified"] = qualified(r);
  j["mandatory_failure"] = mandatory_failure(r);
  j["qualification_run"] = r.not_qualification.empty();
  j["not_a_qualification_run"] = r.not_qualification;
  j["command_line"] = r.command_line;
  j["provenance"] = {{"files", json::array()},
                     {"mustpass_sha256", r.mustpass_sha256},
                     {"machine", {{"os", r.machine.os}, {"cpu", r.machine.cpu},
                                  {"cpus", r.machine.cpus}, {"memory_bytes", r.machine.memory_bytes}}}};
  for (const FileHash& f : r.files)
    j["provenance"]["files"].push_back({{"path", f.path}, {"sha256", f.sha256}});
  j["self_checks"] = json::array();
  for (const CheckResult& c : r.self_checks)
    j["self_checks"].push_back({{"id", c.id}, {"name", c.name}, {"backend", c.backend},
                                {"verdict", verdict_name(c.verdict)}, {"cases", c.cases},
                                {"not_applicable", c.not_applicable}, {"detail", c.detail},
                                {"seconds", c.seconds}});
  j["backends"] = json::array();
  for (const BackendSection& b : r.backends) {
    json jb = {{"name", b.name},       {"device", b.device},
               {"driver", b.driver},   {"runtime", b.runtime},
               {"capabilities", capabilities_json(b.capabilities)},
               {"numerics_profile", profile_json(b.profile)},
               {"bench", b.bench},     {"bench_sets", json::array()},
               {"results", json::array()}};
    for (const std::string& text : b.bench_json)
      jb["bench_sets"].push_back(json::parse(text, nullptr, /*allow_exceptions=*/false));
    if (!b.device_uuid.empty()) jb["device_uuid"] = b.device_uuid;
    if (!b.plugin_path.empty())
      jb["plugin"] = {{"path", b.plugin_path}, {"name", b.plugin_name},
                      {"version", b.plugin_version}, {"ran", b.plugin_isolation}};
    for (const PropertyRow& row : b.rows)
      jb["results"].push_back({{"id", row.id},
                               {"name", row.name},
                               {"level", row.mandatory ? "Mandatory" : "QualityWarning"},
                               {"verdict", verdict_name(row.verdict)},
                               {"mustpass", counts_json(row.mustpass)},
                               {"generated", counts_json(row.generated)},
                               {"worst_error_bound_ratio", row.worst_ratio},
                               {"seconds", row.seconds},
                               {"failing_case_files", row.failing_case_files},
                               {"detail", row.detail},
                               {"not_supported_reason", row.verdict == Verdict::kNotSupported
                                                            ? json(not_supported_text(row))
                                                            : json(nullptr)},
                               {"not_applicable_reason", row.verdict == Verdict::kNotApplicable
                                                             ? json(not_applicable_text(row))
                                                             : json(nullptr)},
                               {"replay", row.replay}});
    j["backends"].push_back(std::move(jb));
  }
  return j;
}

std::string to_markdown(const Report& r) {
  std::ostringstream md;
  const bool failed = mandatory_failure(r);
  md << "# pacts qualification report\n\n";
  if (!r.interrupted.empty())
    md << "**Result: INTERRUPTED by " << r.interrupted
       << ": not a complete run, not qualified** (the property in progress was abandoned and "
          "those after it did not run" << (failed ? "; a Mandatory property had already failed" : "")
       << ")\n\n";
  else if (failed)
    md << "**Result: NOT QUALIFIED: a Mandatory property failed**\n\n";
  else if (!r.not_qualification.empty())
    md << "**Result: no Mandatory failure, but not a qualification run:** "
       << cell(joined(r.not_qualification, "; ")) << "\n\n";
  else
    md << "**Result: qualified: no Mandatory failure**\n\n";
  md << "| | |\n| --- | --- |\n";
  md << "| suite version | " << cell(r.suite_version) << " |\n";
  md << "| spec version | " << spec::kSpecVersion << " |\n";
  md << "| compiler | " << cell(r.compiler) << " (" << cell(r.build_type) << ") |\n";
  md << "| started (UTC) | " << r.started_utc << " |\n";
  md << "| seed | " << r.seed << " (replay the run with `pacts-qualify --seed " << r.seed << "`) |\n";
  md << "| generated cases | " << r.cases_per_property << " per property |\n";
  md << "| mustpass | v" << r.mustpass_version << ", " << r.mustpass_files << " case files ("
     << cell(r.mustpass_dir) << "), sha256 " << r.mustpass_sha256 << " |\n";
  for (const std::string& target : r.compile_only)
    md << "| " << target << " | compile-checked only: no kernel ran |\n";
  md << "| command | `" << cell(joined(r.command_line, " ")) << "` |\n";
  md << "| machine | " << cell(r.machine.os) << "; " << cell(r.machine.cpu) << ", " << r.machine.cpus
     << " CPUs, " << r.machine.memory_bytes / (1024 * 1024) << " MiB |\n";
  for (const FileHash& f : r.files) md << "| `" << cell(f.path) << "` | sha256 " << f.sha256 << " |\n";
  md << "\n";
  for (const std::string& note : r.notes) md << "- " << note << "\n";
  if (!r.notes.empty()) md << "\n";

  md << "Result states (spec/properties.md §1): Pass, Fail, NotSupported (never a failure), "
        "QualityWarning (never blocks), NotApplicable (the case could not exercise the property; "
        "never a Pass). Counts are cases as pass / fail / NotSupported / QualityWarning / "
        "NotApplicable; a generated run stops at its first failing case and shrinks it.\n\n";

  for (const BackendSection& b : r.backends) {
    md << "## Backend `" << b.name << "`\n\n";
    md << "| | |\n| --- | --- |\n";
    md << "| device | " << cell(b.device) << " |\n";
    if (!b.device_uuid.empty()) md << "| device UUID | " << b.device_uuid << " |\n";
    md << "| driver | " << cell(b.driver) << " |\n";
    md << "| runtime | " << cell(b.runtime) << " |\n";
    if (!b.plugin_path.empty())
      md << "| plugin | " << cell(b.plugin_name) << " version " << cell(b.plugin_version) << ", "
         << cell(b.plugin_path) << "; ran " << cell(b.plugin_isolation) << " |\n";
    const Capabilities& c = b.capabilities;
    std::vector<std::string> modes;
    for (pacts_scale_mode m : c.scale_modes) modes.push_back(mode_name(m));
    std::vector<std::string> dims;
    for (int32_t d : c.head_dims) dims.push_back(std::to_string(d));
    std::vector<std::string> options;
    const std::pair<const char*, bool> flags[] = {
        {"chunked layouts", c.chunked_layouts}, {"sinks", c.sinks}, {"window", c.window},
        {"soft-cap", c.softcap}, {"LSE", c.lse}, {"deterministic", c.deterministic},
        {"split plans", c.split_plans}, {"batch-invariant plan", c.batch_invariant},
        {"plan replay", c.plan_replay},
        {"large buffers", c.large_buffers}};
    for (const auto& [name, on] : flags)
      if (on) options.emplace_back(name);
    md << "| Q formats | " << joined(format_names(c.q_formats)) << " |\n";
    md << "| KV formats | " << joined(format_names(c.kv_formats)) << " |\n";
    md << "| output formats | " << joined(format_names(c.out_formats)) << " |\n";
    md << "| scale modes | " << joined(modes) << " |\n";
    md << "| head dims, page sizes, L, G | " << joined(dims) << "; " << c.min_page_size << " to "
       << c.max_page_size << "; up to " << c.max_q_len << "; up to " << c.max_group << " |\n";
    md << "| options | " << joined(options) << " |\n";
    md << "| requirements | vector alignment " << c.requirements.vector_alignment_bytes
       << " B, max element offset " << c.requirements.max_element_offset << " |\n";
    const spec::NumericsProfile& p = b.profile;
    md << "| numerics profile | " << cell(p.name) << ": u_logit " << ratio_text(p.u_logit)
       << ", u_q " << ratio_text(p.u_q) << ", u_p " << ratio_text(p.u_p) << ", eta_p "
       << ratio_text(p.eta_p)
       << (p.eta_p_formats.kv_formats == 0
               ? std::string()
               : " (" + ratio_text(p.eta_p_formats.eta_p) + " for KV " +
                     joined(format_names(formats_in(p.eta_p_formats.kv_formats))) + ")")
       << ", u_acc " << ratio_text(p.u_acc) << ", u_partial "
       << ratio_text(p.u_partial) << ", eps_exp " << ratio_text(p.eps_exp) << ", eps_tanh "
       << ratio_text(p.eps_tanh) << ", eps_log " << ratio_text(p.eps_log)
       << (p.p_rounded_in_denominator ? ", rounded P in the denominator" : "")
       << (p.ftz ? ", flush to zero" : "")
       << (p.q_requant.kind == spec::QueryRequant::kNone
               ? std::string()
               : ", query requantised (" + std::string(spec::requant_name(p.q_requant.kind)) +
                     ") for KV " + joined(format_names(requant_formats(p.q_requant))))
       << " |\n\n";

    md << "| property | name | level | verdict | mustpass | generated | worst error/bound | failing case files |\n";
    md << "| --- | --- | --- | --- | --- | --- | --- | --- |\n";
    for (const PropertyRow& row : b.rows)
      md << "| " << row.id << " | " << row.name << " | "
         << (row.mandatory ? "Mandatory" : "QualityWarning") << " | "
         << (is_failure(row.verdict) ? "**" + std::string(verdict_name(row.verdict)) + "**"
                                     : std::string(verdict_name(row.verdict)))
         << " | "
         << count_cell(row.mustpass) << " | " << count_cell(row.generated) << " | "
         << ratio_text(row.worst_ratio) << " | " << cell(joined(row.failing_case_files, "; "))
         << " |\n";
    md << "\n";
    bool any = false;
    for (const PropertyRow& row : b.rows) {
      if (!is_failure(row.verdict) && row.verdict != Verdict::kQualityWarning) continue;
      if (!any) md << "### Failures and warnings\n\n";
      any = true;
      md << "- **" << row.id << "** " << verdict_name(row.verdict) << ": " << cell(row.detail) << "\n";
      // Every case file replays anywhere (spec/case_files.md §6), judged by the property it names.
      for (const std::string& f : row.failing_case_files)
        md << "  - case file `" << f << "`: `pacts case run " << f << " --backend " << b.name << "`\n";
    }
    if (any) md << "\n";
    // NotSupported is never a failure, but a Mandatory property the backend refused says why;
    // a NotApplicable row says what its cases lacked.
    list_rows_and_why(md, b, Verdict::kNotSupported, not_supported_text);
    list_rows_and_why(md, b, Verdict::kNotApplicable, not_applicable_text);
    md << "### Bench sets\n\n" << b.bench << "\n\n";
    for (const BackendSection::Plot& plot : b.bench_plots)
      md << "![" << plot.file << "](plots/" << plot.file << ")\n\n";
  }

  md << "## The reference's self-checks\n\n| id | name | verdict | cases | detail |\n"
        "| --- | --- | --- | --- | --- |\n";
  for (const CheckResult& c : r.self_checks)
    md << "| " << c.id << " | " << cell(c.name) << " | " << verdict_name(c.verdict) << " | "
       << c.cases << " | " << cell(c.detail) << " |\n";
  return md.str();
}

std::string to_junit(const Report& r) {
  std::ostringstream x;
  int64_t tests = 0, failures = 0, skipped = 0;
  for (const BackendSection& b : r.backends)
    for (const PropertyRow& row : b.rows) {
      ++tests;
      failures += is_failure(row.verdict);
      skipped += row_skipped(row);
    }
  for (const CheckResult& c : r.self_checks) {
    ++tests;
    failures += c.verdict == Verdict::kFail;
  }
  // An interrupted run is one more failed test, so that no reader of the XML takes it as passed.
  if (!r.interrupted.empty()) {
    ++tests;
    ++failures;
  }
  x << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x << "<testsuites name=\"pacts-qualify\" tests=\"" << tests << "\" failures=\"" << failures
    << "\" skipped=\"" << skipped << "\" time=\"" << r.seconds << "\">\n";
  // Every testsuite: its counts, its time, when the run started (ISO 8601 UTC) and where.
  const auto suite_open = [&](const std::string& name, size_t n, int64_t f, int64_t s, double seconds,
                              const std::vector<std::pair<std::string, std::string>>& extra) {
    x << "  <testsuite name=\"" << xml_escaped(name) << "\" tests=\"" << n << "\" failures=\""
      << f << "\" errors=\"0\" skipped=\"" << s << "\" time=\"" << seconds << "\" timestamp=\""
      << xml_escaped(r.started_utc) << "\" hostname=\"" << xml_escaped(r.hostname) << "\">\n";
    x << "    <properties>\n"
      << "      <property name=\"suite_version\" value=\"" << xml_escaped(r.suite_version) << "\"/>\n"
      << "      <property name=\"seed\" value=\"" << r.seed << "\"/>\n";
    for (const auto& [key, value] : extra)
      x << "      <property name=\"" << xml_escaped(key) << "\" value=\"" << xml_escaped(value) << "\"/>\n";
    x << "    </properties>\n";
  };
  for (const BackendSection& b : r.backends) {
    const int64_t f = std::count_if(b.rows.begin(), b.rows.end(), row_failed);
    const int64_t s = std::count_if(b.rows.begin(), b.rows.end(), row_skipped);
    double seconds = 0;
    for (const PropertyRow& row : b.rows) seconds += row.seconds;
    // The classname is the backend's declared name, never its path: a JUnit reader splits a
    // classname at its dots, and "lib:/opt/k/libk.so" would read as class "so".
    const std::string classname = "pacts.qualify." + junit_class_part(declared_name(b));
    std::vector<std::pair<std::string, std::string>> extra = {{"backend", b.name}, {"device", b.device}};
    if (!b.plugin_path.empty()) extra.emplace_back("plugin_path", b.plugin_path);
    suite_open(classname, b.rows.size(), f, s, seconds, extra);
    for (const PropertyRow& row : b.rows) {
      x << "    <testcase classname=\"" << xml_escaped(classname) << "\" name=\"" << xml_escaped(row.id)
        << "\" time=\"" << row.seconds << "\">\n";
      const std::string files = joined(row.failing_case_files, "; ");
      if (is_failure(row.verdict))
        x << "      <failure message=\"" << xml_escaped(row.detail) << "\" type=\""
          << verdict_name(row.verdict) << "\">"
          << xml_escaped(row.name + "\ncase files: " + files + (row.replay.empty() ? "" : "\nreplay: " + row.replay))
          << "</failure>\n";
      if (row.verdict == Verdict::kNotSupported)
        x << "      <skipped message=\""
          << xml_escaped("NotSupported (" + std::string(row.mandatory ? "Mandatory" : "QualityWarning") +
                         ") on " + declared_name(b) + ": " + not_supported_text(row))
          << "\"/>\n";
      if (row.verdict == Verdict::kNotApplicable)
        x << "      <skipped message=\""
          << xml_escaped("NotApplicable (" + std::string(row.mandatory ? "Mandatory" : "QualityWarning") +
                         ") on " + declared_name(b) + ": " + not_applicable_text(row))
          << "\"/>\n";
      if (row.verdict == Verdict::kQualityWarning)
        x << "      <system-out>" << xml_escaped("QualityWarning: " + row.detail + "\ncase files: " + files)
          << "</system-out>\n";
      x << "    </testcase>\n";
    }
    x << "  </testsuite>\n";
  }
  const int64_t self_failed = std::count_if(r.self_checks.begin(), r.self_checks.end(),
                                            [](const CheckResult& c) { return c.verdict == Verdict::kFail; });
  double self_seconds = 0;
  for (const CheckResult& c : r.self_checks) self_seconds += c.seconds;
  suite_open("pacts.qualify.self-checks", r.self_checks.size(), self_failed, 0, self_seconds, {});
  for (const CheckResult& c : r.self_checks) {
    x << "    <testcase classname=\"pacts.qualify.self-checks\" name=\"" << xml_escaped(c.id)
      << "\" time=\"" << c.seconds << "\">\n";
    if (c.verdict == Verdict::kFail)
      x << "      <failure message=\"" << xml_escaped(c.detail) << "\" type=\"Fail\">"
        << xml_escaped(c.name) << "</failure>\n";
    x << "    </testcase>\n";
  }
  x << "  </testsuite>\n";
  if (!r.interrupted.empty()) {
    suite_open("pacts.qualify.run", 1, 1, 0, 0, {});
    x << "    <testcase classname=\"pacts.qualify.run\" name=\"complete-run\" time=\"0\">\n"
      << "      <failure message=\"interrupted by " << xml_escaped(r.interrupted)
      << ": not a complete run\" type=\"Interrupted\"/>\n    </testcase>\n  </testsuite>\n";
  }
  x << "</testsuites>\n";
  return x.str();
}

spec::Status write_report(const Report& report, const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return spec::invalid_argument("--out " + dir + ": cannot create the directory: " + ec.message());
  // All three or none (a report.md cut short on a full disk read "NOT QUALIFIED" beside a
  // report.json of another run that said qualified).
  const fs::path d(dir);
  // report.sha256 (sha256sum's format): every file's hash, which `pacts verify` checks.
  const std::string md = to_markdown(report), js = to_json(report).dump(2) + "\n", xml = to_junit(report);
  std::vector<std::pair<std::string, std::string>> files = {
      {"report.md", md}, {"report.json", js}, {"report.junit.xml", xml}};
  for (const BackendSection& b : report.backends)
    for (const BackendSection::Plot& p : b.bench_plots) files.push_back({"plots/" + p.file, p.svg});
  std::string manifest;
  for (auto& [name, text] : files) {
    manifest += sha256_hex(text) + "  " + name + "\n";
    name = (d / name).string();
  }
  files.push_back({(d / "report.sha256").string(), manifest});
  if (files.size() > 4) {
    fs::create_directories(d / "plots", ec);
    if (ec) return spec::invalid_argument("--out " + dir + ": cannot create plots/: " + ec.message());
  }
  if (spec::Status s = write_files_atomically(files); !s)
    return spec::invalid_argument("--out " + dir + ": the report was not written: " + s.message());
  return spec::Status::ok();
}

}  // namespace pacts::conformance::report
