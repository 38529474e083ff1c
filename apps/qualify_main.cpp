// pacts-qualify: the main job. Qualifies every backend of this machine (the host backend, the HIP
// backend in GPU builds when a GPU is present, and every --backend-lib plugin) against the spec:
// the reference's self-checks, then per backend the whole catalogue (spec/properties.md) on the
// mustpass case files (spec/case_files.md §3.5) and on a fixed budget of generated cases with a
// fixed seed. Prints a summary and writes the report (report.md, report.json, report.junit.xml)
// into --out DIR. Exit status: 0 when nothing Mandatory failed, 1 otherwise, 2 on a usage or
// load error (an unknown backend, a plugin the loader refuses, an unreadable mustpass set),
// 128 + the signal when SIGINT, SIGTERM or SIGHUP stopped it: no further property starts, the one
// in progress is abandoned, and the report is written marked as interrupted (never qualified).
#include "qualify_report.h"

#include <pacts/backends/plugin.h>
#include <pacts/backends/process.h>
#include <pacts/backends/register.h>
#include <pacts/conformance/command_line.h>
#include <pacts/conformance/junit.h>
#include <pacts/conformance/mustpass.h>
#include <pacts/conformance/provenance.h>
#include <pacts/conformance/out_dir.h>
#include <pacts/conformance/property.h>
#include <pacts/conformance/registry.h>
#include <pacts/conformance/runner.h>
#include <pacts/conformance/self_checks.h>

#include <pacts/bench/bench.h>

#include <CLI/CLI.hpp>

#include "cli.h"

#include <algorithm>
#include <cctype>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>


#ifndef PACTS_SUITE_VERSION
#error "PACTS_SUITE_VERSION comes from <pacts/suite_version.h> (cmake/suite_version.cmake)"
#endif
#ifndef PACTS_MUSTPASS_DIR
#error "PACTS_MUSTPASS_DIR must name conformance/mustpass/v1"
#endif
#ifndef PACTS_BUILD_TYPE
#define PACTS_BUILD_TYPE "unknown build type"
#endif

namespace {

namespace pb = pacts::backends;
namespace pc = pacts::conformance;
namespace rpt = pacts::conformance::report;

constexpr int kExitQualified = 0, kExitFailed = 1, kExitUsage = 2;

// The signal that asked the run to stop (0: none). Lock-free, so storing it is async-signal-safe.
std::atomic<int> stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void on_stop_signal(int sig) { stop_signal.store(sig); }

// SIGINT (Ctrl-C), SIGTERM (a CI timeout, a batch system) and SIGHUP (a closed terminal) stop the
// run and the report is still written; SA_RESETHAND makes a second signal kill at once.
void install_signal_handlers() {
  struct sigaction sa{};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
}

std::string signal_name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    default: return "signal " + std::to_string(sig);
  }
}

constexpr int kMaxGpus = 64;

// The device targets whose code this build compile-checked and no backend runs (kernels/hip with
// -DPACTS_CHECK_AMD=ON: AMD gfx942 and gfx950 device code, clang-22; recorded at configure time):
// the report names those, and none when the build checked none.
std::vector<std::string> compile_checked_only() {
  std::vector<std::string> out;
  std::string archs = PACTS_AMD_CHECKED_ARCHS;
  for (size_t at = 0; at < archs.size();) {
    const size_t comma = std::min(archs.find(',', at), archs.size());
    if (comma > at) out.push_back("AMD " + archs.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

std::string compiler() {
#if defined(__clang__)
  return std::string("clang ") + __clang_version__ + ", C++ " + std::to_string(__cplusplus);
#elif defined(__GNUC__)
  return std::string("GCC ") + __VERSION__ + ", C++ " + std::to_string(__cplusplus);
#else
  return "unknown compiler, C++ " + std::to_string(__cplusplus);
#endif
}

std::string utc_now(const char* format) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buffer[64];
  std::strftime(buffer, sizeof buffer, format, &tm);
  return buffer;
}

// A backend to qualify, and for a GPU the bench target that names its device ("hip", "hip:1").
struct Settings {
  pc::RunOptions run;
  std::vector<std::string> only;
  const pc::Mustpass* mustpass = nullptr;
  std::vector<std::string> bench_sets = {"peers", "models"};  // timed for GPU backends
  bool bench_unsafe = false;  // also time the unsafe build (the cost of safety, pacts-bench's job)
};

struct Opened {
  std::unique_ptr<pc::Backend> backend;
  std::string gpu_target;  // "" for CPU backends and plugins
};

// GPU backends get the `peers` and `models` bench sets, timed by bench/'s library on
// the same backend object the catalogue just ran on, and only when nothing Mandatory failed
// there (docs/architecture.md: bench/ only times what the checks passed).
void run_bench_sets(pc::Backend& backend, const std::string& gpu_target, const Settings& settings,
                    rpt::BackendSection& section) {
  if (gpu_target.empty()) {
    section.bench = "Not run: the `peers` and `models` bench sets time GPU backends only.";
    return;
  }
  const bool failed = std::any_of(section.rows.begin(), section.rows.end(),
                                  [](const rpt::PropertyRow& r) { return pc::is_failure(r.verdict); });
  if (failed) {
    section.bench = "Not timed: a Mandatory property failed on this backend.";
    return;
  }
  auto target = pacts::bench::parse_target(gpu_target);
  if (!target) {
    section.bench = "Not run: " + target.status().to_string();
    return;
  }
  pacts::bench::Options options;
  options.gate_cases = 0;  // the whole catalogue has just passed on this backend object
  options.unsafe = settings.bench_unsafe;
  options.suite_version = PACTS_SUITE_VERSION;
  const std::string peers = pacts::apps::data_path("bench/h200-best-paged-peer.json", PACTS_PEERS_FILE);
  if (std::filesystem::exists(peers)) options.peers_file = peers;
  if (settings.bench_sets.empty()) section.bench = "Not run: --bench-sets none.";
  for (const std::string& set : settings.bench_sets) {
    auto timed = pacts::bench::run_set(set, target.value(), backend, options);
    if (!timed) {
      section.bench += std::string("- `") + set + "`: not run: " + timed.status().to_string() + "\n";
      continue;
    }
    section.bench += std::string("`") + set + "`:\n\n```\n" + pacts::bench::to_table(timed.value()) + "```\n\n";
    section.bench_json.push_back(pacts::bench::to_json(timed.value()));
    std::string file = section.name + "-" + set + ".svg";
    for (char& c : file)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') c = '_';
    section.bench_plots.push_back({file, pacts::bench::to_svg(timed.value())});
  }
}

// Driver and runtime: plugins say; the host backend has none; the hip backend reports the
// runtime's driver API and runtime versions, and the GPU's UUID.
void describe_environment(const pc::Backend& backend, rpt::BackendSection& section) {
  section.name = backend.name();
  section.device = backend.device();
  section.device_uuid = backend.device_uuid();
  section.capabilities = backend.capabilities();
  section.profile = backend.profile();
  if (const pb::PluginInfo* plugin = pb::plugin_info(backend)) {
    section.driver = plugin->driver.empty() ? "not reported by the plugin" : plugin->driver;
    section.runtime = plugin->runtime.empty() ? "not reported by the plugin" : plugin->runtime;
    section.plugin_path = plugin->path;
    section.plugin_name = plugin->declared;
    section.plugin_version = plugin->version.empty() ? "unstated" : plugin->version;
    section.plugin_isolation = "in pacts-qualify's process (--in-process)";
  } else if (const pb::ProcessInfo* child = pb::process_info(backend)) {
    section.driver = child->driver.empty() ? "not reported by the child" : child->driver;
    section.runtime = child->runtime.empty() ? "not reported by the child" : child->runtime;
    section.plugin_path = child->library;
    section.plugin_name = child->declared;
    section.plugin_version = child->kernel_version.empty() ? "unstated" : child->kernel_version;
    section.plugin_isolation = child->library.empty()
                                   ? "a child process: " + child->command
                                   : "isolated in a child process: " + child->command;
  } else if (backend.name() == "host" || backend.name() == "reference") {
    section.driver = section.runtime = "none (CPU threads, no GPU runtime)";
  } else if (!backend.driver().empty() || !backend.runtime().empty()) {
    section.driver = backend.driver().empty() ? "not reported by the backend" : backend.driver();
    section.runtime = backend.runtime().empty() ? "not reported by the backend" : backend.runtime();
  } else {
    section.driver = section.runtime = "not reported by the backend";
  }
}

void add(rpt::Counts& counts, pc::Verdict v) {
  switch (v) {
    case pc::Verdict::kPass: ++counts.pass; break;
    case pc::Verdict::kFail:
    case pc::Verdict::kCrash:
    case pc::Verdict::kTimeout: ++counts.fail; break;
    case pc::Verdict::kNotSupported: ++counts.not_supported; break;
    case pc::Verdict::kQualityWarning: ++counts.quality_warning; break;
    case pc::Verdict::kNotApplicable: ++counts.not_applicable; break;
  }
}


// One property on one backend: its mustpass cases, then the generated ones; nothing when a
// signal came before it ended (abandoned: what it saw may be the signal's doing, a child killed
// with pacts' process group reads as a crash).
std::optional<rpt::PropertyRow> qualify_property(const pc::Property& p, pc::Backend& backend,
                                                 pc::Backend& reference, const Settings& settings) {
  rpt::PropertyRow row;
  row.id = p.id;
  row.name = p.name;
  row.mandatory = p.level == pc::Level::kMandatory;
  const auto t0 = std::chrono::steady_clock::now();
  // A Crash or Timeout of a process backend (spec/process.md) names the row's failure.
  pc::Verdict lost = pc::Verdict::kFail;
  for (const pc::MustpassEntry& e : settings.mustpass->entries) {
    if (std::find(e.properties.begin(), e.properties.end(), p.id) == e.properties.end()) continue;
    if (stop_signal.load() != 0) return std::nullopt;
    const pc::Outcome o = pc::check_mustpass(e, p, backend, reference);
    add(row.mustpass, o.verdict);
    if (o.verdict == pc::Verdict::kCrash || o.verdict == pc::Verdict::kTimeout) lost = o.verdict;
    if (o.verdict == pc::Verdict::kNotSupported && row.not_supported_reason.empty())
      row.not_supported_reason = "mustpass " + e.path + ": " + o.detail;
    if (o.verdict == pc::Verdict::kNotApplicable && row.not_applicable_reason.empty())
      row.not_applicable_reason = "mustpass " + e.path + ": " + o.detail;
    row.worst_ratio = std::max(row.worst_ratio, o.worst_ratio);
    if (pc::is_failure(o.verdict) || o.verdict == pc::Verdict::kQualityWarning) {
      row.failing_case_files.push_back(e.path);
      if (row.detail.empty()) row.detail = "mustpass " + e.path + ": " + o.detail;
    }
  }
  const pc::PropertyStats s = pc::run_property(p, backend, reference, settings.run);
  if (s.interrupted || stop_signal.load() != 0) return std::nullopt;
  // The runner stops at the first failing (or warning) case and shrinks it: one such case at most.
  const bool bad = pc::is_failure(s.verdict) || s.verdict == pc::Verdict::kQualityWarning;
  row.generated.pass = s.passed;
  row.generated.not_supported = s.not_supported;
  row.generated.not_applicable = s.not_applicable;
  if (row.not_applicable_reason.empty()) row.not_applicable_reason = s.not_applicable_reason;
  // The reason of a NotSupported row (spec/properties.md §1): the backend's own, from the first
  // case it refused; a generated case's reason names no file and reads the same on every run.
  if (!s.not_supported_reason.empty()) row.not_supported_reason = s.not_supported_reason;
  row.generated.fail = pc::is_failure(s.verdict) ? 1 : 0;
  row.generated.quality_warning = s.verdict == pc::Verdict::kQualityWarning ? 1 : 0;
  row.worst_ratio = std::max(row.worst_ratio, s.worst_ratio);
  if (bad) {
    if (!s.case_file.empty()) row.failing_case_files.push_back(s.case_file);
    if (row.detail.empty()) row.detail = s.failure;
    row.replay = s.replay;
  }
  if (s.verdict == pc::Verdict::kCrash || s.verdict == pc::Verdict::kTimeout) lost = s.verdict;
  row.verdict = rpt::combine(row.mustpass, row.generated);
  if (row.verdict == pc::Verdict::kFail) row.verdict = lost;
  row.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return row;
}

rpt::BackendSection qualify_backend(pc::Backend& backend, const std::string& gpu_target,
                                    pc::Backend& reference, const Settings& settings) {
  rpt::BackendSection section;
  describe_environment(backend, section);
  std::printf("qualifying %s on %s\n", backend.name().c_str(), backend.device().c_str());
  std::fflush(stdout);
  for (const pc::Property& p : pc::catalogue()) {
    if (!settings.only.empty() &&
        std::find(settings.only.begin(), settings.only.end(), p.id) == settings.only.end())
      continue;
    if (stop_signal.load() != 0) return section;  // interrupted: no further property, no bench
    std::optional<rpt::PropertyRow> row = qualify_property(p, backend, reference, settings);
    if (!row) {
      std::printf("  %-16s abandoned: interrupted\n", p.id.c_str());
      return section;
    }
    section.rows.push_back(std::move(*row));
    const rpt::PropertyRow& r = section.rows.back();
    std::printf("  %-16s %-15s mustpass %3lld  generated %5lld  %8.2f s\n", r.id.c_str(),
                pc::verdict_name(r.verdict), static_cast<long long>(r.mustpass.total()),
                static_cast<long long>(r.generated.total()), r.seconds);
    std::fflush(stdout);
  }
  run_bench_sets(backend, gpu_target, settings, section);
  return section;
}

void print_summary(const rpt::Report& report) {
  std::printf("\n%-16s %-32s %-24s %-15s %9s %9s %10s\n", "id", "name", "backend", "verdict",
              "mustpass", "generated", "err/bound");
  int failed = 0, warnings = 0, rows = 0;
  for (const rpt::BackendSection& b : report.backends)
    for (const rpt::PropertyRow& r : b.rows) {
      ++rows;
      const std::string backend = b.plugin_name.empty() ? b.name : "lib:" + b.plugin_name;
      std::printf("%-16s %-32s %-24s %-15s %9lld %9lld %10.3g\n", r.id.c_str(),
                  r.name.substr(0, 32).c_str(), backend.substr(0, 24).c_str(),
                  pc::verdict_name(r.verdict), static_cast<long long>(r.mustpass.total()),
                  static_cast<long long>(r.generated.total()), r.worst_ratio);
      if (pc::is_failure(r.verdict)) ++failed;
      if (r.verdict == pc::Verdict::kQualityWarning) ++warnings;
      if (pc::is_failure(r.verdict) || r.verdict == pc::Verdict::kQualityWarning) {
        std::printf("    %s\n", r.detail.c_str());
        for (const std::string& f : r.failing_case_files)
          std::printf("    case file: %s\n      replay: pacts case run %s --backend %s\n", f.c_str(),
                      f.c_str(), b.name.c_str());
      }
    }
  int self_failed = 0;
  for (const pc::CheckResult& c : report.self_checks)
    if (c.verdict == pc::Verdict::kFail) {
      ++self_failed;
      std::printf("self-check %s %s Fail: %s\n", c.id.c_str(), c.name.c_str(), c.detail.c_str());
    }
  for (const std::string& target : report.compile_only)
    std::printf("%s: compile-checked only: no kernel ran\n", target.c_str());
  for (const std::string& note : report.notes) std::printf("note: %s\n", note.c_str());
  std::printf("\n%d results: %d passed or NotSupported, %d QualityWarning, %d failed; "
              "%zu self-checks, %d failed\n",
              rows, rows - failed - warnings, warnings, failed, report.self_checks.size(),
              self_failed);
}

}  // namespace

int main(int argc, char** argv) {
  pb::register_all();
  CLI::App app{"pacts-qualify: qualify the paged-attention decode backends of this machine "
               "against the pacts spec and write the report"};
  Settings settings;
  settings.run.cases = 40;
  std::string out_dir, json_path, mustpass_dir = pacts::apps::data_path("mustpass/v1", PACTS_MUSTPASS_DIR);
  std::vector<std::string> backends, libraries;
  std::string seed_text;
  app.add_option("--seed", seed_text,
                 "seed of every randomized check, 0 to 2^64-1 (printed; fixed by default)");
  app.add_option("--cases", settings.run.cases, "generated cases per property")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--backend", backends,
                 "backends to qualify by name (default: host, and hip in GPU builds; none: only "
                 "the --backend-lib plugins)");
  app.add_option("--backend-lib", libraries,
                 "also qualify the external backend in this shared library (pacts/backend_abi.h)");
  bool in_process = false;
  app.add_flag("--in-process", in_process,
               "load --backend-lib plugins into this process (default: each runs isolated in "
               "pacts-child, spec/process.md)");
  app.add_option("--property", settings.only, "only these property IDs (default: the whole catalogue)");
  app.add_option("--out", out_dir, "report directory (default: qualify-YYYYMMDD-HHMMSS)");
  app.add_option("--case-dir", settings.run.case_dir,
                 "where minimal failing cases are written (default: OUT/failures)");
  app.add_option("--mustpass", mustpass_dir, "the mustpass set (default: the committed v1 set)");
  app.add_option("--json", json_path, "also write report.json to this file");
  std::string bench_sets = "peers,models";
  app.add_option("--bench-sets", bench_sets,
                 "GPU backends: bench sets to time after the catalogue, comma-separated "
                 "(peers, models, grid, formats), or none (default peers,models)");
  app.add_flag("--bench-unsafe", settings.bench_unsafe,
               "also time the unsafe build beside each shape (the cost of safety)");
  pacts::apps::add_version(app);
  PACTS_CLI_PARSE(app, argc, argv);
  if (app.get_option("--seed")->count() > 0) {
    auto seed = pc::parse_seed_option("--seed", seed_text);
    if (!seed) {
      std::fprintf(stderr, "pacts-qualify: %s\n", seed.status().message().c_str());
      return kExitUsage;
    }
    settings.run.seed = seed.value();
  }
  settings.bench_sets.clear();
  if (bench_sets != "none") {
    std::stringstream list(bench_sets);
    for (std::string set; std::getline(list, set, ',');) {
      if (set != "peers" && set != "models" && set != "grid" && set != "formats") {
        std::fprintf(stderr, "pacts-qualify: --bench-sets %s: '%s' is no bench set (peers, models, "
                     "grid, formats, or none)\n", bench_sets.c_str(), set.c_str());
        return kExitUsage;
      }
      settings.bench_sets.push_back(set);
    }
  }

  rpt::Report report;
  report.suite_version = PACTS_SUITE_VERSION;
  report.compiler = compiler();
  report.build_type = PACTS_BUILD_TYPE;
  report.started_utc = utc_now("%Y-%m-%dT%H:%M:%SZ");
  const auto run_t0 = std::chrono::steady_clock::now();
  report.hostname = pc::host_name();
  report.seed = settings.run.seed;
  report.cases_per_property = settings.run.cases;
  if (app.get_option("--out")->count() == 0) out_dir = "qualify-" + utc_now("%Y%m%d-%H%M%S");
  if (settings.run.case_dir.empty())
    settings.run.case_dir = (std::filesystem::path(out_dir) / "failures").string();
  for (const std::string& id : settings.only)
    if (pc::find_property(id) == nullptr) {
      std::fprintf(stderr, "pacts-qualify: --property %s: not in this build's catalogue\n", id.c_str());
      return kExitUsage;
    }

  auto mustpass = pc::load_mustpass(mustpass_dir);
  if (!mustpass) {
    std::fprintf(stderr, "pacts-qualify: %s\n", mustpass.status().message().c_str());
    return kExitUsage;
  }
  settings.mustpass = &mustpass.value();
  report.mustpass_dir = mustpass.value().dir;
  report.mustpass_version = mustpass.value().version;
  report.mustpass_files = static_cast<int64_t>(mustpass.value().entries.size());
  report.compile_only = compile_checked_only();
  report.command_line.assign(argv, argv + argc);
  report.not_qualification = rpt::not_a_qualification_run(
      {settings.only.empty(), app.get_option("--mustpass")->count() == 0, settings.run.cases,
       report.suite_version, report.build_type});
  report.mustpass_sha256 = pc::mustpass_sha256(mustpass.value());
  report.machine = pc::machine_info();

  // The backends: named ones, or every one registered; then the plugins.
  const bool defaulted = backends.empty();
  std::vector<Opened> opened;
  if (defaulted) {
    for (const std::string& name : pc::backend_names()) {
      const pc::BackendFactory* factory = pc::find_backend(name);
      if (name == "reference") continue;
      if (factory->kind != pc::NameKind::kDevices) {
        backends.push_back(name);
        continue;
      }
      // Every device of a device backend: "hip" (GPU 0), "hip:1", ... until one cannot be opened
      // (its reason is printed).
      const size_t before = opened.size();
      for (int ordinal = 0; ordinal < kMaxGpus; ++ordinal) {
        const std::string target = ordinal == 0 ? name : name + ":" + std::to_string(ordinal);
        std::unique_ptr<pc::Backend> gpu = pc::make_backend(target);
        if (!gpu) break;
        opened.push_back({std::move(gpu), target});
      }
      if (opened.size() == before)
        report.notes.push_back("backend " + name +
                               " is in this build but no GPU could be opened: not qualified");
    }
  }
  for (const std::string& name : backends) {
    if (name == "none") continue;  // only the plugins
    std::unique_ptr<pc::Backend> backend = pc::make_backend(name);
    if (backend) {
      // Named GPUs ("hip", "hip:N") are bench targets too.
      opened.push_back({std::move(backend), name.rfind("hip", 0) == 0 ? name : std::string()});
    } else {
      std::fprintf(stderr, "pacts-qualify: unknown backend '%s'\n", name.c_str());
      return kExitUsage;
    }
  }
  // Plugins run isolated in pacts-child (spec/process.md) unless --in-process: a plugin that
  // crashes, hangs or exits then fails the case it was given, and the report is still written.
  const std::string child = in_process ? std::string() : pb::find_child_program();
  if (!in_process && child.empty() && !libraries.empty())
    report.notes.push_back("no pacts-child found: the plugins ran in pacts-qualify's process");
  for (const std::string& path : libraries) {
    auto plugin = child.empty() ? pb::load_plugin_backend(path) : pb::start_isolated_plugin(path, child);
    if (!plugin) {
      std::fprintf(stderr, "pacts-qualify: %s\n", plugin.status().to_string().c_str());
      return kExitUsage;
    }
    opened.push_back({std::move(plugin).value(), std::string()});
  }

  // One run per folder, claimed once every option and backend was accepted (a refused command
  // touches nothing): a second run on the same --out is refused while this one runs, and an
  // earlier run's report and failing cases are moved aside (never read beside this run's).
  auto claimed = pc::claim_out_dir(out_dir, "--out", {"report.md", "report.json", "report.junit.xml", "report.sha256", "plots", "failures"});
  if (!claimed) {
    std::fprintf(stderr, "pacts-qualify: %s\n", claimed.status().message().c_str());
    return kExitUsage;
  }
  if (!claimed.value().previous().empty())
    std::printf("the previous run's report and failing cases in %s were moved to %s\n", out_dir.c_str(),
                claimed.value().previous().c_str());

  std::printf("pacts-qualify %s: backends", report.suite_version.c_str());
  for (const Opened& o : opened) std::printf(" %s", o.backend->name().c_str());
  std::printf("\n  seed %llu, mustpass v%d (%lld case files), %d generated cases per property\n"
              "  report to %s/, failing cases to %s/\n\n",
              static_cast<unsigned long long>(settings.run.seed), report.mustpass_version,
              static_cast<long long>(report.mustpass_files), settings.run.cases, out_dir.c_str(),
              settings.run.case_dir.c_str());

  install_signal_handlers();
  settings.run.stop = &stop_signal;
  pc::SelfCheckOptions self;
  self.seed = settings.run.seed;
  std::printf("reference self-checks\n");
  self.on_start = [](const std::string& id, const std::string& name) {
    std::printf("  %-28s %s ...", id.c_str(), name.c_str());
    std::fflush(stdout);
  };
  self.on_done = [](const pc::CheckResult& c) {
    std::printf(" %s, %lld cases, %.2f s\n", pc::verdict_name(c.verdict), static_cast<long long>(c.cases), c.seconds);
    std::fflush(stdout);
  };
  report.self_checks = pc::run_reference_self_checks(self);
  std::printf("\n");
  std::unique_ptr<pc::Backend> reference = pc::make_reference_backend();
  for (const Opened& o : opened) {
    if (stop_signal.load() != 0) break;
    report.backends.push_back(qualify_backend(*o.backend, o.gpu_target, *reference, settings));
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_t0).count();
  const int stopped_by = stop_signal.load();
  if (stopped_by != 0) report.interrupted = signal_name(stopped_by);

  // What ran: this program and the pacts libraries mapped into it, and each plugin (loaded here,
  // or into pacts-child, whose executable is hashed too).
  report.files = pc::running_files();
  if (!libraries.empty() && !in_process)
    if (const std::string child_program = pb::find_child_program(); !child_program.empty())
      report.files.push_back({child_program, pc::sha256_file(child_program).value_or("unreadable")});
  for (const std::string& lib : libraries)
    if (std::none_of(report.files.begin(), report.files.end(),
                     [&](const pc::FileHash& f) {
                       std::error_code ec;
                       return std::filesystem::equivalent(f.path, lib, ec);
                     }))
      report.files.push_back({std::filesystem::absolute(lib).string(),
                              pc::sha256_file(lib).value_or("unreadable")});
  print_summary(report);
  if (auto s = rpt::write_report(report, out_dir); !s) {
    std::fprintf(stderr, "pacts-qualify: %s\n", s.message().c_str());
    return kExitUsage;
  }
  if (!json_path.empty()) {
    if (auto s = pc::write_files_atomically({{json_path, rpt::to_json(report).dump(2) + "\n"}}); !s) {
      std::fprintf(stderr, "pacts-qualify: --json: %s\n", s.message().c_str());
      return kExitUsage;
    }
  }
  const bool failed = rpt::mandatory_failure(report);
  std::string reasons;
  for (const std::string& r : report.not_qualification) reasons += (reasons.empty() ? "" : "; ") + r;
  const std::string verdict = stopped_by != 0 ? "INTERRUPTED by " + report.interrupted + ": not a complete run"
                              : failed       ? "NOT QUALIFIED: a Mandatory property failed"
                              : !reasons.empty()
                                  ? "no Mandatory failure, but not a qualification run: " + reasons
                                  : "qualified: no Mandatory failure";
  std::printf("report: %s/report.md, report.json, report.junit.xml, report.sha256%s%s\n%s\n", out_dir.c_str(),
              json_path.empty() ? "" : "; JSON also at ", json_path.c_str(), verdict.c_str());
  if (stopped_by != 0) return 128 + stopped_by;
  return failed ? kExitFailed : kExitQualified;
}
