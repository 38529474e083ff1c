// pacts-fuzz: conformance campaigns for GPU nodes (fuzz/README.md).
//   pacts-fuzz [run] [--seconds N] [--cases N] [--out DIR] [--seed S] [--shard K/N] ...
//   pacts-fuzz replay DIR|FILE [--backend NAME]
//   pacts-fuzz merge OUT SUMMARY...   (exit 0 whole, 3 incomplete, 2 nothing merged: commands.h)
// Exit status of run: 0 no failure, 1 a property failed, 2 usage or setup error, 128 + signal
// when SIGINT / SIGTERM / SIGHUP stopped it (the summary is written first).
#include "campaign.h"
#include "commands.h"

#include <pacts/backends/register.h>
#include <pacts/conformance/command_line.h>

#include <CLI/CLI.hpp>

#include "cli.h"

#include <csignal>
#include <cstdio>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace {

namespace pf = pacts::fuzz;

extern "C" void on_stop_signal(int sig) {
  // Lock-free atomic store: async-signal-safe. SA_RESETHAND makes a second signal kill at once.
  pf::stop_signal().store(sig);
}

void install_signal_handlers() {
  struct sigaction sa{};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);  // a closed terminal: the summary is still written
}

uint64_t fresh_seed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

void print_report(const pf::Summary& s, const std::string& out_dir) {
  const pf::CampaignRecord& c = s.campaigns.front();
  std::printf("\n%-16s %9s %9s %9s %7s %7s %7s %7s %7s %12s\n", "property", "cases", "passed",
              "not_supp", "failed", "warn", "not_app", "skipped", "discard", "worst e/b");
  for (const pf::PropertyCounts& p : s.properties)
    std::printf("%-16s %9lld %9lld %9lld %7lld %7lld %7lld %7lld %7lld %12.4g\n", p.id.c_str(),
                static_cast<long long>(p.cases), static_cast<long long>(p.passed),
                static_cast<long long>(p.not_supported), static_cast<long long>(p.failed),
                static_cast<long long>(p.quality_warnings), static_cast<long long>(p.not_applicable),
                static_cast<long long>(p.skipped),
                static_cast<long long>(p.discarded), p.worst_ratio);
  const nlohmann::json cov = s.coverage.to_json();
  std::printf("\ncoverage: %lld cells covered by %lld cases the backend ran\n",
              static_cast<long long>(s.coverage.cells()), static_cast<long long>(s.coverage.cases()));
  for (const auto& [axis, values] : cov["axes"].items()) {
    std::printf("  %-7s", axis.c_str());
    for (const auto& [v, n] : values.items()) std::printf(" %s:%lld", v.c_str(), n.get<long long>());
    std::printf("\n");
  }
  const double worker_s = c.generate_s + c.check_s + c.shrink_s;
  std::printf("\n%lld cases in %.1f s (%.1f cases/s) on %zu workers; stop: %s\n",
              static_cast<long long>(c.cases), c.elapsed_s,
              c.elapsed_s > 0 ? static_cast<double>(c.cases) / c.elapsed_s : 0.0,
              c.workers.size(), c.stop_reason.c_str());
  if (worker_s > 0)
    std::printf("worker time: generate %.1f%%, check %.1f%% (of which in the backend %.1f%%), "
                "shrink %.1f%%\n",
                100 * c.generate_s / worker_s, 100 * c.check_s / worker_s,
                100 * c.backend_s / worker_s, 100 * c.shrink_s / worker_s);
  // GPU workers hold their device's lock inside the backend, so backend time over wall time per
  // device is how busy each GPU was (near 1: GPU-bound; low: bound by the host-side work).
  std::set<std::string> devices;
  for (const std::string& w : c.workers)
    if (w.rfind("hip:", 0) == 0) devices.insert(w.substr(0, w.find(' ')));
  if (!devices.empty() && c.elapsed_s > 0)
    std::printf("backend busy per device: %.1f%% of wall time (%zu devices)\n",
                100 * c.backend_s / (c.elapsed_s * static_cast<double>(devices.size())),
                devices.size());
  std::printf("%lld failed, %zu distinct; seed %llu shard %lld/%lld\n",
              static_cast<long long>(s.failed()), s.failures.size(),
              static_cast<unsigned long long>(c.seed), static_cast<long long>(c.shard.index),
              static_cast<long long>(c.shard.count));
  for (const pf::FailureRecord& f : s.failures)
    std::printf("  %s %s x%lld: %s/%s\n", f.property.c_str(), f.verdict.c_str(),
                static_cast<long long>(f.occurrences), out_dir.c_str(), f.case_file.c_str());
  std::printf("summary: %s/summary.json, %s/junit.xml\n", out_dir.c_str(), out_dir.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  pacts::backends::register_all();
  // `run` is the default subcommand: `pacts-fuzz --seconds 300 --out DIR` is a campaign.
  std::vector<std::string> args(argv + 1, argv + argc);
  const bool help = !args.empty() && (args[0] == "-h" || args[0] == "--help" || args[0] == "--version");
  if (!help && (args.empty() || (args[0] != "run" && args[0] != "replay" && args[0] != "merge")))
    args.insert(args.begin(), "run");
  std::reverse(args.begin(), args.end());  // CLI11 parses a reversed vector

  CLI::App app{"pacts-fuzz: conformance campaigns (fuzz/README.md)", "pacts-fuzz"};
  app.require_subcommand(1);

  pf::CampaignOptions o;
  o.suite_version = PACTS_SUITE_VERSION;
  std::string shard = "0/1", properties;
  std::string seed_text;
  bool no_shrink = false;
  int64_t case_index = -1;
  CLI::App* run = app.add_subcommand("run", "a campaign (the default subcommand)");
  run->add_option("--seconds", o.seconds, "time budget in seconds (0: none)");
  run->add_option("--cases", o.cases, "case budget of this shard (0: none)");
  run->add_option("--out", o.out_dir, "output directory (summary.json, junit.xml, failures/)");
  auto* seed_opt = run->add_option("--seed", seed_text, "campaign seed, 0 to 2^64-1 (default: fresh, printed)");
  run->add_option("--shard", shard, "K/N: this shard's part of the campaign (default 0/1)");
  run->add_option("--properties", properties,
                  "comma-separated property IDs or families (ACC, POISON, ...); default all");
  run->add_option("--backend", o.workers.backend,
                  "auto (every GPU, else host), host, reference, hip, hip:N, <name>+<fault>");
  run->add_option("--devices", o.workers.devices, "hip: all, or ordinals such as 0,2");
  run->add_option("--jobs", o.workers.jobs, "host workers (default: hardware threads)");
  run->add_option("--workers-per-device", o.workers.workers_per_device,
                  "hip: workers sharing one GPU (default: hardware threads / GPUs)");
  run->add_flag("--stop-on-failure", o.stop_on_failure, "stop at the first failing case");
  run->add_flag("--no-shrink", no_shrink, "save failing cases as generated");
  run->add_option("--shrink-steps", o.shrink_limits.max_steps, "accepted shrinks per failure");
  run->add_option("--shrink-tries", o.shrink_limits.max_tries, "shrink candidates per failure");
  auto* case_index_opt =
      run->add_option("--case-index", case_index, "run only case I of the shard (regenerates a case)");
  run->add_flag("--progress", o.progress, "progress lines even when stderr is not a terminal");
  run->add_option("--progress-interval", o.progress_interval_s, "seconds between progress lines (>= 1)");
  run->add_option("--checkpoint-interval", o.checkpoint_interval_s,
                  "seconds between summary checkpoints (0: only at the end)");

  std::string replay_path, replay_backend;
  CLI::App* rep = app.add_subcommand("replay", "re-run saved failures");
  rep->add_option("path", replay_path, "a case file, or a --out directory")->required();
  rep->add_option("--backend", replay_backend, "run on this backend instead of the file's");

  std::string merge_out;
  std::vector<std::string> merge_in;
  CLI::App* mer = app.add_subcommand("merge", "add shard summaries up");
  mer->add_option("out", merge_out, "output directory")->required();
  mer->add_option("summaries", merge_in, "summary.json files or --out directories")->required();

  pacts::apps::add_version(app);
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : pf::kExitUsage;
  }

  if (*rep) return pf::replay(replay_path, replay_backend, stdout);
  if (*mer) return pf::merge(merge_out, merge_in, stdout);

  auto parsed_shard = pf::parse_shard(shard);
  if (!parsed_shard) {
    std::fprintf(stderr, "pacts-fuzz: %s\n", parsed_shard.status().message().c_str());
    return pf::kExitUsage;
  }
  o.shard = parsed_shard.value();
  // A seed above 2^64-1 is refused, not clamped (it would be another campaign than the one
  // asked for); run_campaign checks the other options before it touches --out.
  const auto usage = [](const std::string& message) {
    std::fprintf(stderr, "pacts-fuzz: %s\n", message.c_str());
    return pf::kExitUsage;
  };
  if (seed_opt->count() > 0) {
    auto seed = pacts::conformance::parse_seed_option("--seed", seed_text);
    if (!seed) return usage(seed.status().message());
    o.seed = seed.value();
  } else {
    o.seed = fresh_seed();
  }
  o.shrink = !no_shrink;
  if (case_index_opt->count() > 0) o.case_index = case_index;
  for (size_t at = 0; at < properties.size();) {
    const size_t end = std::min(properties.find(',', at), properties.size());
    if (end > at) o.properties.push_back(properties.substr(at, end - at));
    at = end + 1;
  }
  if (o.shrink_limits.max_steps < 0 || o.shrink_limits.max_tries < 0) {
    std::fprintf(stderr, "pacts-fuzz: --shrink-steps / --shrink-tries: expected integers >= 0\n");
    return pf::kExitUsage;
  }

  install_signal_handlers();
  pf::CampaignOutcome r = pf::run_campaign(o, stdout);
  if (!r.status) {
    std::fprintf(stderr, "pacts-fuzz: %s\n", r.status.message().c_str());
    return pf::kExitUsage;
  }
  print_report(r.summary, o.out_dir);
  std::fflush(stdout);
  if (const int sig = pf::stop_signal().load(); sig != 0) return 128 + sig;
  return r.summary.failed() > 0 ? pf::kExitFail : pf::kExitPass;
}
