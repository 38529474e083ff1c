// pacts-bench's driver: targets, the conformance gate, and timing a set behind it.
#include "internal.h"

#include <pacts/backends/plugin.h>
#include <pacts/backends/process.h>
#include <pacts/conformance/backend.h>
#include <pacts/conformance/fault_backend.h>
#include <pacts/conformance/property.h>
#include <pacts/conformance/registry.h>
#include <pacts/conformance/runner.h>

#include <algorithm>
#include <cinttypes>
#include <cstdlib>
#include <optional>
#include <utility>

namespace pacts::bench {
namespace {

void say(const Options& o, const char* fmt, auto... args) {
  if (o.progress == nullptr) return;
  std::fprintf(o.progress, fmt, args...);
  std::fflush(o.progress);
}

spec::Status check_options(const Target& target, const Options& o) {
  if (o.gate_cases < 0)
    return spec::invalid_argument("gate_cases " + std::to_string(o.gate_cases) +
                                  ": must be >= 0 (0: the caller gated this backend itself)");
  // A GPU figure is the median of at least 20 replays; the host accepts fewer (CI's quick runs).
  const int32_t min_repeats = target.kind == "hip" ? 20 : 1;
  if (o.repeats < min_repeats || o.repeats > 100000)
    return spec::invalid_argument("repeats " + std::to_string(o.repeats) + ": accepted " +
                                  std::to_string(min_repeats) + " to 100000 for backend " +
                                  target.kind);
  if (o.warmup < 0 || o.warmup > 1000)
    return spec::invalid_argument("warmup " + std::to_string(o.warmup) + ": accepted 0 to 1000");
  if (o.limit < 0)
    return spec::invalid_argument("limit " + std::to_string(o.limit) + ": must be >= 0");
  if (o.partitions < 0)
    return spec::invalid_argument("partitions " + std::to_string(o.partitions) +
                                  ": must be >= 0 (0 = the automatic split)");
  if (o.partitions > 0 && o.batch_invariant)
    return spec::invalid_argument("partitions " + std::to_string(o.partitions) +
                                  " with batch_invariant: the batch-invariant plan takes a "
                                  "partition size, not a count");
  if (o.partition_size < 0 || (o.partition_size > 0 && o.partitions > 0))
    return spec::invalid_argument("partition_size " + std::to_string(o.partition_size) +
                                  ", partitions " + std::to_string(o.partitions) +
                                  ": give at most one, and neither negative");
  for (const std::string& b : o.beside) {
    const bool plugin = b.rfind(backends::kPluginPrefix, 0) == 0 && b.size() > 4 &&
                        b.find('+') == std::string::npos;
    const bool child = b.rfind(backends::kProcessPrefix, 0) == 0 && b.size() > 5;
    if (!plugin && !child)
      return spec::invalid_argument("beside backend '" + b +
                                    "': accepted lib:PATH (a plugin with timed calls, backend "
                                    "ABI version 3), without a planted fault, or exec:CMD (a "
                                    "child that declares timed calls, spec/process.md §6)");
  }
  if (o.datasheet_tbs < 0)
    return spec::invalid_argument("datasheet_tbs " + std::to_string(o.datasheet_tbs) +
                                  ": must be >= 0 (0 = from the device name)");
  return spec::Status::ok();
}

spec::Result<std::unique_ptr<Timer>> make_timer(const Target& target, const Options& options) {
  if (target.kind == "host") return make_host_timer(options);
  return make_hip_timer(target, options);
}

Row make_row(const Shape& shape, const std::string& variant, std::string status) {
  Row r;
  r.shape = shape;
  r.variant = variant;
  r.status = std::move(status);
  return r;
}

std::string describe_status(const spec::Status& s) {
  if (s.code() == spec::Code::kNotSupported) return "not supported: " + s.message();
  return "error: " + s.to_string();
}

}  // namespace

kernels::Plan plan_of(const conformance::PlanUsed& used) {
  kernels::Plan plan;
  plan.variant = used.variant;
  plan.num_partitions = std::max(used.max_partitions, 1);
  plan.partition_size = used.partition_size;
  return plan;
}

ChildTimed::ChildTimed(conformance::Backend& child, HostInputs& in, uint64_t flush_bytes)
    : child_(child) {
  // NaN bytes first: a child that writes nothing fails the output check.
  std::fill(in.out.begin(), in.out.end(), uint8_t{0xFF});
  spec::Result<backends::ChildTimedCall> call =
      backends::child_prepare_timed(child_, in.problem, in.buffers, flush_bytes);
  if (!call) {
    status_ = call.status();
    return;
  }
  prepared_ = true;
  plan_ = plan_of(call.value().plan);
  plan_.variant += " [timed by the child: " + call.value().method + "]";
  status_ = check_timed_output(in.problem, in.out, call.value().device_error);
}

ChildTimed::~ChildTimed() {
  if (prepared_) (void)backends::child_end_timed(child_);
}

spec::Result<double> ChildTimed::sample() {
  if (!status_) return status_;
  spec::Result<std::vector<double>> us = backends::child_time(child_, 1);
  if (!us) return us.status();
  return us.value().front();
}

std::vector<SideBySide> side_by_side(const Report& report) {
  std::vector<SideBySide> out;
  if (report.beside.empty()) return out;
  for (const Row& row : report.rows) {
    if (row.variant != "safe") continue;
    SideBySide s;
    s.label = row.shape.label();
    s.target = row.ok() ? row.time : Stats{};
    for (const BesideBackend& b : report.beside) {
      s.peers.push_back(b.variant);
      Stats t;
      for (const Row& other : report.rows)
        if (other.variant == b.variant && other.ok() && other.shape.set == row.shape.set &&
            other.shape.label() == s.label)
          t = other.time;
      s.peer_times.push_back(t);
      s.ratios.push_back(t.samples > 0 && s.target.samples > 0 ? t.median_us / s.target.median_us
                                                               : 0.0);
    }
    out.push_back(std::move(s));
  }
  return out;
}

spec::Result<Target> parse_target(std::string_view name) {
  const std::string full(name);
  const size_t plus = full.find('+');
  const std::string base = full.substr(0, plus);
  const auto refuse = [&] {
    return spec::invalid_argument("backend '" + full +
                                  "': accepted host, hip, hip:N (GPU ordinal N >= 0), or one of "
                                  "these followed by +<fault> (conformance/fault_backend.h)");
  };
  if (plus != std::string::npos &&
      !conformance::fault_from_name(std::string_view(full).substr(plus + 1)))
    return refuse();
  Target t;
  t.backend = full;
  if (base == "host") {
    t.kind = "host";
    return t;
  }
  if (base == "hip") {
    t.kind = "hip";
    return t;
  }
  if (base.rfind("hip:", 0) == 0 && base.size() > 4 && base.size() <= 8 &&
      base.find_first_not_of("0123456789", 4) == std::string::npos) {
    t.kind = "hip";
    t.ordinal = std::atoi(base.c_str() + 4);
    return t;
  }
  return refuse();
}

Gate run_gate(conformance::Backend& backend, const Options& options) {
  Gate g;
  g.cases_per_property = options.gate_cases;
  g.seed = options.gate_seed;
  if (options.gate_cases == 0) {
    g.passed = true;  // vouched for by the caller (bench.h Options::gate_cases)
    return g;
  }
  g.ran = true;
  std::unique_ptr<conformance::Backend> reference = conformance::make_reference_backend();
  conformance::RunOptions run;
  run.seed = options.gate_seed;
  run.cases = options.gate_cases;
  run.case_dir = options.gate_case_dir;
  say(options, "pacts-bench: gate on %s (%s): %zu properties, %d cases each, seed %" PRIu64 "\n",
      backend.name().c_str(), backend.device().c_str(), conformance::catalogue().size(),
      options.gate_cases, options.gate_seed);
  for (const conformance::Property& p : conformance::catalogue()) {
    const conformance::PropertyStats s = conformance::run_property(p, backend, *reference, run);
    ++g.properties;
    g.seconds += s.seconds;
    say(options, "  gate %-18s %-15s %5lld cases %7.2f s\n", s.id.c_str(),
        conformance::verdict_name(s.verdict), static_cast<long long>(s.cases), s.seconds);
    if (!conformance::is_failure(s.verdict)) continue;
    g.failures.push_back({s.id, s.name, conformance::verdict_name(s.verdict), s.failure,
                          s.case_file, s.replay});
  }
  g.passed = g.failures.empty();
  return g;
}

spec::Result<Report> run_set(std::string_view set, const Target& target,
                             conformance::Backend& backend, const Options& options) {
  if (spec::Status s = check_options(target, options); !s) return s;
  spec::Result<std::vector<Shape>> shapes = shape_set(set);
  if (!shapes) return shapes.status();
  return run_shapes(set, std::move(shapes).value(), target, backend, options);
}

std::vector<Shape> select_shapes(std::vector<Shape> shapes, const Options& options) {
  if (!options.only.empty())
    std::erase_if(shapes, [&](const Shape& s) {
      return s.label().find(options.only) == std::string::npos;
    });
  if (options.limit > 0 && static_cast<size_t>(options.limit) < shapes.size())
    shapes.resize(static_cast<size_t>(options.limit));
  return shapes;
}

spec::Result<Report> run_shapes(std::string_view set, std::vector<Shape> todo,
                                const Target& target, conformance::Backend& backend,
                                const Options& options) {
  if (spec::Status s = check_options(target, options); !s) return s;
  todo = select_shapes(std::move(todo), options);

  Report report;
  report.set = std::string(set);
  report.backend = target.backend;
  report.device = backend.device();
  report.repeats = options.repeats;
  report.warmup = options.warmup;
  report.data_seed = options.data_seed;
  // docs/architecture.md: bench/ asks conformance/ for a verdict before timing anything.
  report.gate = run_gate(backend, options);
  if (!report.gate.passed) return report;
  if (target.backend.find('+') != std::string::npos)
    return spec::not_supported("backend " + target.backend +
                               ": a backend with a planted fault is never timed");

  // The backends beside the target: each a plugin with timed calls, gated by the same options
  // (its minimal failing cases in a folder of its own).
  std::vector<std::unique_ptr<conformance::Backend>> peers_owned;
  std::vector<Beside> beside;
  for (const std::string& name : options.beside) {
    std::unique_ptr<conformance::Backend> peer = conformance::make_backend(name);
    if (!peer) return spec::invalid_argument("beside backend " + name + ": cannot be loaded");
    const bool child = name.rfind(backends::kProcessPrefix, 0) == 0;
    const std::optional<backends::TimedCalls> timed = backends::plugin_timed_calls(*peer);
    if (child ? !backends::child_timed_calls(*peer) : !timed)
      return spec::not_supported("beside backend " + name +
                                 (child ? ": declares no timed calls (spec/process.md §6)"
                                        : ": declares no timed calls (backend ABI version 3)"));
    const backends::PluginInfo* info = backends::plugin_info(*peer);
    const backends::ProcessInfo* process = backends::process_info(*peer);
    const std::string declared = info ? info->declared : process ? process->declared : "peer";
    BesideBackend b;
    b.backend = name;
    b.variant = "peer:" + declared;
    b.device = peer->device();
    b.version = info ? info->version : process ? process->kernel_version : "";
    Options peer_gate = options;
    peer_gate.gate_case_dir = options.gate_case_dir + "/" + declared;
    b.gate = run_gate(*peer, peer_gate);
    if (!b.gate.passed) {
      std::string ids;
      for (const GateFailure& f : b.gate.failures) ids += (ids.empty() ? "" : ", ") + f.id;
      report.notes.push_back(b.variant + " (" + name + ") failed the gate (" + ids +
                             "): timed as a reference beside the gated kernels, not qualified");
    }
    if (child)
      beside.push_back({b.variant, peer.get(), false, false, true});
    else
      beside.push_back({b.variant, peer.get(), timed->device_memory, timed->graph_capturable});
    report.beside.push_back(std::move(b));
    peers_owned.push_back(std::move(peer));
  }

  spec::Result<std::unique_ptr<Timer>> made = make_timer(target, options);
  if (!made) return made.status();
  Timer& timer = *made.value();
  report.device = timer.device();
  report.driver = timer.driver();
  report.runtime = timer.runtime();
  report.suite_version = options.suite_version;
  report.timer = timer.description();
  for (const std::string& n : timer.notes()) report.notes.push_back(n);
  report.datasheet_tbs = options.datasheet_tbs > 0 ? options.datasheet_tbs : timer.datasheet_tbs();
  for (const std::string& n : report.notes) say(options, "pacts-bench: %s\n", n.c_str());

  say(options, "pacts-bench: ceilings on %s ...\n", report.device.c_str());
  spec::Result<Ceilings> ceilings = timer.ceilings(options);
  if (!ceilings) return ceilings.status();
  report.ceilings = ceilings.value();
  say(options, "pacts-bench: ceilings: copy %.3g TB/s, read %.3g TB/s (%llu MiB buffers)\n",
      report.ceilings.copy_tbs, report.ceilings.read_tbs,
      static_cast<unsigned long long>(report.ceilings.bytes >> 20));

  // The peers' figures of this device, if a file is named and it is about this device.
  std::optional<PeerFigures> peers;
  if (!options.peers_file.empty()) {
    spec::Result<PeerFigures> loaded = load_peer_figures(options.peers_file);
    if (!loaded) return loaded.status();
    if (report.device.find(loaded.value().device) != std::string::npos) peers = loaded.value();
  }
  const std::vector<std::string> variants = timer.variants();
  for (size_t i = 0; i < todo.size(); ++i) {
    const Shape& shape = todo[i];
    const pacts_problem problem = make_problem(shape);
    // A shape outside the backend's declared capabilities is NotSupported, never timed.
    if (spec::Status s = conformance::check_capabilities(backend.capabilities(), problem); !s) {
      for (const std::string& v : variants)
        report.rows.push_back(make_row(shape, v, describe_status(s)));
      say(options, "[%zu/%zu] %s: %s\n", i + 1, todo.size(), shape.label().c_str(),
          describe_status(s).c_str());
      continue;
    }
    const std::vector<int32_t> lens = context_lengths(shape, options.data_seed);
    // A peer that does not declare the shape gets a not-supported row and is not asked.
    std::vector<Beside> asked;
    for (const Beside& b : beside) {
      if (spec::Status s = conformance::check_capabilities(b.backend->capabilities(), problem); !s) {
        report.rows.push_back(make_row(shape, b.variant, describe_status(s)));
        continue;
      }
      asked.push_back(b);
    }
    for (const Measurement& m : timer.time(shape, options, asked)) {
      Row r = make_row(shape, m.variant, m.status ? "ok" : describe_status(m.status));
      if (m.status) {
        r.plan = m.plan.variant + " x" + std::to_string(m.plan.num_partitions);
        r.time = statistics(m.samples_us);
        r.bytes = bytes_moved(problem, lens, m.plan);
        const double seconds = r.time.median_us * 1e-6;
        r.kv_tbs = r.bytes.kv / seconds / 1e12;
        r.all_tbs = r.bytes.all / seconds / 1e12;
        const auto pct = [](double x, double of) { return of > 0 ? 100.0 * x / of : 0.0; };
        r.kv_pct_ceiling = pct(r.kv_tbs, report.ceilings.read_tbs);
        r.all_pct_ceiling = pct(r.all_tbs, report.ceilings.read_tbs);
        r.kv_pct_datasheet = pct(r.kv_tbs, report.datasheet_tbs);
        r.all_pct_datasheet = pct(r.all_tbs, report.datasheet_tbs);
        if (const PeerFigure* f = peers ? peer_figure(*peers, shape) : nullptr) {
          r.peer_us = f->us;
          r.peer_tbs = f->tbs;
        }
        say(options, "[%zu/%zu] %s %s: %.1f us (min %.1f, max %.1f) %.3g TB/s K/V, %.3g all\n",
            i + 1, todo.size(), shape.label().c_str(), r.variant.c_str(), r.time.median_us,
            r.time.min_us, r.time.max_us, r.kv_tbs, r.all_tbs);
      } else {
        say(options, "[%zu/%zu] %s %s: %s\n", i + 1, todo.size(), shape.label().c_str(),
            r.variant.c_str(), r.status.c_str());
      }
      report.rows.push_back(std::move(r));
    }
  }
  return report;
}

namespace {

// By name from the registry ("hip:1+v_tail_leak" is GPU 1 with a planted fault): the backends
// are those the program registered.
spec::Result<std::unique_ptr<conformance::Backend>> backend_of(const Target& target) {
  std::unique_ptr<conformance::Backend> backend = conformance::make_backend(target.backend);
  if (!backend)
    return spec::not_supported("backend " + target.backend + ": not available in this build" +
                               (target.kind == "hip" ? " or no such GPU" : ""));
  return backend;
}

}  // namespace

spec::Result<Report> run_set(std::string_view set, const Target& target, const Options& options) {
  if (spec::Status s = check_options(target, options); !s) return s;
  spec::Result<std::unique_ptr<conformance::Backend>> backend = backend_of(target);
  if (!backend) return backend.status();
  return run_set(set, target, *backend.value(), options);
}

spec::Result<Report> run_shapes(std::string_view set, std::vector<Shape> shapes,
                                const Target& target, const Options& options) {
  if (spec::Status s = check_options(target, options); !s) return s;
  spec::Result<std::unique_ptr<conformance::Backend>> backend = backend_of(target);
  if (!backend) return backend.status();
  return run_shapes(set, std::move(shapes), target, *backend.value(), options);
}

}  // namespace pacts::bench
