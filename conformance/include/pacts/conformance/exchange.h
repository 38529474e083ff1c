// The exchange format (spec/case_files.md §4): a directory with problem.json and one NumPy .npy
// file per tensor, so that tools outside pacts (NumPy, a serving stack that captured a real KV
// cache) can hand a case in and read the results out. `pacts case run --dump DIR` writes one;
// `pacts case run --inputs DIR` reads one.
#pragma once

#include <pacts/conformance/backend.h>
#include <pacts/conformance/case_data.h>
#include <pacts/reference/decode.h>
#include <pacts/spec/status.h>
#include <pacts/spec/tolerance.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pacts::conformance {

// --- .npy files (NumPy format 1.0: little-endian, C order) -------------------------------------

enum class NpyType { kU8, kU16, kI32, kF32, kF64 };
const char* npy_descr(NpyType type);  // "|u1", "<u2", "<i4", "<f4", "<f8"
size_t npy_item_bytes(NpyType type);

struct NpyArray {
  NpyType type = NpyType::kU8;
  std::vector<uint64_t> shape;  // C order; {n} for the raw storage of a tensor
  std::vector<uint8_t> data;    // little-endian elements, product(shape) * item bytes

  uint64_t elements() const;
};

// Writes version 1.0 with the header padded to a multiple of 64 bytes (as NumPy does), atomically.
spec::Status write_npy(const std::string& path, const NpyArray& array);
// Reads versions 1.0, 2.0 and 3.0 with the five dtypes above ('<u1' is read as '|u1'). Refuses,
// naming the file, a bad magic or header, another dtype, big-endian data, Fortran order of more
// than one dimension, a shape beyond NumPy's limits (more than 64 dimensions, 2^63 bytes or
// more), and a data size that differs from the header's shape; OutOfRange when the data does not
// fit in memory (spec/case_files.md §7).
spec::Result<NpyArray> read_npy(const std::string& path);

// --- exchange directories ------------------------------------------------------------------

// What a dump carries besides the case itself. Pointers are not owned and may be null (nothing
// of theirs is written).
struct ExchangeExtras {
  // false: write problem.json and the results only (e.g. next to a large captured input); the
  // directory is then not loadable by load_case.
  bool write_inputs = true;
  // The run whose results are dumped: recorded under problem.json "run" when `backend` is set.
  std::string backend;
  std::string device;
  uint32_t device_error = 0;
  std::optional<PlanUsed> plan;              // problem.json "run.plan"
  // The backend's raw output and LSE allocations, exactly CaseData::out / lse sized.
  const std::vector<uint8_t>* out = nullptr;  // out.npy
  const std::vector<uint8_t>* lse = nullptr;  // lse.npy (only when want_lse)
  // The reference answer of the same case: ref_out, ref_lse, ref_a, ref_bound, ref_lse_bound.
  // The bounds are those of `profile`, the profile of the backend under test (required with
  // `reference`).
  const reference::Output* reference = nullptr;
  const spec::NumericsProfile* profile = nullptr;
};

// Writes problem.json and the .npy files of `c` into `dir` (created if missing). Every file is
// written atomically and problem.json last; files of the format that this dump does not write
// (a k_scale.npy of a case without K scales, an out.npy of an earlier dump) are removed, so the
// directory always describes one case. The problem must pass spec::validate_problem and every
// buffer must have its required extent.
spec::Status dump_case(const CaseData& c, const std::string& dir,
                       const ExchangeExtras* extras = nullptr);

// Rebuilds the case of an exchange directory: the problem from problem.json, the input buffers
// from the .npy files, out and lse zero-filled at their required extents. Refuses with
// InvalidArgument naming the file and the field: a missing or unknown key, a wrong value, a
// missing file, a file the problem does not use, a wrong dtype, an element count other than the
// one spec::required_extents gives, a q_scale / k_scale / v_scale file that disagrees with
// problem.json. A problem the spec refuses keeps the validator's code. Sizes are checked before
// any buffer is allocated (spec/case_files.md §7): buffers beyond the memory budget are
// OutOfRange, and so is running out of memory.
spec::Result<CaseData> load_case(const std::string& dir);

// The results another tool wrote into the exchange directory `dir` for `c`, the case load_case
// read from it (`pacts case judge`): out.npy, the whole output allocation in the output format's
// storage dtype (uint16 for bf16 and fp16, float32 for fp32), into c.out, and lse.npy (float32,
// the whole LSE allocation) into c.lse when the problem asks for an LSE. InvalidArgument naming
// the file: missing, another dtype, another element count than spec::required_extents, or an
// lse.npy the problem does not ask for.
spec::Status load_results(const std::string& dir, CaseData& c);

// A numerics profile (spec/tolerance.md §2) from a JSON file: an object with every field of
// spec::NumericsProfile but the query requantisation ("name", "u_logit", "u_q", "u_p", "eta_p",
// "p_rounded_in_denominator", "u_acc", "u_partial", "eps_exp", "eps_tanh", "eps_log", "ftz");
// numbers finite and >= 0. A requantising kernel is judged through a named backend's profile
// instead. InvalidArgument naming the file and the key.
spec::Result<spec::NumericsProfile> read_profile_file(const std::string& path);

}  // namespace pacts::conformance
