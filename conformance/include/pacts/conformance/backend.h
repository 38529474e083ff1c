// pacts::conformance::Backend: what the suite needs from anything that computes the operator.
// The reference, the host backend, the HIP kernels and external (plugin) kernels all present
// themselves through this interface; properties never know which one they judge.
#pragma once

#include <pacts/problem.h>
#include <pacts/spec/status.h>
#include <pacts/spec/tolerance.h>
#include <pacts/spec/validate.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace pacts::conformance {

// What a backend claims. A problem outside it is NotSupported, never Fail; inside it, every
// property must pass (spec/properties.md §1).
struct Capabilities {
  std::vector<pacts_format> q_formats;
  std::vector<pacts_format> kv_formats;
  std::vector<pacts_format> out_formats;
  std::vector<pacts_scale_mode> scale_modes;
  std::vector<int32_t> head_dims;
  int32_t min_page_size = 8, max_page_size = 256;
  int32_t max_q_len = 16;
  int32_t max_group = 64;
  bool chunked_layouts = true;   // x-packed K and dim-major V (chunk != D); else chunk == D only
  bool sinks = true, window = true, softcap = true, lse = true;
  bool deterministic = true;     // bitwise reproducible for a fixed plan (PACTS-META-2)
  bool split_plans = false;      // honours PlanHint partition sizes / counts (PACTS-META-3)
  // Honours PlanHint::batch_invariant(): a plan whose partitioning depends on neither the batch
  // nor the other sequences (spec/operator.md §11.1; PACTS-META-4 compares bitwise under it).
  bool batch_invariant = false;
  bool plan_replay = false;      // run_replayed(): one plan / captured graph, new contexts (DEV-3)
  // Runs PACTS-DEV-2's cases: pools and views past 2^31 elements (about 8 GiB of host and device
  // memory per case). GPU backends on large-memory devices; the CPU CI machine has too little.
  bool large_buffers = false;
  spec::Requirements requirements;  // alignment, addressable offsets (spec/refusals.md §4)

  // Everything the spec defines (the reference's capabilities).
  static Capabilities everything();
};

// NotSupported (naming the field and what the backend offers) or Ok.
spec::Status check_capabilities(const Capabilities& caps, const pacts_problem& problem);

// How the caller wants the context split (spec/properties.md PACTS-META-3).
struct PlanHint {
  // kBatchInvariant: the backend's batch-invariant plan (spec/operator.md §11.1), for a backend
  // that declares Capabilities::batch_invariant; value = keys per partition, 0 = its default.
  enum class Kind { kAutomatic, kPartitionSize, kPartitions, kBatchInvariant };
  Kind kind = Kind::kAutomatic;
  int32_t value = 0;  // keys per partition, or partitions per sequence

  static PlanHint automatic() { return {}; }
  static PlanHint partition_size(int32_t keys) { return {Kind::kPartitionSize, keys}; }
  static PlanHint partitions(int32_t n) { return {Kind::kPartitions, n}; }
  static PlanHint batch_invariant(int32_t keys = 0) { return {Kind::kBatchInvariant, keys}; }
};

// The plan a backend actually used (reported, so a failure can be replayed on the same plan).
struct PlanUsed {
  int32_t partition_size = 0;     // keys per partition; 0 = unsplit
  int32_t max_partitions = 1;     // partitions of the longest sequence
  std::string variant;            // template variant / kernel name, for bitwise comparisons
};

struct RunResult {
  spec::Status status;            // Ok, or the refusal (nothing written) / device error
  uint32_t device_error = 0;      // PACTS_DEVERR_* bits (spec/contract.md §4)
  PlanUsed plan;
  // A backend that is a process of its own (spec/process.md): the call failed because the
  // process died or did not answer in time (status Internal then says how). kNone otherwise.
  enum class Lost { kNone, kCrash, kTimeout };
  Lost lost = Lost::kNone;
};

// One problem of a batch run.
struct Job {
  const pacts_problem* problem;
  pacts_buffers buffers;          // host memory; the backend writes out and lse in place
  PlanHint hint;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string name() const = 0;            // "reference", "host", "hip:0", ...
  virtual std::string device() const = 0;          // "cpu: 2 threads", "NVIDIA H200 (sm_90)", ...
  virtual const Capabilities& capabilities() const = 0;
  virtual const spec::NumericsProfile& profile() const = 0;
  // The GPU's driver and runtime versions and its UUID, where the backend knows them (a GPU
  // backend of this build); empty otherwise. Reports record them (provenance).
  virtual std::string driver() const { return {}; }
  virtual std::string runtime() const { return {}; }
  virtual std::string device_uuid() const { return {}; }

  // Runs one problem. Buffers are host memory: a device backend uploads them, runs and
  // downloads the WHOLE out and lse allocations (so bytes it must not write can be checked). A
  // refusal writes nothing and returns its status. Precondition failures inside the kernel are
  // reported in device_error, with status Ok.
  virtual RunResult run(const pacts_problem& problem, const pacts_buffers& buffers,
                        const PlanHint& hint) = 0;

  // PACTS-DEV-3: one plan (on a GPU: one captured graph) run twice, first as given, then again
  // after the context lengths in `buffers` were overwritten in place with `replayed_context_lens`
  // (as a serving loop updates the device buffer a captured graph reads). The second run's output
  // and LSE are left in the buffers and its result returned. The default is NotSupported; a
  // backend that declares Capabilities::plan_replay overrides it.
  virtual RunResult run_replayed(const pacts_problem& problem, const pacts_buffers& buffers,
                                 std::span<const int32_t> replayed_context_lens,
                                 const PlanHint& hint);

  // Runs many problems; backends that can overlap or batch them override this.
  virtual std::vector<RunResult> run_many(std::span<const Job> jobs);
};

// The float64 reference as a backend: binary64 computation, output rounded once (RNE) to the
// output format, LSE to fp32. Unsplit; deterministic.
std::unique_ptr<Backend> make_reference_backend();
// The reference as a backend that requantises the query by `q_requant` (spec/tolerance.md §2.1)
// and declares it: what a requantising kernel must produce up to its own rounding
// ("reference-requant" by name, with fp8_kv_requant_rule()).
std::unique_ptr<Backend> make_reference_backend(const spec::QueryRequantRule& q_requant);
// fp8-row-pow2 for every fp8 and e2m1 KV format.
spec::QueryRequantRule fp8_kv_requant_rule();

// Backends by name (what --backend accepts) are the registry's: pacts/conformance/registry.h.

}  // namespace pacts::conformance
