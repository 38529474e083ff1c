// PACTS-DEV: device-resident inputs, addressing, graphs (spec/properties.md §9,
// spec/contract.md §4).
#include <pacts/conformance/check_util.h>
#include <pacts/conformance/large_addresses.h>
#include <pacts/conformance/rng.h>
#include <pacts/conformance/property.h>
#include <pacts/spec/formats.h>
#include <pacts/spec/validate.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <new>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace pacts::conformance {
namespace {

constexpr int32_t kInt32Min = std::numeric_limits<int32_t>::min();
constexpr int32_t kInt32Max = std::numeric_limits<int32_t>::max();

// Reference work allowed for the n_b = M*P boundary run (the default generator budget).
constexpr int64_t kBoundaryWork = int64_t{1} << 22;

Outcome with_where(Outcome o, const std::string& where) {
  o.detail = where + o.detail;
  return o;
}

std::string hex(uint32_t code) {
  std::ostringstream os;
  os << "0x" << std::hex << code;
  return os.str();
}

bool same_plan(const PlanUsed& a, const PlanUsed& b) {
  return a.partition_size == b.partition_size && a.max_partitions == b.max_partitions &&
         a.variant == b.variant;
}

// One sequence made to violate P1 or P2 (spec/contract.md §4).
struct Violation {
  int32_t seq = 0;
  uint32_t bit = 0;         // the PACTS_DEVERR_* bit it must set
  std::string description;  // for the report
};

// spec/properties.md PACTS-DEV-1: n_b in {-1, INT32_MIN, M*P + 1, INT32_MAX}, or an owned entry in
// {-1, N, INT32_MAX, INT32_MIN} at the first, a middle or the last owned column; chosen from the
// seed. A sequence without owned columns can only take a context-length violation.
Violation violate(CaseData& c, uint64_t seed) {
  pacts_problem& p = c.problem;
  Violation v;
  v.seq = static_cast<int32_t>(seed % static_cast<uint64_t>(p.batch));
  const uint64_t r = seed >> 8;
  const int32_t n = c.context_lens[static_cast<size_t>(v.seq)];
  const spec::KeyRange keys = visible_keys(p, n);
  const bool has_columns = n > 0 && !keys.empty();
  if (!has_columns || r % 2 == 0) {
    const int64_t over = int64_t{p.max_pages_per_seq} * p.page_size + 1;
    const int64_t bad[] = {-1, kInt32Min, std::min<int64_t>(over, kInt32Max), kInt32Max};
    const int64_t value = bad[(r >> 1) % 4];
    c.context_lens[static_cast<size_t>(v.seq)] = static_cast<int32_t>(value);
    v.bit = PACTS_DEVERR_CONTEXT_LEN;
    v.description = "context_lens[" + std::to_string(v.seq) + "] = " + std::to_string(value) +
                    " (M*P = " + std::to_string(over - 1) + ")";
    return v;
  }
  const spec::KeyRange cols = spec::owned_columns(keys, p.page_size);
  const int64_t first = cols.begin, last = cols.end - 1;
  const int64_t columns[] = {first, (first + last) / 2, last};
  const int64_t column = columns[(r >> 1) % 3];
  const int32_t bad[] = {-1, p.num_pages, kInt32Max, kInt32Min};
  const int32_t value = bad[(r >> 3) % 4];
  c.block_table[static_cast<size_t>(v.seq * p.block_table_stride + column)] = value;
  v.bit = PACTS_DEVERR_PAGE_ID;
  v.description = "block_table[" + std::to_string(v.seq) + "][" + std::to_string(column) +
                  "] = " + std::to_string(value) + " (owned columns " + std::to_string(first) +
                  ".." + std::to_string(last) + ", N = " + std::to_string(p.num_pages) + ")";
  return v;
}

// Every element and LSE of sequence `seq` must be NaN (any NaN).
std::optional<Outcome> rows_not_nan(const pacts_problem& p, const Observed& got, int32_t seq) {
  const size_t D = static_cast<size_t>(p.head_dim);
  const size_t rows = static_cast<size_t>(p.q_len) * static_cast<size_t>(p.num_q_heads);
  const size_t first_row = static_cast<size_t>(seq) * rows;
  for (size_t e = first_row * D; e < (first_row + rows) * D; ++e)
    if (!std::isnan(got.out_values[e]))
      return Outcome::fail(element_name(p, e, false) + " = " + std::to_string(got.out_values[e]) +
                           ": every element of the violating sequence must be NaN");
  for (size_t r = first_row; r < first_row + rows && r < got.lse_values.size(); ++r)
    if (!std::isnan(got.lse_values[r]))
      return Outcome::fail(element_name(p, r, true) + " = " + std::to_string(got.lse_values[r]) +
                           ": the LSE of the violating sequence must be NaN");
  return std::nullopt;
}

// The other sequences against the clean run: bitwise under the same plan on a deterministic
// backend, else within tolerance of the reference.
Outcome others_unchanged(PropertyContext& ctx, const CaseData& clean_case, const Observed& clean,
                         const Observed& got, int32_t seq) {
  const pacts_problem& p = clean_case.problem;
  const size_t D = static_cast<size_t>(p.head_dim);
  const size_t rows = static_cast<size_t>(p.q_len) * static_cast<size_t>(p.num_q_heads);
  const auto other = [&](size_t row) { return row / rows != static_cast<size_t>(seq); };
  if (!ctx.backend.capabilities().deterministic || !same_plan(clean.run.plan, got.run.plan)) {
    // Judge the other sequences only: give the violating sequence the clean run's values.
    Observed masked = got;
    for (size_t e = 0; e < masked.out_values.size(); ++e)
      if (!other(e / D)) masked.out_values[e] = clean.out_values[e];
    for (size_t r = 0; r < masked.lse_values.size(); ++r)
      if (!other(r)) masked.lse_values[r] = clean.lse_values[r];
    Outcome o = within_tolerance(ctx.backend, p, masked, reference_answer(clean_case, ctx.backend));
    if (o.failed()) o.detail = "another sequence changed: " + o.detail + " (bitwise not checked)";
    return o;
  }
  for (size_t e = 0; e < got.out_codes.size(); ++e)
    if (other(e / D) && got.out_codes[e] != clean.out_codes[e])
      return Outcome::fail(element_name(p, e, false) + " of another sequence = " +
                           std::to_string(got.out_values[e]) + " (" + hex(got.out_codes[e]) +
                           "), clean run " + std::to_string(clean.out_values[e]) + " (" +
                           hex(clean.out_codes[e]) + ")");
  for (size_t r = 0; r < got.lse_codes.size(); ++r)
    if (other(r) && got.lse_codes[r] != clean.lse_codes[r])
      return Outcome::fail(element_name(p, r, true) + " of another sequence = " +
                           std::to_string(got.lse_values[r]) + ", clean run " +
                           std::to_string(clean.lse_values[r]));
  return Outcome::pass();
}

// The boundaries of P1 are valid (spec/properties.md PACTS-DEV-1): n_b = M*P reads every column
// (make_case leaves padding entries at page 0, a valid page), n_b = 0 is an empty sequence.
std::optional<Outcome> boundary(PropertyContext& ctx, const CaseData& clean, int32_t seq, int64_t n,
                                int64_t max_work) {
  CaseData c = clean;
  const pacts_problem& p = c.problem;
  if (p.num_pages < 1) return std::nullopt;
  const size_t b = static_cast<size_t>(seq);
  const int64_t added = n - c.context_lens[b];
  if (2 * added * p.q_len * p.num_q_heads * p.head_dim > max_work) return std::nullopt;
  c.context_lens[b] = static_cast<int32_t>(n);
  for (int64_t k = 0; k < p.max_pages_per_seq; ++k) {
    int32_t& entry = c.block_table[static_cast<size_t>(seq * p.block_table_stride + k)];
    if (entry < 0 || entry >= p.num_pages) entry = 0;
  }
  const Observed got = observe(ctx.backend, c);
  const std::string where = "boundary context_lens[" + std::to_string(seq) + "] = " + std::to_string(n) + ": ";
  if (!got.run.status.is_ok())
    return Outcome::fail(where + "refused: " + got.run.status.to_string());
  if (got.run.device_error != 0)
    return Outcome::fail(where + "a valid context length set the error word " + hex(got.run.device_error));
  Outcome o = within_tolerance(ctx.backend, p, got, reference_answer(c, ctx.backend));
  if (o.failed()) {
    o.detail = where + o.detail;
    return o;
  }
  return std::nullopt;
}

// --- DEV-1 -----------------------------------------------------------------------------------

Outcome device_preconditions(PropertyContext& ctx, const CaseSpec& spec) {
  const CaseData clean = spec.build();
  const pacts_problem& p = clean.problem;
  if (p.batch == 0) return Outcome::not_applicable("B = 0 has no sequence to break");
  const Observed base = observe(ctx.backend, clean);
  if (auto o = run_failed(base, "clean run")) return *o;
  if (base.run.device_error != 0)
    return Outcome::fail("clean run: device error word " + hex(base.run.device_error) + " on a valid case");

  CaseData bad = clean;
  const Violation v = violate(bad, spec.seed);
  const Observed got = observe(ctx.backend, bad);
  const std::string where = v.description + ": ";
  if (!got.run.status.is_ok())
    return Outcome::fail(where + "the call was refused (" + got.run.status.to_string() +
                         "); device-resident values are never a refusal (spec/refusals.md §3)");
  if (got.run.device_error != v.bit)
    return Outcome::fail(where + "device error word " + hex(got.run.device_error) + ", expected exactly " +
                         hex(v.bit));
  if (auto o = rows_not_nan(p, got, v.seq)) return with_where(*o, where);
  if (Outcome o = others_unchanged(ctx, clean, base, got, v.seq); o.failed()) return with_where(o, where);

  const int64_t full = int64_t{p.max_pages_per_seq} * p.page_size;
  if (full <= kInt32Max)
    if (auto o = boundary(ctx, clean, v.seq, full, kBoundaryWork)) return *o;
  if (auto o = boundary(ctx, clean, v.seq, 0, 0)) return *o;
  return {Verdict::kPass, v.description, 0};
}

// --- DEV-2, DEV-3 ----------------------------------------------------------------------------

// --- DEV-2: large addresses -------------------------------------------------------------------

constexpr int64_t k2To31 = int64_t{1} << 31;

// PACTS-DEV-2 (spec/properties.md): a small generated case is spread over large addresses (one of
// three variants, from the seed) and must meet ACC-1, its unowned bytes all NaN.
Outcome addressing_64bit(PropertyContext& ctx, const CaseSpec& spec) {
  CaseData c = spec.build();
  const auto variant = static_cast<LargeAddressVariant>(spec.seed % 3);
  const std::string name = describe(variant);
  std::optional<std::string> why;
  try {
    why = spread_to_large_addresses(c, variant, k2To31);
  } catch (const std::bad_alloc&) {
    return Outcome::not_supported(name + ": host memory is short");
  }
  if (why) return Outcome::not_applicable(name + ": " + *why);
  if (spec::Status s = spec::validate(c.problem, c.buffers()); !s)
    return Outcome::fail(std::string("internal: the spread case is invalid: ") + s.to_string());
  const std::string where = name + ": ";
  const Observed got = observe(ctx.backend, c);
  if (got.run.status.code() == spec::Code::kDeviceError &&
      got.run.status.message().find("out of memory") != std::string::npos)
    return Outcome::not_supported(where + "device memory is short: " + got.run.status.message());
  if (auto o = run_failed(got, "PACTS-DEV-2")) return with_where(*o, where);
  if (got.run.device_error != 0)
    return Outcome::fail(where + "device error word " + hex(got.run.device_error) + " on a valid case");
  Outcome o = within_tolerance(ctx.backend, c.problem, got, reference_answer(c, ctx.backend));
  if (o.failed()) return with_where(o, where);
  o.detail = name;
  return o;
}

// PACTS-DEV-3: one plan (a captured graph on a GPU) replayed after the context lengths changed in
// place gives what a fresh run with the new lengths gives, bitwise (same plan hint). The new
// lengths are drawn from the case seed over the whole range the block table allows (shorter,
// longer, zero, the maximum), so a plan or graph that baked in the first lengths is caught.
Outcome graph_replay(PropertyContext& ctx, const CaseSpec& spec) {
  const CaseData first = spec.build();
  const pacts_problem& p = first.problem;
  if (p.batch == 0) return Outcome::pass();
  const int32_t most = p.max_pages_per_seq * p.page_size;
  Rng rng(spec.seed ^ 0x6a09e667f3bcc909ull);
  std::vector<int32_t> replayed(first.context_lens.size());
  for (int32_t& n : replayed) {
    switch (rng.below(4)) {
      case 0: n = 0; break;
      case 1: n = most; break;
      default: n = rng.range(0, most); break;
    }
  }
  CaseData second = first;
  second.context_lens = replayed;
  const PlanHint hint = PlanHint::partition_size(32);
  const Observed fresh = observe(ctx.backend, second, hint);
  const Observed replay = observe_replayed(ctx.backend, first, replayed, hint);
  if (auto o = run_failed(fresh, "PACTS-DEV-3 (fresh run)")) return *o;
  if (!replay.run.status.is_ok())
    return Outcome::fail("the backend declares plan replay but the replay failed: " +
                         replay.run.status.to_string());
  return same_bits(replay, fresh, "replayed plan after new context lengths vs a fresh run");
}

// DEV-2 moves about 8 GiB per case: a handful of small cases (few visible keys: the reference
// stays cheap), capped whatever the run's budget.
Property large_addresses(GenLimits limits) {
  limits.max_reference_work = int64_t{1} << 16;
  limits.max_batch = 4;
  Property p = make_property("PACTS-DEV-2", "Addressing64Bit", Level::kMandatory, false, limits,
                             addressing_64bit);
  p.max_cases = 12;
  p.supports = [](const Backend& b) -> std::optional<std::string> {
    if (!b.capabilities().large_buffers)
      return "backend " + b.name() +
             " does not run pools and views past 2^31 elements (Capabilities::large_buffers; GPU "
             "backends)";
    if (b.capabilities().requirements.max_element_offset < k2To31)
      return "backend " + b.name() +
             " declares a maximum element offset below 2^31: PACTS-REFUSE-1 checks its refusal";
    return std::nullopt;
  };
  return p;
}

Property graph_replay_property(const GenLimits& limits) {
  Property p = make_property("PACTS-DEV-3", "GraphReplay", Level::kMandatory, false, limits, graph_replay);
  p.supports = [](const Backend& b) -> std::optional<std::string> {
    if (b.capabilities().plan_replay) return std::nullopt;
    return "backend " + b.name() + " declares no plan replay / graph capture";
  };
  return p;
}

}  // namespace

std::vector<Property> dev_properties() {
  GenLimits limits;
  limits.max_reference_work = int64_t{1} << 20;
  return {
      make_property("PACTS-DEV-1", "DevicePreconditions", Level::kMandatory, false, limits, device_preconditions),
      large_addresses(limits),
      graph_replay_property(limits),
  };
}

}  // namespace pacts::conformance
