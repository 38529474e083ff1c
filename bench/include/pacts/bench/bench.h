// pacts-bench as a library: shape sets, the conformance gate, timing, reports. The pacts-bench
// command and pacts-qualify (the `peers` and `models` sets of a GPU backend) both call it.
//
//   auto target = pacts::bench::parse_target("hip:0");          // or "host"
//   pacts::bench::Options options;                              // gate 20 cases, 20 repeats
//   auto report = pacts::bench::run_set("peers", target.value(), options);
//   if (report && report.value().gate.passed)
//     std::fputs(pacts::bench::to_table(report.value()).c_str(), stdout);
//
// Nothing is timed before the gate passed on the same backend object (docs/architecture.md: bench/
// only times what the checks passed). A report is plain data: it converts to a text table, CSV,
// JSON (read back by from_json, for --baseline) and an SVG plot.
#pragma once

#include <pacts/problem.h>
#include <pacts/spec/status.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace pacts::conformance {
class Backend;
}

namespace pacts::bench {

// ---- Shape sets ---------------------------------------------------------------------------

// How the K and V pools are laid out (spec/operator.md §3.2-§3.3); scale pools are always the
// dense layouts of §3.4.
enum class KvLayout {
  kNhd,   // K and V [N, P, Hkv, D] (chunk == the row)
  kVllm,  // vLLM's pair: x-packed K [N, Hkv, D/x, P, x], x = 16 bytes; dim-major V [N, Hkv, D, P]
};
std::string_view layout_name(KvLayout layout);  // "nhd", "vllm"

// One timed problem. Q and output are bf16; the block table is a seeded random permutation of
// the pages (every sequence owns ceil(context / page) pages).
struct Shape {
  std::string set;            // "peers", "models", "grid", "formats"
  std::string model;          // models set: the model (and its tensor parallelism); else ""
  int32_t batch = 1;
  int32_t context = 1024;     // the longest context; with `ragged`, lengths are context - U[0,255]
  int32_t q_len = 1;          // L
  int32_t num_q_heads = 8;
  int32_t num_kv_heads = 8;
  int32_t head_dim = 128;
  int32_t page_size = 16;
  pacts_format kv_format = PACTS_FORMAT_BF16;
  pacts_scale_mode kv_scale_mode = PACTS_SCALE_NONE;  // for K and V alike
  KvLayout layout = KvLayout::kNhd;
  bool sinks = false;
  int32_t window = 0;         // 0 = none
  bool ragged = false;

  int32_t group() const { return num_q_heads / num_kv_heads; }
  // "B8 ctx4096 L1 Hq64 Hkv8 D128 p16 bf16" (+ " sinks", " W128", " ragged", and " vllm" for
  // a layout other than NHD): unique in a set.
  std::string label() const;
  // "bf16 p16", "e4m3fn/tensor p16" (+ " vllm"): the line of the plot this shape belongs to
  // (format and scale mode x page size x layout).
  std::string series() const;
};

std::vector<std::string> set_names();  // "peers", "models", "grid", "formats"

// The shape a label names (Shape::label's words, in any order: "B32 ctx16384 L1 Hq64 Hkv8 D128
// p64 bf16", "... e4m3fn/tensor sinks W128 ragged vllm"; a model's "Name: " prefix is dropped),
// for timing one shape of your own (pacts-bench --shape). Every field must be given but the
// optional words; the result's set is "shape". A word that is not one of them, a number out of
// range or a missing field is InvalidArgument naming it. parse_shape(s.label()) gives back s's
// fields for every shape of every set.
spec::Result<Shape> parse_shape(std::string_view label);

// The shapes of a set, in a fixed order. An unknown name is InvalidArgument naming it and the
// accepted names.
spec::Result<std::vector<Shape>> shape_set(std::string_view name);

// The descriptor of a shape (bf16 Q and output, softmax scale 1/sqrt(D), per-tensor scales 1
// where the mode is per-tensor, LSE not requested, K/V pools in the shape's layout, dense scale
// pools).
pacts_problem make_problem(const Shape& shape);

// Context lengths: all `context`, or with `ragged` context - U[0, 255] (at least 1) from `seed`.
std::vector<int32_t> context_lengths(const Shape& shape, uint64_t seed);

// ---- Targets and options ------------------------------------------------------------------

// Where a set is timed: "host" (the host kernels on CPU threads) or "hip" / "hip:N" (the HIP
// kernels on GPU N; only in builds with the hip backend). A name with a planted fault,
// "host+<fault>" (conformance/fault_backend.h), is accepted: its gate must refuse it.
struct Target {
  std::string backend;        // as given: "host", "hip:1", "host+v_tail_leak"
  std::string kind;           // "host" or "hip"
  int32_t ordinal = 0;        // GPU ordinal for "hip"
};
// InvalidArgument naming the value and the accepted forms.
spec::Result<Target> parse_target(std::string_view name);

struct Options {
  // The gate: every property of the catalogue with this many generated cases (0 = the caller
  // has run the whole catalogue on this backend object itself and vouches for it: pacts-qualify).
  int32_t gate_cases = 20;
  uint64_t gate_seed = 20261129;
  std::string gate_case_dir = "pacts-bench-failures";  // minimal failing cases are saved here
  // Timing: `warmup` untimed calls, then `repeats` timed ones (median, min, max). >= 20 on GPUs.
  int32_t repeats = 20;
  int32_t warmup = 3;
  uint64_t data_seed = 1;     // inputs, block tables, ragged lengths
  std::string only;           // time only the shapes whose label contains this text ("" = all)
  int32_t limit = 0;          // then only the first `limit` of them (0 = all)
  int32_t host_threads = 0;   // host target: worker threads (0 = all hardware threads)
  // Bytes of the ceiling probes (copy, read-only kernel); 0 = the target's default (GPU 2 GiB,
  // host 256 MiB).
  uint64_t ceiling_bytes = 0;
  double datasheet_tbs = 0;   // 0 = looked up from the device name (H200: 4.8); else given
  bool unsafe = true;         // GPU: also time the unsafe build (masking compiled out) if present
  // GPU: variant builds timed beside the gated library on every shape (libpacts_bench_<name>.so:
  // experiments such as ablations; never gated, their figures are not qualified ones).
  std::vector<std::string> variants;
  // > 0: every shape's plan forced to this many partitions (pacts::kernels::plan's
  // fixed_partitions) for the gated library and every variant alike; 0: the automatic split.
  int32_t partitions = 0;
  // Every shape's plan is the batch-invariant one (pacts::kernels::plan's batch_invariant; the
  // rows' plan names end in /invariant); not with `partitions`.
  bool batch_invariant = false;
  // > 0: every shape's partitions forced to this many keys (plan's fixed_partition_size; with
  // batch_invariant, the batch-invariant plan's size); not with `partitions`.
  int32_t partition_size = 0;
  // Backends timed beside the target in the same run and by the same method ("lib:PATH": a
  // plugin with the timed calls of backend ABI version 3, pacts/backend_abi.h). Each is gated
  // like the target (its verdicts go to Report::beside); its rows' variant is "peer:<name>". A
  // peer whose gate fails is still timed, as a reference and marked so: the gate guards what
  // pacts ships, and a peer's failures are findings, not a reason to hide its speed.
  std::vector<std::string> beside;
  // A peers' figures file (load_peer_figures, below): its rows sit beside pacts' rows of the same
  // shape when the device's name contains the file's device. "" = none.
  std::string peers_file;
  std::FILE* progress = stderr;  // one line per shape while running; nullptr = quiet
  std::string suite_version;  // recorded in the report (the program's build sets it)
};

// ---- Results ------------------------------------------------------------------------------

struct Stats {
  double median_us = 0, min_us = 0, max_us = 0;
  int32_t samples = 0;
};

// Bytes one call moves (spec/operator.md §3 buffers). `kv`: K and V elements of the visible
// context, as the peers count them. `all`: kv plus K/V scales, Q, output, LSE, block-table
// entries read, context lengths, sinks, and the split plan's workspace (written and read back).
struct Bytes {
  uint64_t kv = 0;
  uint64_t all = 0;
};

struct Row {
  Shape shape;
  std::string variant;        // "safe" (gated), "unsafe" (masking compiled out) or an experiment
  std::string status;         // "ok", or "not supported: <reason>", or "error: <reason>"
  std::string plan;           // the plan's variant and partitions, e.g. "tile64 x4"
  Stats time;
  Bytes bytes;
  double kv_tbs = 0, all_tbs = 0;          // bytes / median time
  double kv_pct_ceiling = 0, kv_pct_datasheet = 0;  // of the read ceiling / datasheet; 0 = n/a
  double all_pct_ceiling = 0, all_pct_datasheet = 0;
  // `peers` set on an H200: the best paged peer's median time and K/V TB/s at this shape
  // (docs/bench.md, same method); 0 = no reference for this device or shape.
  double peer_us = 0, peer_tbs = 0;
  bool ok() const { return status == "ok"; }
};

// Bandwidth measured in the same run and process, on the same device.
struct Ceilings {
  uint64_t bytes = 0;         // buffer size of each probe
  Stats copy, read;
  double copy_tbs = 0;        // device-to-device copy, read + write bytes / median time
  double read_tbs = 0;        // read-only kernel (host: threads summing the buffer)
};

struct GateFailure {
  std::string id, name, verdict;   // "PACTS-POISON-1", "UnownedRowsDoNotLeak", "Fail"
  std::string detail;              // the minimal case's outcome
  std::string case_file, replay;   // saved minimal case and the command that replays it
};

struct Gate {
  bool ran = false;           // false: Options::gate_cases == 0 (vouched for by the caller)
  bool passed = false;
  int32_t cases_per_property = 0;
  uint64_t seed = 0;
  int32_t properties = 0;
  std::vector<GateFailure> failures;
  double seconds = 0;
};

// A backend timed beside the target (Options::beside).
struct BesideBackend {
  std::string backend;        // as named: "lib:/x/libpacts_peer_flashinfer.so"
  std::string variant;        // its rows' variant: "peer:flashinfer-decode"
  std::string device, version;  // as the backend declares them
  Gate gate;
};

// Per shape of a run with backends beside the target: the target's gated ("safe") row against
// each peer's. ratio = peer's median / target's median (above 1: the target is faster).
struct SideBySide {
  std::string label;
  Stats target;
  std::vector<std::string> peers;   // variants, in Report::beside order
  std::vector<Stats> peer_times;    // samples 0: not timed (not supported or an error)
  std::vector<double> ratios;       // 0 where not timed
};
std::vector<SideBySide> side_by_side(const struct Report& report);

struct Report {
  std::string set, backend, device, timer;   // timer: how time was taken
  // Provenance: the GPU driver and runtime the timed kernels ran on (empty for the host), and
  // the suite version of the pacts-bench that timed them (git describe at configure time).
  std::string driver, runtime, suite_version;
  Gate gate;
  Ceilings ceilings;
  double datasheet_tbs = 0;   // 0 = unknown device
  int32_t repeats = 0, warmup = 0;
  uint64_t data_seed = 0;
  std::vector<BesideBackend> beside;  // Options::beside, in that order
  std::vector<Row> rows;      // empty when the gate did not pass
  std::vector<std::string> notes;  // e.g. why the unsafe variant is absent
};

// ---- Running ------------------------------------------------------------------------------

// The gate alone: the whole catalogue through conformance::run_property on `backend`, with
// Options::gate_cases cases per property. Passed when no property's verdict is Fail.
Gate run_gate(conformance::Backend& backend, const Options& options);

// Gate then time `set` on `target`, the gate running on `backend` (the backend object of the
// same device: conformance::make_backend(target.backend), or pacts-qualify's own). When the gate
// fails the report has its failures and no rows (the caller refuses, naming them). A shape the
// backend does not support is a row with status "not supported: ..."; it is never timed.
// Errors: InvalidArgument (unknown set, bad options), NotSupported (no timer for the target in
// this build), DeviceError (the device failed outside a shape).
spec::Result<Report> run_set(std::string_view set, const Target& target,
                             conformance::Backend& backend, const Options& options);
// The same with the backend made from target.backend.
spec::Result<Report> run_set(std::string_view set, const Target& target, const Options& options);
// What run_set does after looking the set up: gate, then time `shapes` (Options::limit applies),
// the report naming `set`. For shapes outside the sets, e.g. a reduced copy of a set's shape.
// The shapes a run times: those whose label contains `only` (all when it is empty), then the
// first `limit` of them (all when 0).
std::vector<Shape> select_shapes(std::vector<Shape> shapes, const Options& options);

spec::Result<Report> run_shapes(std::string_view set, std::vector<Shape> shapes,
                                const Target& target, conformance::Backend& backend,
                                const Options& options);
// The same with the backend made from target.backend.
spec::Result<Report> run_shapes(std::string_view set, std::vector<Shape> shapes,
                                const Target& target, const Options& options);

// ---- Peer figures ---------------------------------------------------------------------------

// Another kernel's measured figures per shape, read from a JSON data file with its provenance
// (bench/data/h200-best-paged-peer.json): reference data shown beside pacts' rows, never asserted.
// The file: {"what", "device", "method", "measured": strings, "rows": [{"batch", "context",
// "group", "page_size": integers >= 1, "us", "tbs": numbers > 0}]}.
struct PeerFigure {
  int32_t batch = 0, context = 0, group = 0, page_size = 0;
  double us = 0, tbs = 0;
};
struct PeerFigures {
  std::string what, device, method, measured;
  std::vector<PeerFigure> rows;
};
// InvalidArgument naming the file and the key when it cannot be read or a field is missing or
// out of range.
spec::Result<PeerFigures> load_peer_figures(const std::string& path);
// The figure of a shape of the `peers` set (bf16, D 128, 8 KV heads, L 1, full contexts, as the
// figures were measured), or nullptr for any other shape.
const PeerFigure* peer_figure(const PeerFigures& figures, const Shape& shape);

// ---- Reports ------------------------------------------------------------------------------

std::string to_table(const Report& report);  // fixed-width text, one line per row, then the
                                             // side-by-side table when peers were timed
std::string to_csv(const Report& report);    // header line, then one line per row
std::string to_json(const Report& report);   // the whole report
spec::Result<Report> from_json(std::string_view json);  // InvalidArgument naming what is wrong
std::string to_svg(const Report& report);    // TB/s (K/V bytes) against context, a line per
                                             // Shape::series() (x variant), ok rows only

// --baseline: a row of `current` whose median moved by more than `threshold_pct` percent from the
// same row (set, label, variant) of `baseline` AND whose [min, max] interval does not overlap the
// baseline's is a change beyond the measured noise.
struct Change {
  std::string label, variant;
  double baseline_median_us = 0, current_median_us = 0;
  double percent = 0;         // (current - baseline) / baseline * 100: positive is slower
};
struct Comparison {
  std::vector<Change> changes;
  int32_t compared = 0;       // rows found in both
  int32_t missing = 0;        // rows of the baseline absent (or not ok) in current
};
Comparison compare(const Report& baseline, const Report& current, double threshold_pct = 5.0);
std::string to_text(const Comparison& comparison);

}  // namespace pacts::bench
