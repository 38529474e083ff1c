// pacts-bench: times the decode kernels on a shape set, after the conformance gate passed on the
// same backend object in this process (docs/architecture.md: bench/ only times what the
// checks passed).
//
//   pacts-bench --backend host|hip[:N] [--backend lib:PATH ...] --set peers|models|grid|formats
//               [--gate-cases N] [--only TEXT] [--limit N] [--repeats N] [--csv F] [--json F]
//               [--svg F] [--baseline F] [--list]
//
// Further --backend lib:PATH: plugins with timed calls (backend ABI version 3), gated and timed
// beside the first on the same inputs by the same method; the table ends with the side-by-side
// comparison.
//
// Sets: peers (the H200 peers' grid), models (production configurations), grid (a ragged
// sweep), formats (every KV format in NHD and vLLM's x-packed K / dim-major V, at one shape).
//
// Progress on stderr, the table on stdout. Exit status: 0 done; 1 bad arguments or a tool
// error; 2 the gate failed (nothing timed; the failing properties and case files are named);
// 3 --baseline found changes beyond the noise; 4 a timed call produced an error.
#include <pacts/backends/register.h>
#include <pacts/bench/bench.h>

#include <CLI/CLI.hpp>

#include "cli.h"

#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

namespace {

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  f.close();
  if (f) return true;
  std::fprintf(stderr, "pacts-bench: cannot write %s\n", path.c_str());
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  namespace bench = pacts::bench;
  pacts::backends::register_all();
  CLI::App app{"pacts-bench: decode kernels timed behind the conformance gate"};
  std::string backend = "host", set = "peers", shape, csv, json, svg, baseline;
  bench::Options o;
  uint64_t ceiling_mib = 0;
  double threshold = 5.0;
  bool list = false, no_unsafe = false;
  std::vector<std::string> backends_named;
  app.add_option("--backend", backends_named,
                 "host, hip, hip:N (GPU N), or <backend>+<fault>; repeatable: the first is timed "
                 "behind the gate, each further one (lib:PATH, a plugin with timed calls, or "
                 "exec:CMD, a child that declares timed calls) is gated and timed beside it on "
                 "the same inputs");
  app.add_option("--set", set,
                 "shape set: peers, models, grid, formats (every KV format x layout nhd/vllm)");
  app.add_option("--gate-cases", o.gate_cases, "generated cases per property in the gate");
  app.add_option("--gate-seed", o.gate_seed, "seed of the gate's cases");
  app.add_option("--case-dir", o.gate_case_dir, "where the gate saves minimal failing cases");
  app.add_option("--repeats", o.repeats, "timed calls per shape (GPU: at least 20)");
  app.add_option("--warmup", o.warmup, "untimed calls before them");
  app.add_option("--seed", o.data_seed, "seed of inputs, block tables and ragged lengths");
  app.add_option("--only", o.only, "time only the shapes whose label contains TEXT");
  app.add_option("--limit", o.limit, "time only the first N shapes of the set (after --only)");
  app.add_option("--threads", o.host_threads, "host backend: worker threads (0 = all)");
  app.add_option("--ceiling-mib", ceiling_mib, "buffer size of the ceiling probes (0 = default)");
  app.add_option("--datasheet-tbs", o.datasheet_tbs, "datasheet bandwidth (0 = from the name)");
  app.add_flag("--no-unsafe", no_unsafe, "do not time the unsafe variant");
  app.add_option("--variant", o.variants,
                 "GPU: also time this variant build (libpacts_bench_NAME.so; repeatable; never "
                 "gated, not qualified)");
  app.add_option("--partitions", o.partitions,
                 "force every plan to N partitions (0 = the automatic split)");
  app.add_flag("--batch-invariant", o.batch_invariant,
               "time the batch-invariant plan (fixed partition size) instead of the automatic one");
  app.add_option("--partition-size", o.partition_size,
                 "force N keys per partition (with --batch-invariant: its size; 0 = default)");
  app.add_option("--csv", csv, "write the rows as CSV");
  app.add_option("--json", json, "write the report as JSON");
  app.add_option("--svg", svg, "write the plot (TB/s against context) as SVG");
  app.add_option("--baseline", baseline, "compare with an earlier --json report");
  app.add_option("--threshold", threshold, "baseline: percent the median must move (default 5)");
  std::string peers = "";
  app.add_option("--peers", peers,
                 "a peers' figures file shown beside the rows of its device (default: the "
                 "committed bench/data/h200-best-paged-peer.json; none: no peer column)");
  app.add_flag("--list", list, "print the set's shapes and exit");
  app.add_option("--shape", shape,
                 "time this one shape instead of a set: a label as the reports print it, e.g. "
                 "\"B32 ctx16384 L1 Hq64 Hkv8 D128 p64 bf16\" (with --partitions N: that split)");
  pacts::apps::add_version(app);
  PACTS_CLI_PARSE(app, argc, argv);
  if (!backends_named.empty()) {
    backend = backends_named.front();
    o.beside.assign(backends_named.begin() + 1, backends_named.end());
  }
  o.ceiling_bytes = ceiling_mib << 20;
  o.unsafe = !no_unsafe;
  o.suite_version = PACTS_SUITE_VERSION;
  // The committed figures by default, where this build's source tree still holds them.
  const std::string stored_peers = pacts::apps::data_path("bench/h200-best-paged-peer.json", PACTS_PEERS_FILE);
  if (peers.empty() && std::filesystem::exists(stored_peers)) peers = stored_peers;
  o.peers_file = peers == "none" ? "" : peers;

  if (!shape.empty()) set = "shape";
  const pacts::spec::Result<std::vector<bench::Shape>> shapes = [&]() {
    if (shape.empty()) return bench::shape_set(set);
    const pacts::spec::Result<bench::Shape> one = bench::parse_shape(shape);
    if (!one) return pacts::spec::Result<std::vector<bench::Shape>>(one.status());
    return pacts::spec::Result<std::vector<bench::Shape>>(std::vector<bench::Shape>{one.value()});
  }();
  if (!shapes) {
    std::fprintf(stderr, "pacts-bench: %s\n", shapes.status().to_string().c_str());
    return pacts::apps::kExitUsage;
  }
  if (list) {  // the shapes a run would time
    for (const bench::Shape& s : bench::select_shapes(shapes.value(), o))
      std::printf("%s\n", s.label().c_str());
    return 0;
  }
  // The library's gate_cases 0 is for callers that ran the catalogue themselves (pacts-qualify);
  // the command always runs the gate.
  if (o.gate_cases < 1) {
    std::fprintf(stderr, "pacts-bench: --gate-cases %d: the gate always runs, accepted >= 1\n",
                 o.gate_cases);
    return pacts::apps::kExitUsage;
  }
  const pacts::spec::Result<bench::Target> target = bench::parse_target(backend);
  if (!target) {
    std::fprintf(stderr, "pacts-bench: %s\n", target.status().to_string().c_str());
    return pacts::apps::kExitUsage;
  }
  std::optional<bench::Report> before;
  if (!baseline.empty()) {
    std::ifstream f(baseline, std::ios::binary);
    std::stringstream text;
    text << f.rdbuf();
    pacts::spec::Result<bench::Report> parsed = bench::from_json(text.str());
    if (!f || !parsed) {
      std::fprintf(stderr, "pacts-bench: --baseline %s: %s\n", baseline.c_str(),
                   f ? parsed.status().to_string().c_str() : "cannot read the file");
      return pacts::apps::kExitUsage;
    }
    before = std::move(parsed).value();
  }

  const pacts::spec::Result<bench::Report> run = bench::run_shapes(set, shapes.value(), target.value(), o);
  if (!run) {
    std::fprintf(stderr, "pacts-bench: %s\n", run.status().to_string().c_str());
    return pacts::apps::kExitUsage;
  }
  const bench::Report& report = run.value();
  if (!report.gate.passed) {
    std::fprintf(stderr, "pacts-bench: REFUSED to time backend %s: the conformance gate failed\n",
                 report.backend.c_str());
    for (const bench::GateFailure& f : report.gate.failures)
      std::fprintf(stderr, "  %s %s failed: %s\n    case file: %s\n    replay: %s\n",
                   f.id.c_str(), f.name.c_str(), f.detail.c_str(),
                   f.case_file.empty() ? "(not saved)" : f.case_file.c_str(), f.replay.c_str());
    std::fprintf(stderr, "  gate seed %" PRIu64 ", %d cases per property\n", report.gate.seed,
                 report.gate.cases_per_property);
    if (!json.empty() && !write_file(json, bench::to_json(report))) return pacts::apps::kExitUsage;
    return pacts::apps::kExitFail;  // the gate refused the backend
  }
  std::fputs(bench::to_table(report).c_str(), stdout);
  if (!csv.empty() && !write_file(csv, bench::to_csv(report))) return pacts::apps::kExitUsage;
  if (!json.empty() && !write_file(json, bench::to_json(report))) return pacts::apps::kExitUsage;
  if (!svg.empty() && !write_file(svg, bench::to_svg(report))) return pacts::apps::kExitUsage;
  int status = 0;
  for (const bench::Row& r : report.rows)
    if (r.status.rfind("error:", 0) == 0) status = 4;
  if (before) {
    const bench::Comparison c = bench::compare(*before, report, threshold);
    std::fputs(bench::to_text(c).c_str(), stdout);
    if (!c.changes.empty() && status == 0) status = 3;
  }
  return status;
}
