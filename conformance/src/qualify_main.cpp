// pacts-qualify: the main job. Runs the checks available for the backends present on this
// machine and prints a summary. Today the only backend is the float64 reference, so it runs the
// reference's self-checks; the host and GPU backends join with their issues.
#include <pacts/conformance/self_checks.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>

namespace {

nlohmann::json to_json(const std::vector<pacts::conformance::CheckResult>& results, uint64_t seed) {
  nlohmann::json j;
  j["tool"] = "pacts-qualify";
  j["seed"] = seed;
  j["backends"] = {"reference"};
  for (const auto& r : results) {
    j["checks"].push_back({{"id", r.id},
                           {"name", r.name},
                           {"backend", r.backend},
                           {"verdict", pacts::conformance::verdict_name(r.verdict)},
                           {"cases", r.cases},
                           {"not_applicable", r.not_applicable},
                           {"seconds", r.seconds},
                           {"detail", r.detail}});
  }
  return j;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"pacts-qualify: qualify the paged-attention decode backends of this machine "
               "against the pacts spec"};
  pacts::conformance::SelfCheckOptions options;
  std::string json_path;
  app.add_option("--seed", options.seed, "seed of the randomized checks (printed; fixed by default)");
  app.add_option("--cases", options.cases, "random cases per randomized check")
      ->check(CLI::Range(1, 100000));
  app.add_option("--json", json_path, "write the summary as JSON to this file");
  CLI11_PARSE(app, argc, argv);

  std::printf("pacts-qualify: backends on this machine: reference (float64)\n");
  std::printf("  host and GPU backends: not built in this version of pacts\n");
  std::printf("  seed %llu, %d random cases per check\n\n",
              static_cast<unsigned long long>(options.seed), options.cases);

  const auto results = pacts::conformance::run_reference_self_checks(options);
  int failed = 0;
  std::printf("%-28s %-44s %-10s %-15s %8s %6s %8s\n", "spec", "check", "backend", "verdict",
              "cases", "n/a", "seconds");
  for (const auto& r : results) {
    std::printf("%-28s %-44s %-10s %-15s %8lld %6lld %8.2f\n", r.id.c_str(), r.name.c_str(),
                r.backend.c_str(), pacts::conformance::verdict_name(r.verdict),
                static_cast<long long>(r.cases), static_cast<long long>(r.not_applicable), r.seconds);
    if (r.verdict == pacts::conformance::Verdict::kFail) {
      ++failed;
      std::printf("    %s\n", r.detail.c_str());
    }
  }
  std::printf("\n%zu checks: %zu passed, %d failed\n", results.size(), results.size() - failed,
              failed);
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << to_json(results, options.seed).dump(2) << "\n";
    if (!out) {
      std::fprintf(stderr, "pacts-qualify: cannot write %s\n", json_path.c_str());
      return 2;
    }
    std::printf("summary written to %s\n", json_path.c_str());
  }
  return failed == 0 ? 0 : 1;
}
