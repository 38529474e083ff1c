// pacts: one program for users. `pacts case ...` replays cases anywhere (spec/case_files.md);
// the other subcommands run the suite's programs, found beside this one (an installed bin/) or in
// their build folders, with the remaining arguments (docs/usage.md):
//   pacts qualify ...      pacts-qualify      pacts conformance ...  pacts-conformance
//   pacts fuzz ...         pacts-fuzz         pacts bench ...        pacts-bench
//   pacts mutate ...       pacts-mutate
//   pacts case run FILE --backend NAME [--dump DIR]   one case file, judged by its property
//   pacts case check FILE [--backend NAME]            one case file, every property
//   pacts case run --inputs DIR --backend NAME --out DIR2
//                                                     an exchange directory made by another tool
//   pacts case judge DIR --profile NAME|FILE [--twin DIR2]
//                                                     results another tool wrote into DIR
// Exit status: 0 pass (NotSupported and QualityWarning are not failures, spec/properties.md §1),
// 1 fail, 2 usage or load error.
#include <pacts/backends/register.h>
#include <pacts/conformance/case_file.h>
#include <pacts/conformance/check_util.h>
#include <pacts/conformance/exchange.h>
#include <pacts/conformance/generators.h>
#include <pacts/conformance/property.h>
#include <pacts/conformance/registry.h>
#include <pacts/conformance/runner.h>
#include <pacts/reference/decode.h>

#include <pacts/spec/tolerance.h>

#include <CLI/CLI.hpp>

#include "cli.h"
#include "verify.h"

#include <pacts/conformance/mustpass.h>
#include <pacts/report_schema.h>  // kReportSchema: spec/report.schema.json, embedded at build time

#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace {

namespace pc = pacts::conformance;

constexpr int kExitPass = 0, kExitFail = 1, kExitUsage = 2;
constexpr const char* kDefaultProperty = "PACTS-ACC-1";

std::string backend_list() {
  std::string s;
  for (const std::string& n : pc::backend_names()) s += (s.empty() ? "" : ", ") + n;
  return s;
}

std::unique_ptr<pc::Backend> open_backend(const std::string& name) {
  auto backend = pc::make_backend(name);
  if (!backend)
    std::fprintf(stderr, "pacts: unknown backend '%s'; available: %s\n", name.c_str(),
                 backend_list().c_str());
  return backend;
}

// A check that throws fails its case, as in the runner.
pc::Outcome checked(const pc::Property& property, pc::Backend& backend, pc::Backend& reference,
                    const pc::CaseSpec& spec) {
  try {
    return pc::check_case(property, backend, reference, spec);
  } catch (const std::exception& e) {
    return pc::Outcome::fail(std::string("the check threw: ") + e.what());
  }
}

int exit_code(pc::Verdict v) { return pc::is_failure(v) ? kExitFail : kExitPass; }

void print_verdict(const char* id, const pc::Outcome& o) {
  std::printf("  verdict:  %s %s (worst error/bound ratio %.3g)%s\n", id, pc::verdict_name(o.verdict),
              o.worst_ratio,
              o.verdict == pc::Verdict::kNotSupported || o.verdict == pc::Verdict::kNotApplicable
                  ? ", not a failure"
                  : "");
  if (!o.detail.empty()) std::printf("  detail:   %s\n", o.detail.c_str());
}

struct RunArgs {
  std::string file, inputs, out, dump, backend = "reference";
};

// Writes the exchange format of `c` with `backend`'s results on it and the reference's.
bool dump_with_results(const pc::CaseData& c, const std::string& dir, pc::Backend& backend,
                       const pc::PlanHint& hint, bool write_inputs) {
  pc::ExchangeExtras extras;
  extras.write_inputs = write_inputs;
  pc::Observed observed;
  if (!pc::unsupported(backend, c.problem)) {
    observed = pc::observe(backend, c, hint);
    extras.backend = backend.name();
    extras.device = backend.device();
    extras.device_error = observed.run.device_error;
    if (observed.run.status.is_ok()) {
      extras.plan = observed.run.plan;
      extras.out = &observed.out;
      extras.lse = &observed.lse;
    }
  }
  pc::CaseData copy = c;
  auto ref = pacts::reference::decode(copy.problem, copy.buffers(), backend.profile().q_requant);
  if (ref.is_ok()) {
    extras.reference = &ref.value();
    extras.profile = &backend.profile();
  }
  if (const auto s = pc::dump_case(c, dir, &extras); !s) {
    std::fprintf(stderr, "pacts: cannot write %s: %s\n", dir.c_str(), s.to_string().c_str());
    return false;
  }
  std::printf("  written:  %s (%s%s)\n", dir.c_str(), write_inputs ? "inputs, " : "",
              extras.out ? "the backend's out/lse and the reference's results"
                         : "the reference's results; the backend produced no output");
  return true;
}

int run_case_file(const RunArgs& args) {
  auto file = pc::read_case_file(args.file);
  if (!file) {
    std::fprintf(stderr, "pacts: %s\n", file.status().message().c_str());
    return kExitUsage;
  }
  const pc::CaseFile& f = file.value();
  const std::string id = f.property.empty() ? kDefaultProperty : f.property;
  const pc::Property* property = pc::find_property(id);
  if (!property) {
    std::fprintf(stderr, "pacts: %s: property '%s' is not in this build's catalogue\n",
                 args.file.c_str(), id.c_str());
    return kExitUsage;
  }
  auto backend = open_backend(args.backend);
  if (!backend) return kExitUsage;
  auto reference = pc::make_reference_backend();

  std::printf("pacts case run %s\n", args.file.c_str());
  std::printf("  case:     %s\n", pc::describe(f.spec).c_str());
  std::printf("  property: %s %s%s\n", property->id.c_str(), property->name.c_str(),
              f.property.empty() ? " (the case file names none)" : "");
  if (!f.backend.empty())
    std::printf("  recorded: on %s (%s), run seed %llu\n", f.backend.c_str(), f.device.c_str(),
                static_cast<unsigned long long>(f.run_seed));
  std::printf("  backend:  %s (%s)\n", backend->name().c_str(), backend->device().c_str());
  const pc::Outcome o = checked(*property, *backend, *reference, f.spec);
  print_verdict(property->id.c_str(), o);
  if (!args.dump.empty() && !dump_with_results(f.spec.build(), args.dump, *backend, f.hint, true))
    return kExitUsage;
  return exit_code(o.verdict);
}

// PACTS-ACC-1 on a case that exists only as data (no CaseSpec to hand to the property): the
// same judgement as conformance/properties/acc.cpp, through the same building blocks.
pc::Outcome judge_matches_reference(pc::Backend& backend, const pc::CaseData& c,
                                    const pacts::reference::Output& ref) {
  if (auto o = pc::unsupported(backend, c.problem)) return *o;
  const pc::Observed got = pc::observe(backend, c);
  if (auto o = pc::run_failed(got, kDefaultProperty)) return *o;
  return pc::within_tolerance(backend, c.problem, got, ref);
}

int run_inputs(const RunArgs& args) {
  auto loaded = pc::load_case(args.inputs);
  if (!loaded) {
    std::fprintf(stderr, "pacts: %s\n", loaded.status().to_string().c_str());
    return kExitUsage;
  }
  pc::CaseData& c = loaded.value();
  auto backend = open_backend(args.backend);
  if (!backend) return kExitUsage;
  pc::CaseData copy = c;
  auto ref = pacts::reference::decode(copy.problem, copy.buffers(), backend->profile().q_requant);
  if (!ref) {
    std::fprintf(stderr, "pacts: %s: the reference refuses these inputs: %s\n", args.inputs.c_str(),
                 ref.status().to_string().c_str());
    return kExitUsage;
  }
  std::printf("pacts case run --inputs %s\n", args.inputs.c_str());
  std::printf("  backend:  %s (%s)\n", backend->name().c_str(), backend->device().c_str());
  if (std::filesystem::exists(std::filesystem::path(args.inputs) / "out.npy"))
    std::printf("  note:     %s/out.npy is not what this judges (it runs %s on the inputs); to judge "
                "results another tool wrote: pacts case judge %s --profile NAME|FILE\n",
                args.inputs.c_str(), backend->name().c_str(), args.inputs.c_str());
  pc::Outcome o;
  try {
    o = judge_matches_reference(*backend, c, ref.value());
  } catch (const std::exception& e) {
    o = pc::Outcome::fail(std::string("the check threw: ") + e.what());
  }
  print_verdict(kDefaultProperty, o);
  // Results only: the inputs are the caller's and may be large.
  if (!dump_with_results(c, args.out, *backend, pc::PlanHint::automatic(), false)) return kExitUsage;
  return exit_code(o.verdict);
}

// The profile a judged result is held to: "reference", "fp32", a backend's name (its declared
// profile), or a JSON file (read_profile_file).
std::optional<pacts::spec::NumericsProfile> judge_profile(const std::string& what) {
  if (what == "reference") return pacts::spec::reference_profile();
  if (what == "fp32") return pacts::spec::fp32_profile();
  if (what.ends_with(".json") || std::filesystem::is_regular_file(what)) {
    auto prof = pc::read_profile_file(what);
    if (!prof) {
      std::fprintf(stderr, "pacts: %s\n", prof.status().message().c_str());
      return std::nullopt;
    }
    return prof.value();
  }
  auto backend = pc::make_backend(what);
  if (!backend) {
    std::fprintf(stderr, "pacts: --profile %s: not reference, fp32, a backend (%s) or a JSON "
                 "file\n", what.c_str(), backend_list().c_str());
    return std::nullopt;
  }
  return backend->profile();
}

// Loads an exchange directory and the results written into it.
std::optional<pc::CaseData> load_judged(const std::string& dir) {
  auto loaded = pc::load_case(dir);
  if (!loaded) {
    std::fprintf(stderr, "pacts: %s\n", loaded.status().to_string().c_str());
    return std::nullopt;
  }
  pc::CaseData c = std::move(loaded).value();
  if (auto s = pc::load_results(dir, c); !s) {
    std::fprintf(stderr, "pacts: %s\n", s.to_string().c_str());
    return std::nullopt;
  }
  return c;
}

int judge(const std::string& dir, const std::string& profile_name, const std::string& twin) {
  const auto prof = judge_profile(profile_name);
  if (!prof) return kExitUsage;
  auto c = load_judged(dir);
  if (!c) return kExitUsage;
  pc::CaseData copy = *c;
  auto ref = pacts::reference::decode(copy.problem, copy.buffers(), prof->q_requant);
  if (!ref) {
    std::fprintf(stderr, "pacts: %s: the reference refuses these inputs: %s\n", dir.c_str(),
                 ref.status().to_string().c_str());
    return kExitUsage;
  }
  std::printf("pacts case judge %s\n  profile:  %s\n", dir.c_str(), prof->name.c_str());
  const pc::Observed got = pc::observe_written(*c);
  pc::Outcome o = pc::within_tolerance(*prof, c->problem, got, ref.value());
  print_verdict(kDefaultProperty, o);
  int code = exit_code(o.verdict);
  if (!twin.empty()) {
    auto t = load_judged(twin);
    if (!t) return kExitUsage;
    auto same = pc::same_owned_then_same_bits(*c, *t);
    if (!same) {
      std::fprintf(stderr, "pacts: --twin %s: %s\n", twin.c_str(), same.status().message().c_str());
      return kExitUsage;
    }
    std::printf("  twin:     %s (the same owned data, other unowned bytes)\n", twin.c_str());
    print_verdict("poison relation (PACTS-POISON-*)", same.value());
    if (pc::is_failure(same.value().verdict)) code = kExitFail;
  }
  return code;
}

int check_case_file(const std::string& path, const std::string& backend_name) {
  auto file = pc::read_case_file(path);
  if (!file) {
    std::fprintf(stderr, "pacts: %s\n", file.status().message().c_str());
    return kExitUsage;
  }
  auto backend = open_backend(backend_name);
  if (!backend) return kExitUsage;
  auto reference = pc::make_reference_backend();
  const pc::CaseSpec& spec = file.value().spec;
  std::printf("pacts case check %s\n  case:    %s\n  backend: %s (%s)\n\n", path.c_str(),
              pc::describe(spec).c_str(), backend->name().c_str(), backend->device().c_str());
  std::printf("%-18s %-34s %-15s %12s\n", "ID", "name", "verdict", "worst ratio");
  int counts[pc::kVerdicts] = {};
  for (const pc::Property& property : pc::catalogue()) {
    const pc::Outcome o = checked(property, *backend, *reference, spec);
    ++counts[static_cast<int>(o.verdict)];
    std::printf("%-18s %-34s %-15s %12.3g\n", property.id.c_str(), property.name.c_str(),
                pc::verdict_name(o.verdict), o.worst_ratio);
    if (pc::is_failure(o.verdict) || o.verdict == pc::Verdict::kQualityWarning)
      std::printf("    %s\n", o.detail.c_str());
  }
  const int fails = counts[static_cast<int>(pc::Verdict::kFail)] +
                    counts[static_cast<int>(pc::Verdict::kCrash)] +
                    counts[static_cast<int>(pc::Verdict::kTimeout)];
  std::printf("\n%zu properties: %d passed, %d failed, %d quality warnings, %d not supported, "
              "%d not applicable\n",
              pc::catalogue().size(), counts[static_cast<int>(pc::Verdict::kPass)], fails,
              counts[static_cast<int>(pc::Verdict::kQualityWarning)],
              counts[static_cast<int>(pc::Verdict::kNotSupported)],
              counts[static_cast<int>(pc::Verdict::kNotApplicable)]);
  return fails ? kExitFail : kExitPass;
}

}  // namespace

// The subcommands that are programs of their own: name, program, its build folder (apps/).
struct Program {
  const char* command;
  const char* program;
  const char* folder;
  const char* what;
};
constexpr std::array<Program, 5> kPrograms = {{
    {"qualify", "pacts-qualify", "conformance",
     "qualify backends against the whole catalogue and write the report (README)"},
    {"conformance", "pacts-conformance", "conformance", "the catalogue as gtest tests"},
    {"fuzz", "pacts-fuzz", "fuzz", "fuzz campaigns (fuzz/README.md)"},
    {"bench", "pacts-bench", "bench", "timing behind the conformance gate (docs/bench.md)"},
    {"mutate", "pacts-mutate", "mutation", "the catalogue against the kernels' mutants"},
}};

// Runs `program` in place of this process with argv[2..]: looked for beside this executable
// (an installed bin/), then in its build folder (build/tools/pacts next to build/<folder>/).
// Returns only when it cannot be run (exit 2, naming every place looked at).
int exec_program(const Program& prog, int argc, char** argv) {
  namespace fs = std::filesystem;
  const fs::path dir = pacts::apps::program_dir();
  const fs::path here = dir.empty() ? fs::path(argv[0]).parent_path() : dir;
  const std::vector<fs::path> candidates = {here / prog.program,
                                            here.parent_path() / prog.folder / prog.program};
  for (const fs::path& c : candidates) {
    if (::access(c.c_str(), X_OK) != 0) continue;
    std::vector<char*> args;
    std::string name = c.string();
    args.push_back(name.data());
    for (int i = 2; i < argc; ++i) args.push_back(argv[i]);
    args.push_back(nullptr);
    ::execv(name.c_str(), args.data());
    std::fprintf(stderr, "pacts %s: cannot run %s: %s\n", prog.command, name.c_str(),
                 std::strerror(errno));
    return kExitUsage;
  }
  std::fprintf(stderr, "pacts %s: %s not found; looked for %s and %s (build it, or install pacts)\n",
               prog.command, prog.program, candidates[0].c_str(), candidates[1].c_str());
  return kExitUsage;
}

// pacts verify: apps/verify.h.
int verify(const std::string& dir, const std::string& mustpass_dir, bool official) {
  const auto mustpass = pacts::conformance::load_mustpass(mustpass_dir);
  if (!mustpass) {
    std::fprintf(stderr, "pacts verify: %s\n", mustpass.status().message().c_str());
    return kExitUsage;
  }
  const nlohmann::json schema = nlohmann::json::parse(kReportSchema, nullptr, false);
  if (schema.is_discarded()) {
    std::fprintf(stderr, "pacts verify: the built-in spec/report.schema.json is not JSON\n");
    return kExitUsage;
  }
  const pacts::apps::VerifyResult r =
      pacts::apps::verify_package(dir, mustpass.value(), schema, {official});
  for (const std::string& f : r.facts) std::printf("  %s\n", f.c_str());
  for (const std::string& why : r.rejections) std::printf("REJECTED: %s\n", why.c_str());
  std::printf("%s: %s (%s)\n", dir.c_str(), r.rejections.empty() ? "accepted" : "rejected",
              official ? "official: a qualification run of this suite" : "any run");
  return r.rejections.empty() ? kExitPass : kExitFail;
}

int main(int argc, char** argv) {
  if (argc >= 2)
    for (const Program& prog : kPrograms)
      if (std::strcmp(argv[1], prog.command) == 0) return exec_program(prog, argc, argv);
  pacts::backends::register_all();
  CLI::App app{"pacts: the conformance suite for paged-attention decode kernels (docs/usage.md)"};
  app.require_subcommand(1);
  // Listed for --help; main() runs them before parsing (exec_program).
  for (const Program& prog : kPrograms)
    app.add_subcommand(prog.command, std::string(prog.what) + " (runs " + prog.program + ")")
        ->allow_extras();
  CLI::App* cases = app.add_subcommand("case", "run or check one case");
  cases->require_subcommand(1);

  RunArgs run;
  CLI::App* run_cmd = cases->add_subcommand(
      "run", "run one case on a backend and judge it by its property (default PACTS-ACC-1); "
             "exit 0 pass or not supported, 1 fail, 2 usage or load error");
  auto* file_opt = run_cmd->add_option("file", run.file, "case file (JSON)");
  auto* inputs_opt = run_cmd->add_option("--inputs", run.inputs,
                                         "an exchange directory (problem.json and .npy files) "
                                         "instead of a case file");
  auto* out_opt = run_cmd->add_option("--out", run.out,
                                      "with --inputs: where to write out/lse and the reference's "
                                      "results");
  auto* dump_opt = run_cmd->add_option("--dump", run.dump,
                                       "with a case file: write its exchange format, with the "
                                       "backend's and the reference's results, into this directory");
  run_cmd->add_option("--backend", run.backend,
                      "backend to run (" + backend_list() + ")")
      ->capture_default_str();
  file_opt->excludes(inputs_opt);
  dump_opt->excludes(inputs_opt);
  out_opt->needs(inputs_opt);
  inputs_opt->needs(out_opt);

  std::string check_file, check_backend = "reference";
  CLI::App* check_cmd = cases->add_subcommand(
      "check", "run every property of the catalogue on one case and print a table; exit 1 if "
               "any fails");
  check_cmd->add_option("file", check_file, "case file (JSON)")->required();
  check_cmd->add_option("--backend", check_backend, "backend to run (" + backend_list() + ")")
      ->capture_default_str();

  std::string judge_dir, judge_profile_name, judge_twin;
  CLI::App* judge_cmd = cases->add_subcommand(
      "judge", "judge the results (out.npy, lse.npy) another tool wrote into an exchange "
               "directory against the reference, within the bound of a numerics profile; exit 0 "
               "pass, 1 fail, 2 usage or load error");
  judge_cmd->add_option("dir", judge_dir, "exchange directory (problem.json, inputs, out.npy)")
      ->required();
  judge_cmd->add_option("--profile", judge_profile_name,
                        "the numerics the results are held to: reference, fp32, a backend's "
                        "name (" + backend_list() + ") or a JSON file (spec/tolerance.md §2)")
      ->required();
  judge_cmd->add_option("--twin", judge_twin,
                        "a second directory with the same owned data and other unowned bytes: "
                        "its results must be bitwise the same");

  std::string verify_dir, verify_mustpass = pacts::apps::data_path("mustpass/v1", PACTS_MUSTPASS_DIR);
  bool verify_any_run = false;
  CLI::App* verify_cmd = app.add_subcommand(
      "verify", "check a qualification package (the folder pacts-qualify --out wrote): the files' "
                "hashes, report.json against spec/report.schema.json, the flags against the rows, "
                "and (official, the default) a whole qualification run of this suite; exit 0 "
                "accepted, 1 rejected, 2 usage or load error");
  verify_cmd->add_option("dir", verify_dir, "the package folder")->required();
  verify_cmd->add_option("--mustpass", verify_mustpass, "this suite's mustpass set")
      ->capture_default_str();
  verify_cmd->add_flag("--any-run", verify_any_run,
                       "check integrity and consistency only, not that it was a qualification run");

  pacts::apps::add_version(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kExitPass : kExitUsage;
  }
  if (verify_cmd->parsed()) return verify(verify_dir, verify_mustpass, !verify_any_run);
  if (check_cmd->parsed()) return check_case_file(check_file, check_backend);
  if (judge_cmd->parsed()) return judge(judge_dir, judge_profile_name, judge_twin);
  if (!run.inputs.empty()) return run_inputs(run);
  if (run.file.empty()) {
    std::fprintf(stderr, "pacts case run: give a case file or --inputs DIR --out DIR2\n");
    return kExitUsage;
  }
  return run_case_file(run);
}
