// pacts-mutate: runs the conformance catalogue against every mutant of the host kernels
// (kernels/common/mutant.h) and prints which property kills each one (mutation/README.md).
// pacts-mutate-hip is the same program built with PACTS_MUTATE_HIP: it runs the catalogue
// against the hip backend (the GPU mutants, tools/gpu/h200_mutants.sh).
//
// This binary links the host kernels compiled with PACTS_MUTANTS (pacts_kernels_host_mutants),
// never the production ones; pacts-mutate-hip also links the HIP kernels compiled with
// PACTS_MUTANTS (pacts_kernels_hip_mutants), never libpacts_kernels_hip.so. Each mutant runs in a
// child process (`pacts-mutate --mutant NAME`, posix_spawn of this binary), so a mutant that reads
// outside the declared buffers or hangs cannot take the runner down: the parent reports the crash
// or the timeout as such, with the property that was running. Before any mutant, the child "none"
// (no mutant) must pass every Mandatory property under the same budget: a kill is meaningless on
// a catalogue that fails anyway.
#include <pacts/backends/host.h>
#include <pacts/conformance/backend.h>
#include <pacts/conformance/case_file.h>
#include <pacts/conformance/property.h>
#include <pacts/conformance/runner.h>

#include "common/mutant.h"

#include <CLI/CLI.hpp>

#include "cli.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

#if !defined(PACTS_MUTATE_HIP)
#define PACTS_MUTATE_HIP 0
#endif
#if PACTS_MUTATE_HIP
#include <pacts/backends/hip.h>
#endif

namespace pacts::mutation {
namespace {

namespace backends = pacts::backends;
namespace common = pacts::kernels::common;
namespace conformance = pacts::conformance;

// The line a child ends with; the parent parses it (tab-separated).
constexpr const char* kResultTag = "pacts-mutate-result";

struct Options {
  uint64_t seed = 20261129;  // fixed in CI (docs/conventions.md), printed
  int32_t cases = 20;
  int32_t jobs = 2;
  int32_t timeout_s = 240;
  int32_t threads = 1;  // host worker threads per child; results never depend on it
  bool shrink = false;
  std::string case_dir = "mutation-cases";
  std::string table_file;  // also write the table (Markdown) here
  std::vector<std::string> only;
  std::vector<std::string> properties;  // run only these properties (all when empty)
  // The backend whose kernels hold the mutants: "host", or "hip" (pacts-mutate-hip only: the
  // HIP kernels linked into pacts-mutate are the production ones, where no mutant can switch on).
  std::string backend = PACTS_MUTATE_HIP ? "hip" : "host";
};

// The backend under test, built after the mutant is set; nullptr (with the reason on stderr)
// when it cannot be used, e.g. no GPU.
std::unique_ptr<conformance::Backend> make_under_test(const Options& o) {
#if PACTS_MUTATE_HIP
  if (o.backend == "hip") return backends::make_hip_backend();
#endif
  return backends::make_host_backend(o.threads);
}

// --- the child: one mutant against the catalogue ----------------------------------------------

// The property as pacts-mutate runs it: small shapes, as backends/tests/host_conformance_test.cpp
// runs the planted faults, so that every mutant gets the whole catalogue within CI's budget.
conformance::Property bounded(const conformance::Property& p) {
  conformance::Property small = p;
  small.limits.max_reference_work = std::min<int64_t>(small.limits.max_reference_work, 1 << 16);
  small.limits.max_batch = std::min(small.limits.max_batch, 8);
  small.limits.long_context = std::min(small.limits.long_context, 300);
  return small;
}

std::string one_line(std::string s, size_t max = 300) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  std::replace(s.begin(), s.end(), '\t', ' ');
  if (s.size() > max) s = s.substr(0, max) + "...";
  return s;
}

// Runs the catalogue in order against the host backend with mutant `id` active and stops at the
// first Fail (or, for a mutant listed with Q(...), at the first QualityWarning). Prints "trying
// <property>" before each property (what the parent shows when the child dies) and ends with the
// result line, tab-separated: status (killed, warned, survived), property, cases, case file,
// detail.
int run_child(const std::string& name, const Options& o) {
  const int32_t id = common::mutant_id(name.c_str());
  if (id < 0) {
    std::fprintf(stderr, "pacts-mutate: no mutant named '%s' (pacts-mutate --list)\n",
                 name.c_str());
    return 2;
  }
  if (o.timeout_s > 0) alarm(static_cast<unsigned>(o.timeout_s));  // a hang ends as SIGALRM
  common::set_active_mutant(id);
  std::unique_ptr<conformance::Backend> under_test = make_under_test(o);
  if (under_test == nullptr) {
    std::fprintf(stderr, "pacts-mutate: backend %s unavailable\n", o.backend.c_str());
    return 2;
  }
  std::unique_ptr<conformance::Backend> reference = conformance::make_reference_backend();
  conformance::RunOptions run;
  run.seed = o.seed;
  run.cases = o.cases;
  run.shrink = o.shrink;
  run.case_dir = (std::filesystem::path(o.case_dir) / name).string();
  std::filesystem::create_directories(run.case_dir);
  const bool quality_only = id > 0 && common::kMutants[id - 1].quality_only;
  std::string warned;  // the first QualityWarning's result line, if any
  for (const conformance::Property& p : conformance::catalogue()) {
    if (!o.properties.empty() &&
        std::find(o.properties.begin(), o.properties.end(), p.id) == o.properties.end())
      continue;
    std::printf("trying %s\n", p.id.c_str());
    std::fflush(stdout);
    const conformance::PropertyStats s =
        conformance::run_property(bounded(p), *under_test, *reference, run);
    if (conformance::is_failure(s.verdict)) {
      std::printf("%s\tkilled\t%s\t%lld\t%s\t%s\n", kResultTag, p.id.c_str(),
                  static_cast<long long>(s.cases), s.case_file.empty() ? "-" : s.case_file.c_str(),
                  one_line(s.failure).c_str());
      return 0;
    }
    if (s.verdict == conformance::Verdict::kQualityWarning && warned.empty()) {
      warned = std::string(kResultTag) + "\twarned\t" + p.id + "\t" + std::to_string(s.cases) +
               "\t" + (s.case_file.empty() ? "-" : s.case_file) + "\t" + one_line(s.failure);
      if (quality_only) break;
    }
  }
  if (!warned.empty()) {
    std::printf("%s\n", warned.c_str());
    return 0;
  }
  std::printf("%s\tsurvived\t-\t0\t-\tno property fails or warns\n", kResultTag);
  return 0;
}

// Replays a case file (what a killing run saved) against mutant `name`: its property's check on
// its case, with the mutant active. Exit status 1 when the case fails, as `pacts case run` does.
int replay(const std::string& name, const std::string& path, const Options& o) {
  const int32_t id = common::mutant_id(name.c_str());
  if (id < 0) {
    std::fprintf(stderr, "pacts-mutate: no mutant named '%s' (pacts-mutate --list)\n",
                 name.c_str());
    return 2;
  }
  const spec::Result<conformance::CaseFile> file = conformance::read_case_file(path);
  if (!file) {
    std::fprintf(stderr, "pacts-mutate: %s: %s\n", path.c_str(), file.status().to_string().c_str());
    return 2;
  }
  const conformance::Property* property = conformance::find_property(file.value().property);
  if (property == nullptr) {
    std::fprintf(stderr, "pacts-mutate: %s: unknown property %s\n", path.c_str(),
                 file.value().property.c_str());
    return 2;
  }
  common::set_active_mutant(id);
  std::unique_ptr<conformance::Backend> under_test = make_under_test(o);
  if (under_test == nullptr) {
    std::fprintf(stderr, "pacts-mutate: backend %s unavailable\n", o.backend.c_str());
    return 2;
  }
  std::unique_ptr<conformance::Backend> reference = conformance::make_reference_backend();
  const conformance::Outcome out =
      conformance::check_case(*property, *under_test, *reference, file.value().spec);
  std::printf("%s on %s with mutant %s: %s%s%s\n", property->id.c_str(), o.backend.c_str(),
              name.c_str(), conformance::verdict_name(out.verdict), out.detail.empty() ? "" : ": ",
              out.detail.c_str());
  return out.failed() ? 1 : 0;
}

// --- the parent: every mutant in a child process ----------------------------------------------

struct Row {
  std::string mutant;
  std::string status;  // killed, warned, survived, crashed, timeout, error
  std::string property = "-";
  std::string cases = "-";
  std::string case_file = "-";
  std::string detail;
  double seconds = 0;
};

std::string signal_text(int sig) {
  const char* s = strsignal(sig);
  return std::string("signal ") + std::to_string(sig) + " (" + (s ? s : "?") + ")";
}

Row run_one(const std::string& self, const std::string& mutant, const Options& o) {
  Row row;
  row.mutant = mutant;
  const auto t0 = std::chrono::steady_clock::now();
  int fds[2];
  if (pipe(fds) != 0) {
    row.status = "error";
    row.detail = "pipe failed";
    return row;
  }
  const std::vector<std::string> args = {
      self, "--mutant", mutant, "--seed", std::to_string(o.seed), "--cases",
      std::to_string(o.cases), "--case-dir", o.case_dir, "--timeout", std::to_string(o.timeout_s),
      "--threads", std::to_string(o.threads), "--backend", o.backend};
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  if (o.shrink) argv.push_back(const_cast<char*>("--shrink"));
  std::string properties;
  for (const std::string& id : o.properties) properties += (properties.empty() ? "" : ",") + id;
  if (!properties.empty()) {
    argv.push_back(const_cast<char*>("--properties"));
    argv.push_back(properties.data());
  }
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, self.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (spawned != 0) {
    close(fds[0]);
    row.status = "error";
    row.detail = std::string("posix_spawn: ") + std::strerror(spawned);
    return row;
  }
  std::string out;
  char buf[4096];
  for (ssize_t got; (got = read(fds[0], buf, sizeof buf)) != 0;) {
    if (got < 0) {
      if (errno == EINTR) continue;
      break;
    }
    out.append(buf, static_cast<size_t>(got));
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  row.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::string last_trying = "-", result;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("trying ", 0) == 0) last_trying = line.substr(7);
    if (line.rfind(kResultTag, 0) == 0) result = line;
  }
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    row.status = sig == SIGALRM ? "timeout" : "crashed";
    row.property = last_trying;
    row.detail = (sig == SIGALRM ? "no result within " + std::to_string(o.timeout_s) + " s, "
                                 : std::string()) +
                 signal_text(sig) + " while running " + last_trying;
    return row;
  }
  if (result.empty() || WEXITSTATUS(status) != 0) {
    row.status = "error";
    row.detail = "exit status " + std::to_string(WEXITSTATUS(status)) + ": " + one_line(out, 400);
    return row;
  }
  std::vector<std::string> f;
  std::istringstream fields(result);
  for (std::string x; std::getline(fields, x, '\t');) f.push_back(x);
  f.resize(6);
  row.status = f[1];
  row.property = f[2];
  row.cases = f[3];
  row.case_file = f[4];
  row.detail = f[5];
  return row;
}

std::vector<Row> run_all(const std::string& self, const std::vector<std::string>& names,
                         const Options& o) {
  std::vector<Row> rows(names.size());
  std::atomic<size_t> next{0};
  std::mutex print;
  const auto worker = [&] {
    for (size_t k = next++; k < names.size(); k = next++) {
      rows[k] = run_one(self, names[k], o);
      const std::lock_guard<std::mutex> lock(print);
      std::printf("  %-28s %-9s %-16s %5s cases %6.1f s\n", rows[k].mutant.c_str(),
                  rows[k].status.c_str(), rows[k].property.c_str(), rows[k].cases.c_str(),
                  rows[k].seconds);
      std::fflush(stdout);
    }
  };
  std::vector<std::thread> pool;
  for (int32_t j = 1; j < std::max(o.jobs, 1); ++j) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  return rows;
}

const common::MutantInfo& info(const std::string& name) {
  return common::kMutants[common::mutant_id(name.c_str()) - 1];
}

void print_table(const std::vector<Row>& rows, std::FILE* to) {
  std::fprintf(to, "\n| mutant | bug class | spec clause | killed by | cases | case file |\n");
  std::fprintf(to, "| --- | --- | --- | --- | --- | --- |\n");
  for (const Row& r : rows) {
    std::string verdict = r.property;
    if (r.status == "crashed" || r.status == "timeout")
      verdict = r.status + " in " + r.property + " (" + r.detail + ")";
    if (r.status == "warned")
      verdict = info(r.mutant).quality_only
                    ? r.property + " (QualityWarning: the strongest verdict its clause has)"
                    : "SURVIVED (only a QualityWarning of " + r.property + ": " + r.detail + ")";
    if (r.status == "survived") verdict = "SURVIVED (" + r.detail + ")";
    if (r.status == "error") verdict = "ERROR (" + r.detail + ")";
    std::fprintf(to, "| %s | %s | %s | %s | %s | %s |\n", r.mutant.c_str(),
                 spec::bug_class_info(info(r.mutant).bug_class).name, info(r.mutant).clause,
                 verdict.c_str(), r.cases.c_str(), r.case_file.c_str());
  }
}

int run_parent(const std::string& self, const Options& o) {
  std::vector<std::string> names;
  // Without --only: the mutants planted in the kernels of the backend. On the host every mutant
  // but the G(...) ones of kernels/hip/; on hip the G(...) ones (h200_mutants.sh adds with --only
  // the common mutants that the GPU path reaches).
  for (int32_t i = 0; i < common::kMutantCount; ++i) {
    const std::string name = common::kMutants[i].name;
    const bool planted = common::kMutants[i].gpu_only == (o.backend == "hip");
    if (o.only.empty() ? planted : std::find(o.only.begin(), o.only.end(), name) != o.only.end())
      names.push_back(name);
  }
  for (const std::string& n : o.only)
    if (common::mutant_id(n.c_str()) <= 0) {
      std::fprintf(stderr, "pacts-mutate: no mutant named '%s' (pacts-mutate --list)\n", n.c_str());
      return 2;
    }
  std::printf("pacts-mutate: %zu mutants against the %s backend, seed %llu, up to %d cases per "
              "property, %d jobs, case files under %s\n",
              names.size(), o.backend.c_str(), static_cast<unsigned long long>(o.seed), o.cases,
              o.jobs, o.case_dir.c_str());
  const auto t0 = std::chrono::steady_clock::now();

  // The baseline: the same binary, budget and seed with no mutant must fail nothing.
  const Row baseline = run_one(self, "none", o);
  std::printf("  %-28s %-9s %-16s %5s cases %6.1f s\n", "none (baseline)",
              baseline.status.c_str(), baseline.property.c_str(), baseline.cases.c_str(),
              baseline.seconds);
  // A QualityWarning of the production kernels (no Mandatory failure; on the H200, EDGE-4's NaN
  // spread through the MMA at a few hundred cases) does not stop the run, but that property's
  // warnings then tell nothing about a mutant: a mutant that only draws them counts as survived.
  if (baseline.status != "survived" && baseline.status != "warned") {
    std::printf("pacts-mutate: the catalogue does not pass without a mutant (%s %s: %s); no "
                "mutant can be judged\n",
                baseline.status.c_str(), baseline.property.c_str(), baseline.detail.c_str());
    return 1;
  }
  if (baseline.status == "warned")
    std::printf("pacts-mutate: the baseline draws a QualityWarning of %s (%s); warnings of %s do "
                "not count as detections in this run\n",
                baseline.property.c_str(), baseline.detail.c_str(), baseline.property.c_str());

  std::vector<Row> rows = run_all(self, names, o);
  for (Row& r : rows)
    if (baseline.status == "warned" && r.status == "warned" && r.property == baseline.property) {
      r.status = "survived";
      r.detail = "only a QualityWarning of " + r.property + ", which the baseline draws too";
    }
  print_table(rows, stdout);
  if (!o.table_file.empty()) {
    if (std::FILE* f = std::fopen(o.table_file.c_str(), "w")) {
      std::fprintf(f, "pacts-mutate, %s backend, seed %llu, up to %d cases per property\n",
                   o.backend.c_str(), static_cast<unsigned long long>(o.seed), o.cases);
      print_table(rows, f);
      std::fclose(f);
    } else {
      std::fprintf(stderr, "pacts-mutate: cannot write %s\n", o.table_file.c_str());
      return 1;
    }
  }
  int killed = 0, warned = 0, crashed = 0, survived = 0, errors = 0;
  for (const Row& r : rows) {
    const bool quality_only = info(r.mutant).quality_only;
    killed += r.status == "killed";
    warned += r.status == "warned" && quality_only;
    survived += r.status == "warned" && !quality_only;
    crashed += r.status == "crashed" || r.status == "timeout";
    survived += r.status == "survived";
    errors += r.status == "error";
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("\npacts-mutate: %zu mutants: %d killed by a Mandatory property, %d detected by a "
              "QualityWarning (quality-only mutants), %d crashed or hung (killed, reason shown), "
              "%d survived, %d errors; %.1f s (seed %llu)\n",
              rows.size(), killed, warned, crashed, survived, errors, seconds,
              static_cast<unsigned long long>(o.seed));
  return survived == 0 && errors == 0 ? 0 : 1;
}

void list_mutants() {
  std::printf("| id | mutant | bug class | spec clause | the bug |\n| --- | --- | --- | --- | --- |\n");
  for (int32_t i = 0; i < common::kMutantCount; ++i)
    std::printf("| %d | %s | %s | %s | %s |\n", i + 1, common::kMutants[i].name,
                spec::bug_class_info(common::kMutants[i].bug_class).name, common::kMutants[i].clause,
                common::kMutants[i].bug);
}

}  // namespace
}  // namespace pacts::mutation

int main(int argc, char** argv) {
  using namespace pacts::mutation;
  Options o;
  std::string mutant, replay_file;
  bool list = false;
  CLI::App app{PACTS_MUTATE_HIP
                   ? "pacts-mutate-hip: the conformance catalogue against every mutant of the HIP "
                     "kernels (kernels/common/mutant.h); exit status 1 when a mutant survives"
                   : "pacts-mutate: the conformance catalogue against every mutant of the host "
                     "kernels (kernels/common/mutant.h); exit status 1 when a mutant survives"};
  app.add_option("--mutant", mutant,
                 "run one mutant in this process ('none': no mutant) and print its result line");
  app.add_flag("--list", list, "list the mutants with their spec clause and bug class");
  app.add_option("--replay", replay_file,
                 "with --mutant: check the case of this case file against that mutant");
  app.add_option("--only", o.only, "run only these mutants")->delimiter(',');
  app.add_option("--properties", o.properties,
                 "run only these properties, in catalogue order (e.g. PACTS-ACC-1 under "
                 "compute-sanitizer)")
      ->delimiter(',');
  app.add_option("--seed", o.seed, "RapidCheck seed (fixed in CI, printed)");
  app.add_option("--cases", o.cases, "generated cases per property at most")
      ->check(CLI::Range(1, 100000));
  app.add_option("--jobs", o.jobs, "mutants run at once (child processes)")
      ->check(CLI::Range(1, 256));
  app.add_option("--threads", o.threads, "host worker threads per child (0: all)");
  app.add_option("--backend", o.backend,
                 PACTS_MUTATE_HIP ? "the backend whose kernels hold the mutants (default hip)"
                                  : "the backend whose kernels hold the mutants: host (the "
                                    "GPU mutants run with pacts-mutate-hip)")
      ->check(CLI::IsMember(PACTS_MUTATE_HIP ? std::vector<std::string>{"host", "hip"}
                                             : std::vector<std::string>{"host"}));
  app.add_option("--timeout", o.timeout_s, "seconds a child may run before it counts as hung");
  app.add_option("--case-dir", o.case_dir,
                 "where the killing cases are saved, one folder per mutant");
  app.add_option("--table-file", o.table_file, "also write the table (Markdown) to this file");
  app.add_flag("--shrink", o.shrink, "shrink each killing case to a minimal one (slower)");
  pacts::apps::add_version(app);
  PACTS_CLI_PARSE(app, argc, argv);
  if (list) {
    list_mutants();
    return 0;
  }
  if (!replay_file.empty()) return replay(mutant, replay_file, o);
  if (!mutant.empty()) return run_child(mutant, o);
  return run_parent(std::filesystem::canonical("/proc/self/exe").string(), o);
}
