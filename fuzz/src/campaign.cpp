#include "campaign.h"

#include <pacts/conformance/case_file.h>
#include <pacts/conformance/out_dir.h>
#include <pacts/conformance/runner.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cmath>
#include <csignal>
#include <cstring>
#include <ctime>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include <unistd.h>

namespace pacts::fuzz {
namespace {

namespace pc = pacts::conformance;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

std::string sanitize(const std::string& s) {
  std::string o;
  for (char c : s)
    o += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-') ? c : '_';
  return o;
}

// A check that throws fails its case, as in the runner (conformance/src/runner.cpp).
pc::Outcome checked(const pc::Property& p, pc::Backend& backend, pc::Backend& reference,
                    const pc::CaseSpec& spec) {
  try {
    return pc::check_case(p, backend, reference, spec);
  } catch (const std::exception& e) {
    return pc::Outcome::fail(std::string("the check threw: ") + e.what());
  }
}

struct WorkerTimes {
  double generate = 0, check = 0, shrink = 0, backend = 0;  // backend: once its worker ended
};

// What workers share; every member is guarded by `m` except the atomics.
struct Shared {
  std::mutex m;
  std::condition_variable wake;     // a worker finished, or stop was requested
  std::vector<PropertyCounts> counts;  // parallel to the selected properties
  Coverage coverage;
  std::vector<FailureRecord> failures;
  std::map<std::string, size_t> by_signature;
  std::vector<WorkerTimes> times;
  // One per shared GPU; declared before the backends, which lock it when they are destroyed.
  std::map<int32_t, std::unique_ptr<std::mutex>> device_locks;
  // Each worker's backend and reference; a worker destroys its own when it ends (a device
  // backend frees its memory on the thread that selected its device).
  std::vector<std::unique_ptr<TimedBackend>> backends;
  std::vector<std::unique_ptr<pc::Backend>> references;
  int32_t running = 0;
  std::string first_failure_stop;  // non-empty when stop_on_failure fired
  std::string error;               // what broke the campaign (a worker threw outside a check)
  std::set<std::string> discard_reasons;  // printed once each
  // Properties with Property::max_cases (cases of gigabytes, PACTS-DEV-2) run one case at a time
  // in the whole process, at most max_cases times per shard.
  std::mutex costly;
  std::vector<std::unique_ptr<std::atomic<int32_t>>> costly_started;  // per property
  std::atomic<int64_t> next_index{0}, done{0}, failed{0};
  std::atomic<bool> stop{false};
};

}  // namespace

std::atomic<int>& stop_signal() {
  static std::atomic<int> s{0};
  return s;
}

spec::Result<std::vector<const pc::Property*>> select_properties(
    const std::vector<std::string>& names) {
  std::vector<const pc::Property*> out;
  const auto& all = pc::catalogue();
  if (names.empty()) {
    for (const pc::Property& p : all) out.push_back(&p);
    return out;
  }
  std::vector<bool> chosen(all.size(), false);
  for (const std::string& n : names) {
    bool any = false;
    for (size_t i = 0; i < all.size(); ++i) {
      const std::string& id = all[i].id;
      const bool family = id.rfind(n + "-", 0) == 0 || id.rfind("PACTS-" + n + "-", 0) == 0;
      if (id == n || id == "PACTS-" + n || family) chosen[i] = any = true;
    }
    if (!any) {
      std::string ids;
      for (const pc::Property& p : all) ids += (ids.empty() ? "" : ", ") + p.id;
      return spec::invalid_argument("--properties '" + n +
                                    "': expected property IDs (PACTS-POISON-1 or POISON-1) or families (ACC, POISON, ...); "
                                    "the catalogue has " + ids);
    }
  }
  for (size_t i = 0; i < all.size(); ++i)
    if (chosen[i]) out.push_back(&all[i]);
  return out;
}

std::string case_file_name(const std::string& property, const std::string& backend,
                           const std::string& signature) {
  return pc::fitted_file_name(sanitize(property) + "-" + sanitize(backend) + "-" + signature, ".json");
}

std::string failure_signature(const std::string& property, const std::string& backend,
                              const pc::CaseSpec& minimal) {
  // The shrunk shape and the decode path it takes; not the layouts, gaps, fills, overrides, the
  // pool's spare pages or the data seed, in which minimal cases of one bug found from different
  // starting cases differ (one planted fault once gave seven "distinct" failures that way).
  const pc::CaseShape& s = minimal.shape;
  std::string key = property + "\n" + backend + "\nB" + std::to_string(s.batch) + " L" +
                    std::to_string(s.q_len) + " Hq" + std::to_string(s.num_q_heads) + " Hkv" +
                    std::to_string(s.num_kv_heads) + " D" + std::to_string(s.head_dim) + " P" +
                    std::to_string(s.page_size) + " q" + std::to_string(s.q_format) + " kv" +
                    std::to_string(s.kv_format) + " out" + std::to_string(s.out_format) + " scales" +
                    std::to_string(s.k_scale_mode) + "," + std::to_string(s.v_scale_mode) + " ctx";
  for (int32_t c : s.contexts) key += " " + std::to_string(c);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(pc::fnv1a64(key)));
  return hex;
}

spec::Status check_options(const CampaignOptions& o) {
  const auto refuse = [&](const char* option, double value, const char* accepted) {
    char text[64];
    std::snprintf(text, sizeof text, "%g", value);
    return spec::invalid_argument(std::string(option) + " " + text + ": " + accepted);
  };
  // NaN compares false with everything: written so that it fails each check.
  if (!(std::isfinite(o.seconds) && o.seconds >= 0))
    return refuse("--seconds", o.seconds, "accepted: a finite number of seconds >= 0 (0: no limit)");
  if (o.cases < 0)
    return refuse("--cases", static_cast<double>(o.cases), "accepted: an integer >= 0 (0: no limit)");
  if (o.case_index && *o.case_index < 0)
    return refuse("--case-index", static_cast<double>(*o.case_index),
                  "accepted: an integer >= 0, the index of a case of the shard");
  if (!(std::isfinite(o.progress_interval_s) && o.progress_interval_s >= 1))
    return refuse("--progress-interval", o.progress_interval_s, "accepted: a finite number of seconds >= 1");
  if (!(std::isfinite(o.checkpoint_interval_s) && o.checkpoint_interval_s >= 0))
    return refuse("--checkpoint-interval", o.checkpoint_interval_s,
                  "accepted: a finite number of seconds >= 0 (0: only at the end)");
  if (o.out_dir.empty()) return spec::invalid_argument("--out '': accepted: the path of a folder");
  return spec::Status::ok();
}

CampaignOutcome run_campaign(const CampaignOptions& o, std::FILE* log) {
  CampaignOutcome result;
  auto selected = select_properties(o.properties);
  if (!selected) {
    result.status = selected.status();
    return result;
  }
  const std::vector<const pc::Property*> props = selected.value();
  if (spec::Status s = check_options(o); !s) {
    result.status = s;
    return result;
  }
  auto plans = plan_workers(o.workers);
  if (!plans) {
    result.status = plans.status();
    return result;
  }
  std::vector<WorkerPlan> workers = plans.value();
  if (o.case_index) workers.resize(1);  // one case: one worker

  // One campaign per folder, claimed once everything above was accepted (a refused command
  // touches nothing): a second campaign on the same --out is refused while this one runs, and an
  // earlier campaign's files are moved aside (never merged or replayed as this one's).
  auto claimed = pc::claim_out_dir(o.out_dir, "--out", {"summary.json", "junit.xml", "failures.jsonl", "failures"});
  if (!claimed) {
    result.status = claimed.status();
    return result;
  }
  if (!claimed.value().previous().empty() && log != nullptr)
    std::fprintf(log, "the previous campaign's files in %s were moved to %s\n", o.out_dir.c_str(),
                 claimed.value().previous().c_str());

  std::error_code ec;
  const std::filesystem::path out(o.out_dir), failures_dir = out / "failures";
  std::filesystem::create_directories(failures_dir, ec);
  if (ec) {
    result.status = spec::invalid_argument("--out '" + o.out_dir + "': cannot create " +
                                           failures_dir.string() + ": " + ec.message());
    return result;
  }

  Shared sh;
  for (const pc::Property* p : props) {
    PropertyCounts c;
    c.id = p->id, c.name = p->name, c.test_name = p->test_name();
    sh.counts.push_back(std::move(c));
  }
  sh.times.resize(workers.size());
  for (size_t i = 0; i < props.size(); ++i)
    sh.costly_started.push_back(std::make_unique<std::atomic<int32_t>>(0));
  CampaignRecord record;
  record.seed = o.seed;
  record.shard = o.shard;
  record.backend = o.workers.backend;
  record.suite_version = o.suite_version;
  record.seconds_budget = o.seconds;
  record.cases_budget = o.case_index ? 1 : o.cases;
  record.started_utc = utc_now();
  record.stop_reason = "running";  // what a checkpoint says
  for (const WorkerPlan& w : workers) {
    std::unique_ptr<pc::Backend> b = make_worker_backend(w);
    if (!b) {
      result.status = spec::invalid_argument("--backend '" + w.backend +
                                             "': cannot be made; accepted: " + accepted_backends());
      return result;
    }
    record.workers.push_back(w.backend + " on " + b->device());
    std::mutex* device_lock = nullptr;
    if (w.device >= 0) {
      auto& m = sh.device_locks[w.device];
      if (!m) m = std::make_unique<std::mutex>();
      device_lock = m.get();
    }
    sh.backends.push_back(std::make_unique<TimedBackend>(std::move(b), device_lock));
    sh.references.push_back(pc::make_reference_backend());
  }
  if (o.workers.backend == "auto")
    record.backend = "auto: " + workers.front().backend.substr(0, workers.front().backend.find(':'));

  // One generator per property; RapidCheck calls are serialised (case_stream.h). Cases follow the
  // backend's capabilities (generators.h), so a GPU campaign spends its time on what it claims;
  // the workers of one campaign run one kind of backend.
  std::vector<rc::Gen<pc::CaseSpec>> gens;
  const pc::Capabilities& caps = sh.backends.front()->capabilities();
  for (const pc::Property* p : props)
    gens.push_back(pc::gen_case(pc::restrict_to_capabilities(p->limits, caps)));

  const Clock::time_point t0 = Clock::now();
  const auto snapshot = [&](bool complete) {
    Summary s;
    CampaignRecord c = record;
    std::lock_guard<std::mutex> lock(sh.m);
    c.elapsed_s = since(t0);
    c.cases = sh.done.load();
    for (const WorkerTimes& t : sh.times) {
      c.generate_s += t.generate;
      c.check_s += t.check;
      c.shrink_s += t.shrink;
    }
    for (size_t w = 0; w < sh.backends.size(); ++w)
      c.backend_s += sh.backends[w] ? sh.backends[w]->seconds() : sh.times[w].backend;
    s.campaigns.push_back(c);
    s.properties = sh.counts;
    s.failures = sh.failures;
    s.coverage = sh.coverage;
    s.complete = complete;
    return s;
  };

  // Saves a distinct minimal failure (or counts one more occurrence of a known one).
  const auto save_failure = [&](const pc::Property& p, pc::Backend& backend, const CaseId& id,
                                const pc::CaseSpec& original, const ShrinkResult& shrunk) {
    const std::string sig = failure_signature(p.id, backend.name(), shrunk.minimal);
    std::lock_guard<std::mutex> lock(sh.m);
    if (auto it = sh.by_signature.find(sig); it != sh.by_signature.end()) {
      ++sh.failures[it->second].occurrences;
      return;
    }
    FailureRecord f;
    f.signature = sig;
    f.property = p.id;
    f.backend = backend.name();
    f.device = backend.device();
    f.verdict = pc::verdict_name(shrunk.outcome.verdict);
    f.detail = shrunk.outcome.detail;
    f.case_file = "failures/" + case_file_name(p.id, backend.name(), sig);
    f.campaign_seed = id.campaign_seed;
    f.shard = id.shard;
    f.index = id.index;
    f.size = draw_of(id).size;
    f.shrink_steps = shrunk.steps;
    f.shrink_tries = shrunk.tries;
    f.shrink_bounded = shrunk.stopped;
    f.original = pc::describe(original);
    f.minimal = pc::describe(shrunk.minimal);
    pc::CaseFile file;
    file.property = p.id;
    file.backend = backend.name();
    file.device = backend.device();
    file.run_seed = id.campaign_seed;  // spec/case_files.md §2.2: the seed of the run
    file.detail = "pacts-fuzz seed " + std::to_string(id.campaign_seed) + " shard " +
                  std::to_string(id.shard.index) + "/" + std::to_string(id.shard.count) +
                  " case " + std::to_string(id.index) + ": " + f.detail;
    file.spec = shrunk.minimal;
    std::string not_saved;  // why the case file could not be written (a full disk, ...)
    if (spec::Status s = pc::write_case_file((out / f.case_file).string(), file); !s) {
      not_saved = s.to_string();
      std::fprintf(log, "pacts-fuzz: cannot save %s: %s\n", f.case_file.c_str(), not_saved.c_str());
    }
    // One line per distinct failure, as found: survives a campaign killed without a summary.
    std::ofstream(out / "failures.jsonl", std::ios::app)
        << nlohmann::json{{"signature", sig}, {"property", p.id}, {"backend", f.backend},
                          {"case_file", f.case_file}, {"saved", not_saved.empty()},
                          {"detail", f.detail}}.dump()
        << "\n";
    std::fprintf(log, "\npacts-fuzz: %s %s on %s (case %lld, shrunk in %d steps): %s\n  minimal: %s\n",
                 p.id.c_str(), f.verdict.c_str(), f.backend.c_str(),
                 static_cast<long long>(id.index), shrunk.steps, f.detail.c_str(), f.minimal.c_str());
    if (not_saved.empty())
      std::fprintf(log, "  saved:   %s\n  replay:  pacts-fuzz replay %s\n", (out / f.case_file).c_str(),
                   (out / f.case_file).c_str());
    else
      std::fprintf(log, "  not saved: %s (no case file to replay)\n", not_saved.c_str());
    sh.by_signature[sig] = sh.failures.size();
    sh.failures.push_back(std::move(f));
  };

  const auto run_cases = [&](size_t w) {
    pc::Backend& backend = *sh.backends[w];
    pc::Backend& reference = *sh.references[w];
    while (!sh.stop.load()) {
      const int64_t i = o.case_index ? *o.case_index : sh.next_index.fetch_add(1);
      if (o.case_index && sh.next_index.fetch_add(1) > 0) break;
      if (!o.case_index && o.cases > 0 && i >= o.cases) break;
      const size_t pi = static_cast<size_t>(i % static_cast<int64_t>(props.size()));
      const pc::Property& p = *props[pi];
      // A costly property's case (Property::max_cases) runs only when no other costly case is
      // running, and at most max_cases times; otherwise it is skipped, neither run nor counted,
      // so that workers never queue behind gigabyte cases.
      std::unique_lock<std::mutex> costly_turn;
      if (p.max_cases > 0 && !o.case_index) {
        costly_turn = std::unique_lock<std::mutex>(sh.costly, std::try_to_lock);
        if (!costly_turn.owns_lock() || sh.costly_started[pi]->fetch_add(1) >= p.max_cases) {
          std::lock_guard<std::mutex> lock(sh.m);
          ++sh.counts[pi].skipped;
          continue;
        }
      }
      const CaseId id{o.seed, o.shard, i};
      Clock::time_point t = Clock::now();
      std::string why;
      const std::optional<Generated> generated = generate(gens[pi], id, &why);
      const double t_gen = since(t);
      if (!generated) {
        std::lock_guard<std::mutex> lock(sh.m);
        ++sh.counts[pi].discarded;
        sh.times[w].generate += t_gen;
        if (sh.discard_reasons.insert(p.id + ": " + why).second)
          std::fprintf(log, "\npacts-fuzz: %s: the generator could not produce case %lld (%s); "
                            "such cases are discarded and counted\n",
                       p.id.c_str(), static_cast<long long>(i), why.c_str());
        continue;
      }
      const Generated& g = *generated;
      t = Clock::now();
      const pc::Outcome outcome = checked(p, backend, reference, g.spec);
      const double t_check = since(t);
      double t_shrink = 0;
      const bool bad = outcome.failed() || outcome.verdict == pc::Verdict::kQualityWarning;
      if (bad) {
        t = Clock::now();
        ShrinkResult shrunk{g.spec, outcome, 0, 0, false};
        if (o.shrink)
          shrunk = fuzz::shrink(
              g, outcome, g.spec.seed,
              [&](const pc::CaseSpec& s) { return checked(p, backend, reference, s); },
              o.shrink_limits, sh.stop);
        save_failure(p, backend, id, g.spec, shrunk);
        t_shrink = since(t);
      }
      {
        std::lock_guard<std::mutex> lock(sh.m);
        PropertyCounts& c = sh.counts[pi];
        ++c.cases;
        switch (outcome.verdict) {
          case pc::Verdict::kPass: ++c.passed; break;
          case pc::Verdict::kFail:
          case pc::Verdict::kCrash:
          case pc::Verdict::kTimeout: ++c.failed; break;
          case pc::Verdict::kNotSupported:
            ++c.not_supported;
            if (c.not_supported_reason.empty()) c.not_supported_reason = outcome.detail;
            break;
          case pc::Verdict::kQualityWarning: ++c.quality_warnings; break;
          case pc::Verdict::kNotApplicable:
            ++c.not_applicable;
            if (c.not_applicable_reason.empty()) c.not_applicable_reason = outcome.detail;
            break;
        }
        c.worst_ratio = std::max(c.worst_ratio, outcome.worst_ratio);
        c.seconds += t_check + t_shrink;
        if (outcome.verdict != pc::Verdict::kNotSupported &&
            outcome.verdict != pc::Verdict::kNotApplicable)
          sh.coverage.add(g.spec.shape);
        sh.times[w].generate += t_gen;
        sh.times[w].check += t_check;
        sh.times[w].shrink += t_shrink;
        if (outcome.failed() && o.stop_on_failure && sh.first_failure_stop.empty()) {
          sh.first_failure_stop = "first failure";
          sh.stop = true;
        }
      }
      if (outcome.failed()) ++sh.failed;
      ++sh.done;
    }
  };

  const auto worker = [&](size_t w) {
    // Checks that throw are failed cases (checked()); what else throws (RapidCheck generating or
    // shrinking, a full disk) is a broken campaign: it stops, and says why.
    try {
      run_cases(w);
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(sh.m);
      if (sh.error.empty()) sh.error = "worker " + std::to_string(w) + ": " + e.what();
      sh.stop = true;
    }
    // This worker's backends are destroyed here, on its thread, outside the shared lock (a GPU
    // backend's destructor waits for its device's lock).
    std::unique_ptr<TimedBackend> mine;
    std::unique_ptr<pc::Backend> my_reference;
    {
      std::lock_guard<std::mutex> lock(sh.m);
      sh.times[w].backend = sh.backends[w]->seconds();
      mine = std::move(sh.backends[w]);
      my_reference = std::move(sh.references[w]);
    }
    mine.reset();
    my_reference.reset();
    {
      std::lock_guard<std::mutex> lock(sh.m);
      --sh.running;
    }
    sh.wake.notify_all();
  };

  std::string budget;
  if (o.seconds > 0) budget = std::to_string(static_cast<int64_t>(o.seconds)) + " s";
  if (o.cases > 0) budget += (budget.empty() ? "" : " or ") + std::to_string(o.cases) + " cases";
  if (o.case_index) budget = "case " + std::to_string(*o.case_index);
  if (budget.empty()) budget = "none (until SIGINT / SIGTERM / SIGHUP)";
  std::string property_args;
  for (const std::string& n : o.properties)
    property_args += (property_args.empty() ? " --properties " : ",") + n;
  std::fprintf(log,
               "pacts-fuzz: seed %llu shard %lld/%lld, %zu properties, %zu workers (%s), "
               "budget %s, out %s\n  repeat: pacts-fuzz run --seed %llu --shard %lld/%lld "
               "--backend %s%s\n",
               static_cast<unsigned long long>(o.seed), static_cast<long long>(o.shard.index),
               static_cast<long long>(o.shard.count), props.size(), workers.size(),
               record.workers.front().c_str(),
               budget.c_str(),
               o.out_dir.c_str(), static_cast<unsigned long long>(o.seed),
               static_cast<long long>(o.shard.index), static_cast<long long>(o.shard.count),
               workers.front().backend.substr(0, workers.front().backend.find(':')).c_str(),
               property_args.c_str());
  std::fflush(log);
  // The first checkpoint: the directory says what runs before the first case ends.
  if (o.checkpoint_interval_s > 0)
    if (spec::Status s = write_summary(o.out_dir, snapshot(false)); !s) {
      result.status = s;
      return result;
    }

  sh.running = static_cast<int32_t>(workers.size());
  std::vector<std::thread> threads;
  for (size_t w = 0; w < workers.size(); ++w) threads.emplace_back(worker, w);

  const bool show = o.progress || isatty(fileno(stderr));
  const bool tty = isatty(fileno(stderr));
  double last_progress = 0, last_checkpoint = 0;
  std::string stop_reason;
  for (;;) {
    std::unique_lock<std::mutex> lock(sh.m);
    sh.wake.wait_for(lock, std::chrono::milliseconds(100));
    const bool all_done = sh.running == 0;
    lock.unlock();
    const double now = since(t0);
    if (const int sig = stop_signal().load(); sig != 0 && stop_reason.empty())
      stop_reason = sig == SIGTERM  ? "SIGTERM"
                    : sig == SIGINT ? "SIGINT"
                    : sig == SIGHUP ? "SIGHUP"
                                    : "signal " + std::to_string(sig);
    if (stop_reason.empty() && o.seconds > 0 && now >= o.seconds) stop_reason = "seconds";
    if (!stop_reason.empty()) sh.stop = true;
    if (show && (now - last_progress >= o.progress_interval_s || all_done)) {
      last_progress = now;
      int64_t cells;
      size_t distinct;
      {
        std::lock_guard<std::mutex> g(sh.m);
        cells = sh.coverage.cells();
        distinct = sh.failures.size();
      }
      const int64_t done = sh.done.load();
      std::fprintf(stderr, "%s[%7.0fs] cases %lld (%.1f/s) failures %lld (%zu distinct) cells %lld%s",
                   tty ? "\r" : "", now, static_cast<long long>(done),
                   now > 0 ? static_cast<double>(done) / now : 0.0,
                   static_cast<long long>(sh.failed.load()), distinct,
                   static_cast<long long>(cells), tty ? "\033[K" : "\n");
      std::fflush(stderr);
    }
    if (all_done) break;
    if (o.checkpoint_interval_s > 0 && now - last_checkpoint >= o.checkpoint_interval_s) {
      last_checkpoint = now;
      (void)write_summary(o.out_dir, snapshot(false));
    }
  }
  for (std::thread& t : threads) t.join();
  if (show && tty) std::fputc('\n', stderr);

  if (stop_reason.empty()) stop_reason = sh.first_failure_stop.empty() ? "cases" : "first failure";
  if (o.case_index) stop_reason = "case-index";
  record.stop_reason = stop_reason;
  record.interrupted = stop_reason.rfind("SIG", 0) == 0 || stop_reason.rfind("signal", 0) == 0;
  if (!sh.error.empty()) record.stop_reason = "error: " + sh.error;
  result.summary = snapshot(true);
  if (spec::Status s = write_summary(o.out_dir, result.summary); !s) result.status = s;
  if (!sh.error.empty()) result.status = spec::Status(spec::Code::kInternal, sh.error);
  return result;
}

}  // namespace pacts::fuzz
