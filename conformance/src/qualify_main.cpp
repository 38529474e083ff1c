// pacts-qualify: the main job. On every backend present on this machine it runs the reference's
// self-checks and the whole conformance catalogue (spec/properties.md) with a fixed seed and
// case budget, prints the summary table, and writes it as JSON. Exit status: 0 when nothing
// Mandatory failed, 1 otherwise, 2 on a usage error.
#include <pacts/conformance/property.h>
#include <pacts/conformance/runner.h>
#include <pacts/conformance/self_checks.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace {

using namespace pacts::conformance;

struct Row {
  std::string id, name, backend;
  Verdict verdict;
  int64_t cases, passed, not_supported;
  double worst_ratio, seconds;
  std::string detail, case_file, replay;
};

Row from_self_check(const CheckResult& r) {
  return {r.id, r.name, r.backend, r.verdict, r.cases, r.verdict == Verdict::kPass ? r.cases : 0,
          0, 0.0, r.seconds, r.detail, "", ""};
}

Row from_stats(const PropertyStats& s) {
  return {s.id, s.name, s.backend, s.verdict, s.cases, s.passed, s.not_supported, s.worst_ratio,
          s.seconds, s.failure, s.case_file, s.replay};
}

nlohmann::json to_json(const std::vector<Row>& rows, const std::vector<std::string>& backends,
                       uint64_t seed, int32_t cases) {
  nlohmann::json j;
  j["tool"] = "pacts-qualify";
  j["seed"] = seed;
  j["cases_per_property"] = cases;
  j["backends"] = backends;
  j["results"] = nlohmann::json::array();
  for (const Row& r : rows)
    j["results"].push_back({{"id", r.id}, {"name", r.name}, {"backend", r.backend},
                            {"verdict", verdict_name(r.verdict)}, {"cases", r.cases},
                            {"passed", r.passed}, {"not_supported", r.not_supported},
                            {"worst_error_bound_ratio", r.worst_ratio}, {"seconds", r.seconds},
                            {"detail", r.detail}, {"case_file", r.case_file}, {"replay", r.replay}});
  return j;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"pacts-qualify: qualify the paged-attention decode backends of this machine "
               "against the pacts spec"};
  SelfCheckOptions self;
  RunOptions run;
  run.cases = 40;
  run.case_dir = "pacts-qualify-failures";
  std::string json_path;
  std::vector<std::string> backends;
  std::vector<std::string> only;
  app.add_option("--seed", run.seed, "seed of every randomized check (printed; fixed by default)");
  app.add_option("--cases", run.cases, "generated cases per property")->check(CLI::Range(1, 1000000));
  app.add_option("--backend", backends, "backends to qualify (default: every backend present)");
  app.add_option("--property", only, "only these property IDs (default: the whole catalogue)");
  app.add_option("--case-dir", run.case_dir, "where minimal failing cases are written");
  app.add_option("--json", json_path, "write the summary as JSON to this file");
  CLI11_PARSE(app, argc, argv);
  self.seed = run.seed;

  if (backends.empty()) backends = backend_names();
  std::printf("pacts-qualify: backends %s", backends.empty() ? "(none)" : "");
  for (const std::string& b : backends) std::printf("%s ", b.c_str());
  std::printf("\n  seed %llu, %d generated cases per property, failures to %s/\n\n",
              static_cast<unsigned long long>(run.seed), run.cases, run.case_dir.c_str());

  std::vector<Row> rows;
  for (const CheckResult& r : run_reference_self_checks(self)) rows.push_back(from_self_check(r));
  std::unique_ptr<Backend> reference = make_reference_backend();
  for (const std::string& name : backends) {
    std::unique_ptr<Backend> backend = make_backend(name);
    if (!backend) {
      std::fprintf(stderr, "pacts-qualify: unknown backend '%s'\n", name.c_str());
      return 2;
    }
    std::printf("qualifying %s on %s\n", backend->name().c_str(), backend->device().c_str());
    for (const Property& p : catalogue()) {
      if (!only.empty() && std::find(only.begin(), only.end(), p.id) == only.end()) continue;
      rows.push_back(from_stats(run_property(p, *backend, *reference, run)));
      const Row& r = rows.back();
      std::printf("  %-16s %-15s %5lld cases %8.2f s\n", r.id.c_str(), verdict_name(r.verdict),
                  static_cast<long long>(r.cases), r.seconds);
      std::fflush(stdout);
    }
  }

  std::printf("\n%-18s %-32s %-10s %-15s %7s %7s %6s %10s\n", "id", "name", "backend", "verdict",
              "cases", "passed", "n/s", "err/bound");
  int failed = 0, warnings = 0;
  for (const Row& r : rows) {
    std::printf("%-18s %-32s %-10s %-15s %7lld %7lld %6lld %10.3g\n", r.id.c_str(),
                r.name.substr(0, 32).c_str(), r.backend.c_str(), verdict_name(r.verdict),
                static_cast<long long>(r.cases), static_cast<long long>(r.passed),
                static_cast<long long>(r.not_supported), r.worst_ratio);
    if (r.verdict == Verdict::kFail) ++failed;
    if (r.verdict == Verdict::kQualityWarning) ++warnings;
    if (r.verdict == Verdict::kFail || r.verdict == Verdict::kQualityWarning) {
      std::printf("    %s\n", r.detail.c_str());
      if (!r.replay.empty()) std::printf("    replay: %s\n", r.replay.c_str());
    }
  }
  std::printf("\n%zu results: %zu passed or NotSupported, %d QualityWarning, %d failed\n",
              rows.size(), rows.size() - failed - warnings, warnings, failed);
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << to_json(rows, backends, run.seed, run.cases).dump(2) << "\n";
    if (!out) {
      std::fprintf(stderr, "pacts-qualify: cannot write %s\n", json_path.c_str());
      return 2;
    }
    std::printf("summary written to %s\n", json_path.c_str());
  }
  return failed == 0 ? 0 : 1;
}
