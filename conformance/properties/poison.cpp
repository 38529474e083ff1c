// PACTS-POISON: unowned data must not matter (spec/properties.md §5, spec/contract.md §1.2).
//
// Every check runs a baseline (unowned K/V and e8m0 bytes 0x00, unowned per-token scales 0.0f,
// unowned block-table entries naming a clean valid page, zeroed Q gaps and prior contents), then
// the same case once per fill with only one category of unowned data poisoned, under the same
// plan hint, and requires the output, the LSE and the device error word to be bitwise identical.
// A fill that the data's format does not have (Inf of e4m3fn) is reported as not applicable and
// never counted as a pass: such a fill is a finite value and cannot fail (#7092 in
// docs/bug-classes.md).
#include <pacts/conformance/check_util.h>
#include <pacts/conformance/property.h>
#include <pacts/conformance/rng.h>
#include <pacts/spec/formats.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace pacts::conformance {
namespace {

// Unowned bytes appended after the last addressed element of a read view ("view tails",
// spec/contract.md §1.2). A multiple of every element size.
constexpr size_t kViewTailBytes = 64;

enum class Fill { kNaN, kInf, kMaxFinite, kNegative, kRandom };

const char* fill_name(Fill f) {
  switch (f) {
    case Fill::kNaN: return "NaN";
    case Fill::kInf: return "Inf";
    case Fill::kMaxFinite: return "max finite";
    case Fill::kNegative: return "negative";
    case Fill::kRandom: return "random bytes";
  }
  return "?";
}

std::string hex(uint32_t code) {
  std::ostringstream os;
  os << "0x" << std::hex << code;
  return os.str();
}

std::string join(const std::vector<std::string>& items) {
  std::string s;
  for (const std::string& x : items) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// The plan hint of a case, derived from its seed so that a case file replays the same plan:
// the backend's default, unsplit-equivalent, partitions ending mid-page, many (often empty)
// partitions (spec/properties.md §2, plans).
PlanHint plan_hint(const CaseSpec& spec) {
  switch (spec.seed % 4) {
    case 0: return PlanHint::automatic();
    case 1: return PlanHint::partitions(1);
    case 2: return PlanHint::partition_size(spec.shape.page_size * 3 / 2);
    default: return PlanHint::partitions(8);
  }
}

// --- fill patterns ---------------------------------------------------------------------------

// Little-endian bytes of a run of element codes (a whole number of elements).
std::vector<uint8_t> to_bytes(const std::vector<uint32_t>& codes, int bytes_per_code) {
  std::vector<uint8_t> out;
  for (uint32_t c : codes)
    for (int i = 0; i < bytes_per_code; ++i) out.push_back(static_cast<uint8_t>(c >> (8 * i)));
  return out;
}

// Every NaN code of an 8-bit format; for 16-bit and fp32, quiet and signalling NaNs of both
// signs and a full payload (spec/properties.md PACTS-POISON-1, fills).
std::vector<uint32_t> nan_codes(pacts_format f) {
  const spec::FormatInfo* fi = spec::format_info(f);
  std::vector<uint32_t> codes;
  if (!fi->has_nan) return codes;
  if (fi->bits == 8) {
    for (uint32_t c = 0; c < 256; ++c)
      if (spec::is_nan_code(f, c)) codes.push_back(c);
    return codes;
  }
  const uint32_t mb = static_cast<uint32_t>(fi->mantissa_bits);
  const uint32_t exponent = ((1u << fi->exponent_bits) - 1) << mb;
  const uint32_t sign = 1u << (fi->bits - 1);
  for (uint32_t payload : {1u << (mb - 1), 1u, (1u << mb) - 1})
    for (uint32_t s : {0u, sign}) codes.push_back(s | exponent | payload);
  return codes;
}

// The bytes a fill writes into a buffer of format f (e2m1: packed bytes), an empty vector for
// random bytes, or nothing when the format has no such value (not applicable).
std::optional<std::vector<uint8_t>> fill_pattern(pacts_format f, Fill fill) {
  if (fill == Fill::kRandom) return std::vector<uint8_t>{};
  const spec::FormatInfo* fi = spec::format_info(f);
  const int bytes = std::max(spec::element_bytes(f), 1);
  const auto enc = [f](double x, spec::Overflow o) { return spec::encode(f, x, o); };
  if (f == PACTS_FORMAT_E2M1) {
    // e2m1 has no NaN or Inf (MXFP4's NaN is its e8m0 byte 0xFF: POISON-2); +-6 in both nibbles.
    if (fill != Fill::kMaxFinite) return std::nullopt;
    return std::vector<uint8_t>{0x77, 0xF7, 0x7F, 0xFF};
  }
  switch (fill) {
    case Fill::kNaN: {
      const std::vector<uint32_t> codes = nan_codes(f);
      if (codes.empty()) return std::nullopt;
      return to_bytes(codes, bytes);
    }
    case Fill::kInf:
      if (!fi->has_inf) return std::nullopt;
      return to_bytes({enc(INFINITY, spec::Overflow::kNonSaturate),
                       enc(-INFINITY, spec::Overflow::kNonSaturate)},
                      bytes);
    case Fill::kMaxFinite:
      if (!fi->is_signed) return to_bytes({enc(fi->max_finite, spec::Overflow::kSaturate)}, bytes);
      return to_bytes({enc(fi->max_finite, spec::Overflow::kSaturate),
                       enc(-fi->max_finite, spec::Overflow::kSaturate)},
                      bytes);
    case Fill::kNegative:
      if (!fi->is_signed) return std::nullopt;
      return to_bytes({enc(-1.0, spec::Overflow::kSaturate), enc(-0x1p-100, spec::Overflow::kSaturate),
                       enc(-0x1p100, spec::Overflow::kSaturate)},
                      bytes);
    case Fill::kRandom: break;
  }
  return std::vector<uint8_t>{};
}

// The storage format of a scale pool.
pacts_format scale_format(pacts_scale_mode mode) {
  return mode == PACTS_SCALE_MX_BLOCK ? PACTS_FORMAT_E8M0 : PACTS_FORMAT_FP32;
}

// Writes the pattern (random bytes when it is empty) over every unowned byte. Bytes past the end
// of `owned` are view tails, unowned too.
void poison_bytes(std::vector<uint8_t>& bytes, const std::vector<uint8_t>& owned,
                  const std::vector<uint8_t>& pattern, Rng& rng) {
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (i < owned.size() && owned[i]) continue;
    bytes[i] = pattern.empty() ? static_cast<uint8_t>(rng.next()) : pattern[i % pattern.size()];
  }
}

// --- baselines -------------------------------------------------------------------------------

// spec/properties.md §5: the baseline holds zeros in every unowned K/V, scale and e8m0 byte, and
// a clean valid page (page 0) in every unowned block-table entry; every K/V and scale view gets a
// zeroed tail.
void make_kv_baseline(CaseData& c, const Ownership& own) {
  const auto zero = [](std::vector<uint8_t>& bytes, const std::vector<uint8_t>& owned) {
    for (size_t i = 0; i < bytes.size(); ++i)
      if (!owned[i]) bytes[i] = 0;
    if (!bytes.empty()) bytes.resize(bytes.size() + kViewTailBytes, 0);
  };
  zero(c.k, own.k);
  zero(c.v, own.v);
  zero(c.k_scale, own.k_scale);
  zero(c.v_scale, own.v_scale);
  for (size_t i = 0; i < c.block_table.size(); ++i)
    if (!own.block_table[i]) c.block_table[i] = 0;
}

// Poisons the unowned K and V data with a fill; false when the KV format has no such value.
bool poison_kv_data(CaseData& c, const Ownership& own, Fill fill, uint64_t seed) {
  const auto pattern = fill_pattern(c.problem.kv_format, fill);
  if (!pattern) return false;
  Rng rng(seed);
  poison_bytes(c.k, own.k, *pattern, rng);
  poison_bytes(c.v, own.v, *pattern, rng);
  return true;
}

// Poisons the unowned per-token scales and e8m0 bytes; false when no scale pool has the fill.
bool poison_scales(CaseData& c, const Ownership& own, Fill fill, uint64_t seed) {
  Rng rng(seed);
  bool applied = false;
  const auto one = [&](std::vector<uint8_t>& bytes, const std::vector<uint8_t>& owned,
                       pacts_scale_mode mode) {
    if (bytes.empty()) return;
    const auto pattern = fill_pattern(scale_format(mode), fill);
    if (!pattern) return;
    poison_bytes(bytes, owned, *pattern, rng);
    applied = true;
  };
  one(c.k_scale, own.k_scale, c.problem.k_scale_mode);
  one(c.v_scale, own.v_scale, c.problem.v_scale_mode);
  return applied;
}

// The strongest poison the formats have, everywhere unowned: NaN data (MXFP4: +-6) with NaN
// scales (e8m0 0xFF). The pages that padding entries are made to name in POISON-3.
void poison_all_data(CaseData& c, const Ownership& own, uint64_t seed) {
  if (!poison_kv_data(c, own, Fill::kNaN, seed)) poison_kv_data(c, own, Fill::kMaxFinite, seed);
  poison_scales(c, own, Fill::kNaN, seed + 1);
}

// A block table with `extra` unowned int32 between rows (block_table_stride > M).
void widen_block_table(CaseData& c, int64_t extra) {
  pacts_problem& p = c.problem;
  if (p.batch <= 1 || c.block_table.empty()) return;
  const int64_t stride = p.max_pages_per_seq + extra;
  std::vector<int32_t> table(static_cast<size_t>((p.batch - 1) * stride + p.max_pages_per_seq), 0);
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t k = 0; k < p.max_pages_per_seq; ++k)
      table[static_cast<size_t>(b * stride + k)] =
          c.block_table[static_cast<size_t>(b * p.block_table_stride + k)];
  c.block_table = std::move(table);
  p.block_table_stride = stride;
}

// --- running and comparing -------------------------------------------------------------------

bool same_plan(const PlanUsed& a, const PlanUsed& b) {
  return a.partition_size == b.partition_size && a.max_partitions == b.max_partitions &&
         a.variant == b.variant;
}

// spec/properties.md §1: bitwise under the same plan and variant; a backend that does not
// declare determinism, or a run that reports another plan, is held to the tolerance instead, and
// `bitwise_skipped` records it.
Outcome compare_runs(PropertyContext& ctx, const CaseData& c, const Observed& base,
                     const Observed& got, bool& bitwise_skipped) {
  const pacts_problem& p = c.problem;
  if (!ctx.backend.capabilities().deterministic || !same_plan(base.run.plan, got.run.plan)) {
    bitwise_skipped = true;
    Outcome o = within_tolerance(ctx.backend, p, got, reference_answer(c, ctx.backend));
    if (o.failed()) o.detail += " (bitwise not checked: not deterministic or another plan)";
    return o;
  }
  if (base.run.device_error != got.run.device_error)
    return Outcome::fail("device error word " + hex(got.run.device_error) + ", baseline " +
                         hex(base.run.device_error));
  for (size_t e = 0; e < got.out_codes.size(); ++e)
    if (got.out_codes[e] != base.out_codes[e]) {
      std::ostringstream os;
      os << element_name(p, e, false) << " = " << got.out_values[e] << " ("
         << hex(got.out_codes[e]) << "), baseline " << base.out_values[e] << " ("
         << hex(base.out_codes[e]) << "), plan '" << got.run.plan.variant << "'";
      return Outcome::fail(os.str());
    }
  for (size_t r = 0; r < got.lse_codes.size(); ++r)
    if (got.lse_codes[r] != base.lse_codes[r]) {
      std::ostringstream os;
      os << element_name(p, r, true) << " = " << got.lse_values[r] << " ("
         << hex(got.lse_codes[r]) << "), baseline " << base.lse_values[r] << " ("
         << hex(base.lse_codes[r]) << ")";
      return Outcome::fail(os.str());
    }
  return Outcome::pass();
}

// One poisoned variant of the baseline: it changes some unowned data (false: not applicable)
// and may pre-fill the output and LSE views with other prior contents.
struct Variant {
  std::string name;
  std::function<bool(CaseData&)> apply;
  uint8_t guard = 0x00;
};

struct PoisonRun {
  PlanHint hint;
  uint8_t baseline_guard = 0x00;
  bool require_no_device_error = false;  // POISON-3: unowned entries never set PAGE_ID
  std::string note;                      // appended to the pass detail
};

Outcome run_variants(PropertyContext& ctx, const CaseData& base, const std::vector<Variant>& variants,
                     const PoisonRun& opt) {
  const Observed clean = observe(ctx.backend, base, opt.hint, opt.baseline_guard);
  if (auto o = run_failed(clean, "baseline")) return *o;
  if (clean.run.device_error != 0)
    return Outcome::fail("baseline: device error word " + hex(clean.run.device_error) +
                         " on a valid case");
  std::vector<std::string> ran, not_applicable;
  bool bitwise_skipped = false;
  for (const Variant& v : variants) {
    CaseData c = base;
    if (!v.apply(c)) {
      not_applicable.push_back(v.name);
      continue;
    }
    const Observed got = observe(ctx.backend, c, opt.hint, v.guard);
    if (auto o = run_failed(got, v.name.c_str())) return *o;
    if (opt.require_no_device_error && got.run.device_error != 0)
      return Outcome::fail(v.name + ": device error word " + hex(got.run.device_error) +
                           ": unowned block-table entries must never be checked");
    Outcome o = compare_runs(ctx, c, clean, got, bitwise_skipped);
    if (o.failed()) {
      o.detail = v.name + ": " + o.detail;
      return o;
    }
    ran.push_back(v.name);
  }
  if (ran.empty())
    return Outcome::not_applicable("no fill applies to this case: " + join(not_applicable));
  std::string detail = "fills: " + join(ran);
  if (!not_applicable.empty()) detail += "; not applicable: " + join(not_applicable);
  if (bitwise_skipped) detail += "; bitwise not checked (not deterministic or another plan)";
  if (!opt.note.empty()) detail += "; " + opt.note;
  return {Verdict::kPass, detail, 0};
}

// #7092's matrix asks for at least 2 padding columns (spec/properties.md PACTS-POISON-1).
CaseSpec with_padding_columns(const CaseSpec& spec) {
  CaseSpec s = spec;
  s.shape.bt_extra_cols = std::max(s.shape.bt_extra_cols, 2);
  return s;
}

// --- POISON-1 --------------------------------------------------------------------------------

Outcome unowned_rows_do_not_leak(PropertyContext& ctx, const CaseSpec& spec0) {
  const CaseSpec spec = with_padding_columns(spec0);
  CaseData base = spec.build();
  if (auto o = unsupported(ctx.backend, base.problem)) return *o;
  const Ownership own = owned_bytes(base);
  make_kv_baseline(base, own);
  std::vector<Variant> variants;
  for (Fill f : {Fill::kNaN, Fill::kInf, Fill::kMaxFinite, Fill::kRandom}) {
    const std::string name = std::string(fill_name(f)) + " in unowned " +
                             std::string(spec::format_name(base.problem.kv_format)) + " K/V rows";
    variants.push_back({name, [&own, f, &spec](CaseData& c) {
                          return poison_kv_data(c, own, f, spec.seed ^ 0x9e37u);
                        }});
  }
  return run_variants(ctx, base, variants, {plan_hint(spec), 0x00, false, {}});
}

// --- POISON-2 --------------------------------------------------------------------------------

bool has_scale_pools(const CaseShape& s) {
  const auto pooled = [](pacts_scale_mode m) {
    return m == PACTS_SCALE_PER_TOKEN || m == PACTS_SCALE_MX_BLOCK;
  };
  return pooled(s.k_scale_mode) || pooled(s.v_scale_mode);
}

// POISON-2 is only about per-token and e8m0 scales. A case without them is re-targeted, always
// the same way for the same spec: fp8 K/V get per-token scales, 16-bit K/V become e4m3fn with
// per-token scales or MXFP4 (by the seed's parity), dropping the K/V overrides whose codes
// belonged to the old format.
CaseSpec with_scale_pools(const CaseSpec& spec) {
  CaseSpec s = spec;
  CaseShape& sh = s.shape;
  if (has_scale_pools(sh)) return s;
  const bool sixteen = sh.kv_format == PACTS_FORMAT_BF16 || sh.kv_format == PACTS_FORMAT_FP16;
  if (sixteen) {
    sh.kv_format = (spec.seed & 1) ? PACTS_FORMAT_E2M1 : PACTS_FORMAT_E4M3FN;
    std::erase_if(s.overrides, [](const Override& o) { return o.tensor != Override::Tensor::kQ; });
  }
  const pacts_scale_mode mode =
      sh.kv_format == PACTS_FORMAT_E2M1 ? PACTS_SCALE_MX_BLOCK : PACTS_SCALE_PER_TOKEN;
  sh.k_scale_mode = mode;
  sh.v_scale_mode = mode;
  return s;
}

Outcome unowned_scales_do_not_leak(PropertyContext& ctx, const CaseSpec& spec0) {
  const bool retargeted = !has_scale_pools(spec0.shape);
  const CaseSpec spec = with_scale_pools(with_padding_columns(spec0));
  CaseData base = spec.build();
  if (auto o = unsupported(ctx.backend, base.problem)) {
    if (retargeted)
      o->detail = "the case has no per-token or MX scales, and its scaled twin is outside the "
                  "backend's capabilities: " + o->detail;
    return *o;
  }
  const Ownership own = owned_bytes(base);
  make_kv_baseline(base, own);
  std::vector<Variant> variants;
  for (Fill f : {Fill::kNaN, Fill::kInf, Fill::kMaxFinite, Fill::kNegative, Fill::kRandom})
    variants.push_back({std::string(fill_name(f)) + " in unowned scales",
                        [&own, f, &spec](CaseData& c) {
                          return poison_scales(c, own, f, spec.seed ^ 0x5ca1eu);
                        }});
  const std::string note =
      retargeted ? "the case had no pooled scales: re-targeted to " +
                       std::string(spec::format_name(spec.shape.kv_format)) +
                       (spec.shape.k_scale_mode == PACTS_SCALE_MX_BLOCK ? " with e8m0 block scales"
                                                                        : " with per-token scales")
                 : std::string{};
  return run_variants(ctx, base, variants, {plan_hint(spec), 0x00, false, note});
}

// --- POISON-3 --------------------------------------------------------------------------------

// Sets every unowned block-table entry (padding, pre-window columns, gaps between rows, and a
// tail after the view) from `value(i)`.
void fill_unowned_entries(CaseData& c, const Ownership& own,
                          const std::function<int32_t(size_t)>& value) {
  for (size_t i = 0; i < c.block_table.size(); ++i)
    if (i >= own.block_table.size() || !own.block_table[i]) c.block_table[i] = value(i);
}

Outcome block_table_padding_is_not_an_address(PropertyContext& ctx, const CaseSpec& spec0) {
  const CaseSpec spec = with_padding_columns(spec0);
  CaseData base = spec.build();
  if (auto o = unsupported(ctx.backend, base.problem)) return *o;
  // Half the cases also get unowned int32 between block-table rows (spec/properties.md §2).
  if (spec.seed & 2) widen_block_table(base, 3);
  const Ownership own = owned_bytes(base);
  make_kv_baseline(base, own);
  if (!base.block_table.empty()) base.block_table.resize(base.block_table.size() + 4, 0);
  const int32_t n = base.problem.num_pages;

  // The page ids the fills name: owned pages, and pages no owned entry names.
  std::vector<int32_t> owned_pages, free_pages;
  std::vector<uint8_t> named(static_cast<size_t>(n), 0);
  for (size_t i = 0; i < own.block_table.size(); ++i)
    if (own.block_table[i] && base.block_table[i] >= 0 && base.block_table[i] < n)
      named[static_cast<size_t>(base.block_table[i])] = 1;
  for (int32_t pg = 0; pg < n; ++pg) (named[static_cast<size_t>(pg)] ? owned_pages : free_pages).push_back(pg);

  std::vector<Variant> variants;
  const auto constant = [&](const std::string& name, int64_t value) {
    variants.push_back({"padding entries " + name, [&own, value](CaseData& c) {
                          fill_unowned_entries(c, own, [value](size_t) {
                            return static_cast<int32_t>(value);
                          });
                          return true;
                        }});
  };
  constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
  constant("-1", -1);
  constant("INT32_MIN", kMin);
  constant("INT32_MAX", kMax);
  constant("N", n);
  if (n < kMax) constant("N+1", int64_t{n} + 1);
  variants.push_back({"padding entries garbage ints", [&own, &spec](CaseData& c) {
                        Rng rng(spec.seed ^ 0xb7u);
                        fill_unowned_entries(c, own, [&rng](size_t) {
                          return static_cast<int32_t>(static_cast<uint32_t>(rng.next()));
                        });
                        return true;
                      }});
  // Entries naming real pages whose unowned rows and scales hold NaN.
  const auto pages = [&](const std::string& name, const std::vector<int32_t>& ids) {
    variants.push_back({"padding entries " + name, [&own, ids, &spec](CaseData& c) {
                          if (ids.empty()) return false;
                          poison_all_data(c, own, spec.seed ^ 0xda7au);
                          fill_unowned_entries(c, own, [&ids](size_t i) { return ids[i % ids.size()]; });
                          return true;
                        }});
  };
  pages("naming owned pages (their unowned rows NaN)", owned_pages);
  pages("naming NaN-filled free pages", free_pages);
  pages("0 with page 0 poisoned", n > 0 ? std::vector<int32_t>{0} : std::vector<int32_t>{});
  const std::string note = base.problem.block_table_stride > base.problem.max_pages_per_seq
                               ? "block_table_stride " +
                                     std::to_string(base.problem.block_table_stride) + " > M " +
                                     std::to_string(base.problem.max_pages_per_seq)
                               : std::string{};
  return run_variants(ctx, base, variants, {plan_hint(spec), 0x00, true, note});
}

// --- POISON-4 --------------------------------------------------------------------------------

bool sequence_valid(const pacts_problem& p, int32_t ctx) {
  return ctx >= 0 && int64_t{ctx} <= int64_t{p.max_pages_per_seq} * p.page_size;
}

// Owned Q bytes (the D elements of every non-empty row, spec/contract.md §1.1) and owned sinks
// (heads with a non-empty row: every head, as soon as one valid sequence has a key).
struct QueryOwnership {
  std::vector<uint8_t> q, sinks;
};

QueryOwnership owned_query(const CaseData& c) {
  const pacts_problem& p = c.problem;
  QueryOwnership own;
  own.q.assign(c.q.size(), 0);
  own.sinks.assign(c.sinks.size(), 0);
  const int64_t qb = spec::element_bytes(p.q_format);
  bool any_row = false;
  for (int64_t b = 0; b < p.batch; ++b) {
    const int32_t n = c.context_lens[static_cast<size_t>(b)];
    if (!sequence_valid(p, n)) continue;
    for (int64_t i = 0; i < p.q_len; ++i) {
      if (n - p.q_len + i < 0) continue;  // empty row: its Q is unowned
      any_row = true;
      for (int64_t h = 0; h < p.num_q_heads; ++h) {
        const int64_t at = b * p.q_layout.s_batch + i * p.q_layout.s_tok + h * p.q_layout.s_head;
        std::fill_n(own.q.begin() + at * qb, p.head_dim * qb, uint8_t{1});
      }
    }
  }
  if (any_row) std::fill(own.sinks.begin(), own.sinks.end(), uint8_t{1});
  return own;
}

Outcome query_and_output_gaps_do_not_leak(PropertyContext& ctx, const CaseSpec& spec) {
  CaseData base = spec.build();
  const QueryOwnership own = owned_query(base);
  for (size_t i = 0; i < base.q.size(); ++i)
    if (!own.q[i]) base.q[i] = 0;
  for (size_t i = 0; i < base.sinks.size(); ++i)
    if (!own.sinks[i]) base.sinks[i] = 0;
  if (!base.q.empty()) base.q.resize(base.q.size() + kViewTailBytes, 0);
  const bool unowned_sinks = std::count(own.sinks.begin(), own.sinks.end(), 0) > 0;

  std::vector<Variant> variants;
  for (Fill f : {Fill::kNaN, Fill::kInf, Fill::kRandom}) {
    // Prior contents of the output and LSE views: 0xFF bytes are NaN in bf16, fp16 and fp32.
    const uint8_t guard = f == Fill::kRandom ? 0xA5 : 0xFF;
    variants.push_back(
        {std::string(fill_name(f)) + " in Q gaps, empty rows' Q, unowned sinks and prior output",
         [&own, f, &spec, unowned_sinks](CaseData& c) {
           const auto q_pattern = fill_pattern(c.problem.q_format, f);
           const auto sink_pattern = fill_pattern(PACTS_FORMAT_FP32, f);
           if (!q_pattern && !unowned_sinks) return false;
           Rng rng(spec.seed ^ 0x9a9u);
           if (q_pattern) poison_bytes(c.q, own.q, *q_pattern, rng);
           if (sink_pattern) poison_bytes(c.sinks, own.sinks, *sink_pattern, rng);
           return true;
         },
         guard});
  }
  const pacts_problem& p = base.problem;
  std::ostringstream note;
  note << "q_layout.s_head " << p.q_layout.s_head << " (D " << p.head_dim << ")";
  return run_variants(ctx, base, variants, {plan_hint(spec), 0x00, false, note.str()});
}

// --- POISON-5 --------------------------------------------------------------------------------

// Backends have no caller-visible workspace yet (conformance/backend.h): the only prior state a
// call can see is the output and LSE views themselves. So this checks, under split plans with
// many (often empty) partitions, that different garbage there changes no bit of the result: a
// merge that reads an unwritten partition slot it keeps in the output would show it.
Outcome workspace_contents_do_not_leak(PropertyContext& ctx, const CaseSpec& spec) {
  const CaseData base = spec.build();
  const PlanHint hint = (spec.seed & 1) ? PlanHint::partitions(16)
                                        : PlanHint::partition_size(std::max(spec.shape.page_size / 2, 1));
  const auto unchanged = [](CaseData&) { return true; };
  const std::vector<Variant> variants = {
      {"prior output/LSE bytes 0xFF (NaN)", unchanged, 0xFF},
      {"prior output/LSE bytes 0x5A", unchanged, 0x5A},
  };
  return run_variants(ctx, base, variants,
                      {hint, 0x00, false,
                       "no workspace API yet: checked as the prior contents of the output and "
                       "LSE views under a split plan hint"});
}

// --- POISON-6 --------------------------------------------------------------------------------

// A row that sees no key of a partition of its sequence must take nothing from that partition:
// with L > 1 and n = 16k + r (1 <= r < L), the last 16-key partition holds only keys of the later
// query tokens, so query token 0 sees none of it. The partial slot of that row is never written
// by a correct kernel; a merge that weights it by e^(-inf - m) = 0 reads it anyway (0 * NaN), and
// an unwritten slot holds whatever the workspace held (the host adapter fills it with NaN bytes
// and with 0x5A bytes on alternate runs). Two runs of one plan: both within tolerance, and equal.
Outcome invisible_partials_do_not_leak(PropertyContext& ctx, const CaseSpec& spec0) {
  CaseSpec spec = spec0;
  CaseShape& sh = spec.shape;
  const int32_t l = std::max(sh.q_len, 2);
  sh.q_len = l;
  sh.contexts.assign(static_cast<size_t>(sh.batch), 0);
  for (int32_t b = 0; b < sh.batch; ++b)
    sh.contexts[static_cast<size_t>(b)] =
        16 * (1 + static_cast<int32_t>((spec.seed >> (2 * (b % 16))) % 3)) + 1 + b % (l - 1);
  const CaseData c = spec.build();
  if (auto o = unsupported(ctx.backend, c.problem)) return *o;
  const PlanHint hint = PlanHint::partition_size(16);
  const Observed first = observe(ctx.backend, c, hint), second = observe(ctx.backend, c, hint);
  if (auto o = run_failed(first, "PACTS-POISON-6")) return *o;
  if (auto o = run_failed(second, "PACTS-POISON-6 (second run)")) return *o;
  const reference::Output ref = reference_answer(c, ctx.backend);
  for (const Observed* o : {&first, &second}) {
    const Outcome v = within_tolerance(ctx.backend, c.problem, *o, ref);
    if (v.failed()) return v;
  }
  return same_bits(first, second, "two runs of one split plan (16-key partitions)");
}

}  // namespace

std::vector<Property> poison_properties() {
  // Every poison check runs the backend once per fill (up to 10 times): a quarter of the default
  // reference budget keeps a case's cost near that of one ACC-1 case.
  GenLimits limits;
  limits.max_reference_work = int64_t{1} << 20;
  return {
      make_property("PACTS-POISON-1", "UnownedRowsDoNotLeak", Level::kMandatory, true, limits, unowned_rows_do_not_leak),
      make_property("PACTS-POISON-2", "UnownedScalesDoNotLeak", Level::kMandatory, true, limits, unowned_scales_do_not_leak),
      make_property("PACTS-POISON-3", "BlockTablePaddingIsNotAnAddress", Level::kMandatory, true, limits,
           block_table_padding_is_not_an_address),
      make_property("PACTS-POISON-4", "QueryAndOutputGapsDoNotLeak", Level::kMandatory, true, limits,
           query_and_output_gaps_do_not_leak),
      make_property("PACTS-POISON-5", "WorkspaceContentsDoNotLeak", Level::kMandatory, true, limits, workspace_contents_do_not_leak),
      make_property("PACTS-POISON-6", "InvisiblePartialsDoNotLeak", Level::kMandatory, true, limits,
                    invisible_partials_do_not_leak),
  };
}

}  // namespace pacts::conformance
