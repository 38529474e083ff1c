// The fault-injecting backend (fault_backend.h). Every fault is one real bug class, planted by
// changing what the wrapper passes to the inner backend or what it returns, and documented with
// the spec clause it violates and the properties expected to catch it.
//
// Faults that touch data run only on calls the validator accepts: a refused call is delegated
// unchanged, so that the fault changes nothing but its own bug (write_before_validate is the one
// fault whose bug is the order of validation and writing).
#include <pacts/conformance/fault_backend.h>
#include <pacts/spec/formats.h>
#include <pacts/spec/validate.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>

namespace pacts::conformance {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct FaultInfo {
  Fault fault;
  const char* name;
  spec::BugClass bug_class;  // its class in the one table (pacts/spec/bug_classes.h)
};

constexpr FaultInfo kFaults[] = {
    {Fault::kVTailLeak, "v_tail_leak", spec::BugClass::unowned_data_leak},
    {Fault::kPaddingEntryAsPage, "padding_entry_as_page", spec::BugClass::unowned_data_leak},
    {Fault::kVScaleTailLeak, "v_scale_tail_leak", spec::BugClass::unowned_data_leak},
    {Fault::kCausalOffByOne, "causal_off_by_one", spec::BugClass::mask_bounds},
    {Fault::kWindowPlusOne, "window_plus_one", spec::BugClass::mask_bounds},
    {Fault::kWindowMinusOne, "window_minus_one", spec::BugClass::mask_bounds},
    {Fault::kOutputTruncated, "output_truncated", spec::BugClass::output_rounding},
    {Fault::kMergeWrongMax, "merge_wrong_max", spec::BugClass::split_merge},
    {Fault::kLseBase2, "lse_base2", spec::BugClass::lse_convention},
    {Fault::kSinkScaled, "sink_scaled", spec::BugClass::sink_handling},
    {Fault::kEmptyRowNegativeZero, "empty_row_negative_zero", spec::BugClass::empty_rows},
    {Fault::kOutputGapWrite, "output_gap_write", spec::BugClass::write_set},
    {Fault::kWriteBeforeValidate, "write_before_validate", spec::BugClass::write_set},
    {Fault::kDeviceErrorDropped, "device_error_dropped", spec::BugClass::device_preconditions},
    {Fault::kNeighbourStateLeak, "neighbour_state_leak", spec::BugClass::empty_rows},
    {Fault::kFalseNotSupported, "false_not_supported", spec::BugClass::false_refusal},
    {Fault::kInvariantPlanFromBatch, "invariant_plan_from_batch", spec::BugClass::plan_dependence},
    {Fault::kTinyVScalesFlushed, "tiny_v_scales_flushed", spec::BugClass::scale_application},
    {Fault::kWindowPageEdge, "window_page_edge", spec::BugClass::mask_bounds},
    {Fault::kNanCrossesSequences, "nan_crosses_sequences", spec::BugClass::unowned_data_leak},
    {Fault::kGroupRowsAbove8Dropped, "group_rows_above_8_dropped", spec::BugClass::row_mapping},
    {Fault::kNanAtSplitCount7, "nan_at_split_count_7", spec::BugClass::split_merge},
};

// ---------------------------------------------------------------------------------------------
// Raw access to the views (every index has been proved in range by validation and ownership).

template <class T>
T load(const pacts_view& view, int64_t index) {
  T x;
  std::memcpy(&x, static_cast<const uint8_t*>(view.data) + index * int64_t{sizeof(T)}, sizeof x);
  return x;
}

template <class T>
void store(const pacts_view& view, int64_t index, T x) {
  std::memcpy(static_cast<uint8_t*>(view.data) + index * int64_t{sizeof(T)}, &x, sizeof x);
}

uint32_t load_code(const pacts_view& view, int64_t element, int bytes) {
  uint32_t code = 0;
  std::memcpy(&code, static_cast<const uint8_t*>(view.data) + element * bytes,
              static_cast<size_t>(bytes));
  return code;
}

void store_code(const pacts_view& view, int64_t element, int bytes, uint32_t code) {
  std::memcpy(static_cast<uint8_t*>(view.data) + element * bytes, &code, static_cast<size_t>(bytes));
}

// The quiet NaN code of an output format (bf16, fp16 or fp32).
uint32_t quiet_nan_code(pacts_format f) {
  return f == PACTS_FORMAT_FP32 ? 0x7FC00000u : f == PACTS_FORMAT_FP16 ? 0x7E00u : 0x7FC0u;
}

// A private copy of a read view's bytes (what a faulty kernel "reads" instead of the caller's).
std::vector<uint8_t> copy_of(const pacts_view& view) {
  const auto* bytes = static_cast<const uint8_t*>(view.data);
  return bytes == nullptr ? std::vector<uint8_t>{} : std::vector<uint8_t>(bytes, bytes + view.bytes);
}

int64_t row_at(const pacts_row_layout& l, int64_t b, int64_t i, int64_t h) {
  return b * l.s_batch + i * l.s_tok + h * l.s_head;
}

int64_t pool_at(const pacts_pool_layout& l, int64_t page, int64_t head, int64_t slot, int64_t unit) {
  return page * l.s_page + head * l.s_head + slot * l.s_tok + (unit / l.chunk) * l.s_chunk +
         unit % l.chunk;
}

int64_t scale_at(const pacts_scale_layout& l, int64_t page, int64_t head, int64_t slot) {
  return page * l.s_page + head * l.s_head + slot * l.s_tok;
}

int64_t context_of(const pacts_buffers& b, int64_t seq) { return load<int32_t>(b.context_lens, seq); }

// spec/contract.md §4 P1.
bool context_valid(const pacts_problem& p, int64_t n) {
  return n >= 0 && n <= int64_t{p.max_pages_per_seq} * p.page_size;
}

int32_t entry(const pacts_problem& p, const pacts_buffers& b, int64_t seq, int64_t column) {
  return load<int32_t>(b.block_table, seq * p.block_table_stride + column);
}

bool page_valid(const pacts_problem& p, int64_t page) { return page >= 0 && page < p.num_pages; }

// spec/operator.md §5: row (seq, i) is empty when pos = n - L + i < 0.
bool row_empty(const pacts_problem& p, int64_t n, int64_t i) { return n - p.q_len + i < 0; }

// ---------------------------------------------------------------------------------------------
// V values (spec/operator.md §3.2-§3.4, §7), decoded the way a kernel would load them.

// The scale factor of V element d of (page, head, slot) under the problem's V scale mode.
double v_scale_of(const pacts_problem& p, const pacts_buffers& b, int64_t page, int64_t head,
                  int64_t slot, int64_t d) {
  const int64_t at = scale_at(p.v_scale_layout, page, head, slot);
  switch (p.v_scale_mode) {
    case PACTS_SCALE_NONE: return 1.0;
    case PACTS_SCALE_PER_TENSOR: return p.v_scale;
    case PACTS_SCALE_PER_TOKEN: return load<float>(b.v_scale, at);
    case PACTS_SCALE_MX_BLOCK:
      return spec::decode_e8m0(load<uint8_t>(b.v_scale, at + (d / 32) * p.v_scale_layout.s_block));
    default: return kNaN;  // validated problems have no other mode
  }
}

// decode(code) of V element d of (page, head, slot), without its scale.
double v_code_of(const pacts_problem& p, const pacts_buffers& b, int64_t page, int64_t head,
                 int64_t slot, int64_t d) {
  if (p.kv_format == PACTS_FORMAT_E2M1) {
    const uint8_t byte = load<uint8_t>(b.v, pool_at(p.v_layout, page, head, slot, d / 2));
    const bool high = (d % 2 == 1) == (p.nibble_order == PACTS_NIBBLE_LOW_FIRST);
    return spec::decode_e2m1(high ? byte >> 4 : byte & 0xF);
  }
  const int eb = spec::element_bytes(p.kv_format);
  return spec::decode(p.kv_format, load_code(b.v, pool_at(p.v_layout, page, head, slot, d), eb));
}

// ---------------------------------------------------------------------------------------------
// Output edits.

// out[element] += leak, computed in binary64 and rounded once to out_format. A zero leak (the
// 0 * v of a finite v) is skipped rather than added: -0 + +0 = +0 would change the bits of a -0
// output, whereas the bug being modelled leaves clean runs bit-identical (#7092 in
// docs/bug-classes.md).
void add_leak(const pacts_problem& p, const pacts_view& out, int64_t element, double leak) {
  if (leak == 0) return;
  const int ob = spec::element_bytes(p.out_format);
  const double x = spec::decode(p.out_format, load_code(out, element, ob));
  store_code(out, element, ob, spec::encode(p.out_format, x + leak, spec::Overflow::kNonSaturate));
}

void fill_row(const pacts_problem& p, const pacts_view& out, int64_t seq, int64_t i, int64_t h,
              double value) {
  const int ob = spec::element_bytes(p.out_format);
  const uint32_t code = spec::encode(p.out_format, value, spec::Overflow::kNonSaturate);
  const int64_t at = row_at(p.out_layout, seq, i, h);
  for (int64_t d = 0; d < p.head_dim; ++d) store_code(out, at + d, ob, code);
}

// Adds leak[kv_head][d] to element d of every non-empty row of sequence `seq`.
void leak_into_sequence(const pacts_problem& p, const pacts_buffers& b, int64_t seq,
                        const std::vector<std::vector<double>>& leak) {
  const int64_t n = context_of(b, seq), group = p.num_q_heads / p.num_kv_heads;
  for (int64_t i = 0; i < p.q_len; ++i) {
    if (row_empty(p, n, i)) continue;
    for (int64_t h = 0; h < p.num_q_heads; ++h) {
      const int64_t at = row_at(p.out_layout, seq, i, h);
      for (int64_t d = 0; d < p.head_dim; ++d)
        add_leak(p, b.out, at + d, leak[static_cast<size_t>(h / group)][static_cast<size_t>(d)]);
    }
  }
}

// The page holding the unowned tail of sequence `seq` (spec/contract.md §1.2: slots n % P .. P-1
// of its last page), or -1 when it has none, or when the kernel would have flagged the sequence
// (its rows are NaN anyway).
int64_t tail_page(const pacts_problem& p, const pacts_buffers& b, int64_t seq) {
  const int64_t n = context_of(b, seq);
  if (n <= 0 || !context_valid(p, n) || n % p.page_size == 0) return -1;
  const int64_t page = entry(p, b, seq, (n - 1) / p.page_size);
  return page_valid(p, page) ? page : -1;
}

// ---------------------------------------------------------------------------------------------

class FaultBackend final : public Backend {
 public:
  // The faults are planted in run() only, so the wrapper does not offer plan replay.
  FaultBackend(std::unique_ptr<Backend> inner, Fault fault)
      : inner_(std::move(inner)), fault_(fault), caps_(inner_->capabilities()) {
    caps_.plan_replay = false;
  }

  std::string name() const override { return inner_->name() + "+" + fault_name(fault_); }
  std::string device() const override { return inner_->device(); }
  const Capabilities& capabilities() const override { return caps_; }
  const spec::NumericsProfile& profile() const override { return inner_->profile(); }

  RunResult run(const pacts_problem& p, const pacts_buffers& b, const PlanHint& hint) override {
    if (fault_ == Fault::kWriteBeforeValidate) return write_before_validate(p, b, hint);
    if (!spec::validate(p, b, capabilities().requirements).is_ok()) return inner_->run(p, b, hint);
    switch (fault_) {
      case Fault::kVTailLeak: return v_tail_leak(p, b, hint);
      case Fault::kPaddingEntryAsPage: return padding_entry_as_page(p, b, hint);
      case Fault::kVScaleTailLeak: return v_scale_tail_leak(p, b, hint);
      case Fault::kCausalOffByOne: return causal_off_by_one(p, b, hint);
      case Fault::kWindowPlusOne: return window_off_by_one(p, b, hint, +1);
      case Fault::kWindowMinusOne: return window_off_by_one(p, b, hint, -1);
      case Fault::kOutputTruncated: return output_truncated(p, b, hint);
      case Fault::kMergeWrongMax: return merge_wrong_max(p, b, hint);
      case Fault::kLseBase2: return lse_base2(p, b, hint);
      case Fault::kSinkScaled: return sink_scaled(p, b, hint);
      case Fault::kEmptyRowNegativeZero: return empty_row_negative_zero(p, b, hint);
      case Fault::kOutputGapWrite: return output_gap_write(p, b, hint);
      case Fault::kDeviceErrorDropped: return device_error_dropped(p, b, hint);
      case Fault::kNeighbourStateLeak: return neighbour_state_leak(p, b, hint);
      case Fault::kFalseNotSupported: return false_not_supported(p, b, hint);
      case Fault::kInvariantPlanFromBatch: return invariant_plan_from_batch(p, b, hint);
      case Fault::kTinyVScalesFlushed: return tiny_v_scales_flushed(p, b, hint);
      case Fault::kWindowPageEdge: return window_page_edge(p, b, hint);
      case Fault::kNanCrossesSequences: return nan_crosses_sequences(p, b, hint);
      case Fault::kGroupRowsAbove8Dropped: return group_rows_above_8_dropped(p, b, hint);
      case Fault::kNanAtSplitCount7: return nan_at_split_count_7(p, b, hint);
      case Fault::kWriteBeforeValidate: break;
    }
    return inner_->run(p, b, hint);
  }

 private:
  // v_tail_leak. Bug class: #7092 (docs/bug-classes.md). The tile kernel reads whole tiles; on the
  // last page the unwritten tail slots get P = 0 but their V bytes still enter the P.V instruction,
  // and 0 * NaN = NaN, 0 * Inf = NaN. Modelled as: after the inner run, element d of every
  // non-empty row of a sequence gets 0 * v_{t,d} (decoded with its scale) for every unowned tail
  // slot t of its KV head. Finite tails change no bit; NaN/Inf tails make the elements NaN.
  // Violates spec/contract.md §1.2 (tail of the last page is unowned) and §5 (discard by
  // selection, never by multiplication). Expected catcher: PACTS-POISON-1 (spec/properties.md
  // §10 also names EDGE-3, which can see it only on cases whose unowned tail is poisoned).
  RunResult v_tail_leak(const pacts_problem& p, const pacts_buffers& b, const PlanHint& hint) {
    RunResult r = inner_->run(p, b, hint);
    if (!r.status.is_ok()) return r;
    for (int64_t seq = 0; seq < p.batch; ++seq) {
      const int64_t page = tail_page(p, b, seq);
      if (page < 0) continue;
      const int64_t first_slot = context_of(b, seq) % p.page_size;
      auto leak = zero_leak(p);
      for (int64_t kvh = 0; kvh < p.num_kv_heads; ++kvh)
        for (int64_t t = first_slot; t < p.page_size; ++t)
          for (int64_t d = 0; d < p.head_dim; ++d)
            leak[kvh][d] += 0.0 * (v_code_of(p, b, page, kvh, t, d) * v_scale_of(p, b, page, kvh, t, d));
      leak_into_sequence(p, b, seq, leak);
    }
    return r;
  }

  // padding_entry_as_page. Bug class: #7092 (block-table entries past the sequence
  // pinned to page 0, "page 0 must stay finite" pushed onto callers) and FlyDSL's prefetch of a
  // block-table entry outside the sequence (spec/operator.md §12). The kernel loads the first
  // padding entry, column ceil(n / P), as a page id: in range, that page's V row 0 enters P.V
  // with P = 0 (0 * v added as in v_tail_leak); out of range, the load reads garbage and the
  // sequence's rows are written as NaN. Clean cases (padding 0, page 0 finite) change no bit.
  // Violates spec/contract.md §1.2 (padding entries are not addresses) and §5.
  // Expected catchers: PACTS-POISON-3, PACTS-POISON-1.
  RunResult padding_entry_as_page(const pacts_problem& p, const pacts_buffers& b,
                                  const PlanHint& hint) {
    RunResult r = inner_->run(p, b, hint);
    if (!r.status.is_ok()) return r;
    for (int64_t seq = 0; seq < p.batch; ++seq) {
      const int64_t n = context_of(b, seq);
      const int64_t column = (n + p.page_size - 1) / p.page_size;
      if (n <= 0 || !context_valid(p, n) || column >= p.max_pages_per_seq) continue;
      const int64_t page = entry(p, b, seq, column);
      auto leak = zero_leak(p);
      for (int64_t kvh = 0; kvh < p.num_kv_heads; ++kvh)
        for (int64_t d = 0; d < p.head_dim; ++d)
          leak[kvh][d] = page_valid(p, page)
                             ? 0.0 * (v_code_of(p, b, page, kvh, 0, d) * v_scale_of(p, b, page, kvh, 0, d))
                             : kNaN;
      leak_into_sequence(p, b, seq, leak);
    }
    return r;
  }

  // v_scale_tail_leak. Bug class: #7092, the per-token V scale hole: P * v_scale is
  // formed for the tail slots past the context too, and 0 * NaN = NaN. Modelled as v_tail_leak
  // with only the scale: element d gets 0 * scale(t, d) for every unowned tail slot t (per-token
  // fp32 scales, and the e8m0 byte of d's block under MX_BLOCK). Other scale modes: no effect.
  // Violates spec/contract.md §1.2 (scales of unowned slots) and §5. Expected: PACTS-POISON-2.
  RunResult v_scale_tail_leak(const pacts_problem& p, const pacts_buffers& b, const PlanHint& hint) {
    RunResult r = inner_->run(p, b, hint);
    if (!r.status.is_ok()) return r;
    if (p.v_scale_mode != PACTS_SCALE_PER_TOKEN && p.v_scale_mode != PACTS_SCALE_MX_BLOCK) return r;
    for (int64_t seq = 0; seq < p.batch; ++seq) {
      const int64_t page = tail_page(p, b, seq);
      if (page < 0) continue;
      auto leak = zero_leak(p);
      for (int64_t kvh = 0; kvh < p.num_kv_heads; ++kvh)
        for (int64_t t = context_of(b, seq) % p.page_size; t < p.page_size; ++t)
          for (int64_t d = 0; d < p.head_dim; ++d) leak[kvh][d] += 0.0 * v_scale_of(p, b, page, kvh, t, d);
      leak_into_sequence(p, b, seq, leak);
    }
    return r;
  }

  // tiny_v_scales_flushed. Bug class: a kernel that takes a per-token V scale into its matrix
  // path by exponent (code x 2^e) and flushes, or sends to a path it then skips, the keys whose
  // products would fall below the path's range (kernels/hip's mutant hip_tiny_keys_dropped is
  // this bug in its fold). Modelled by running the inner backend with every per-token V scale
  // below 2^-90 read as 0. Violates spec/operator.md §7 (the scale multiplies the value) and
  // spec/contract.md R2 (such values are in range). Expected catcher: PACTS-EDGE-5 (its values
  // near 2^-100); other cases hold no such scale.
  RunResult tiny_v_scales_flushed(const pacts_problem& p, const pacts_buffers& b, const PlanHint& hint) {
    if (p.v_scale_mode != PACTS_SCALE_PER_TOKEN) return inner_->run(p, b, hint);
    std::vector<uint8_t> copy = copy_of(b.v_scale);
    for (size_t at = 0; at + 4 <= copy.size(); at += 4) {
      float s;
      std::memcpy(&s, &copy[at], 4);
      if (std::fabs(s) < 0x1p-90f) s = 0.0f;
      std::memcpy(&copy[at], &s, 4);
    }
    pacts_buffers flushed = b;
    flushed.v_scale = pacts_view{copy.data(), copy.size()};
    return inner_->run(p, flushed, hint);
  }

  // causal_off_by_one. Bug class: a causal bound written `j <= pos + 1` (or a position computed
  // as n - L + i + 1), so every row sees one key past its own position. Modelled by running the
  // inner backend with every context length + 1 where the block table has room (the caller's
  // context lengths are left untouched: the copy is what the kernel "reads"). An empty sequence
  // thereby sees key 0 through its first (padding) entry, as such a kernel would.
  // Violates spec/operator.md §5. Expected: PACTS-ACC-1, PACTS-EDGE-1.
  RunResult causal_off_by_one(const pacts_problem& p, const pacts_buffers& b, const PlanHint& hint) {
    std::vector<uint8_t> copy = copy_of(b.context_lens);
    const pacts_view ctx{copy.data(), copy.size()};
    for (int64_t seq = 0; seq < p.batch; ++seq) {
      const int64_t n = context_of(b, seq);
      if (context_valid(p, n) && n < int64_t{p.max_pages_per_seq} * p.page_size)
        store<int32_t>(ctx, seq, static_cast<int32_t>(n + 1));
    }
    pacts_buffers shifted = b;
    shifted.context_lens = ctx;
    return inner_->run(p, shifted, hint);
  }

  // window_plus_one / window_minus_one. Bug class: the window conventions of other stacks taken
  // for pacts' (spec/operator.md §6 table): FlyDSL upstream shows W + 1 keys, Gluon W - 1 (L = 1).
  // Modelled by running the inner backend with window W + 1, or W - 1 when W >= 2 (W - 1 = 0
  // would mean "no window", another bug). Violates spec/operator.md §6.
  // Expected: PACTS-ACC-1, PACTS-META-10.
  RunResult window_off_by_one(const pacts_problem& p, const pacts_buffers& b, const PlanHint& hint,
                              int delta) {
    if (p.window == 0 || p.window + delta < 1 || p.window == std::numeric_limits<int32_t>::max())
      return inner_->run(p, b, hint);
    pacts_problem q = p;
    q.window = p.window + delta;
    return inner_->run(q, b, hint);
  }

  // window_page_edge. Bug class: a kernel that finds a window's first page from the window in
  // whole pages and is off by one key exactly where the window is one key off a page multiple
  // (tokenspeed #578): W = k P + 1 keys read as k P (the oldest key lost), W = k P - 1 as k P (one
  // key too many), k >= 1; every other window right. Modelled by running the inner backend with
  // that window. Violates spec/operator.md §6. Expected: PACTS-ACC-1, which draws windows at page
  // multiples +- 1 (spec/properties.md §2).
  RunResult window_page_edge(const pacts_problem& p, const pacts_buffers& b, const PlanHint& hint) {
    const int32_t w = p.window, page = p.page_size;
    if (w <= 0 || w == std::numeric_limits<int32_t>::max() || page < 3 || w < page - 1)
      return inner_->run(p, b, hint);
    const int32_t r = w % page;
    if (r != 1 && r != page - 1) return inner_->run(p, b, hint);
    pacts_problem q = p;
    q.window = r == 1 ? w - 1 : w + 1;
    return inner_->run(q, b, hint);
  }

  // nan_crosses_sequences. Bug class: one sequence's non-finite data reaching the rows of the
  // others (flashinfer #942: NaN in one request's pages turned the whole batch NaN), as a
  // batch-wide maximum or sum would. Modelled by running the inner backend and, when any output
  // element is NaN, writing NaN into every element of every other sequence's non-empty rows.
  // Violates spec/contract.md §2.3 (a violation of the range contract affects only its own
  // sequence). Expected: PACTS-EDGE-4 (its Mandatory part: rows of other sequences).
  RunResult nan_crosses_sequences(const pacts_problem& p, const pacts_buffers& b,
                                  const PlanHint& hint) {
    RunResult r = inner_->run(p, b, hint);
    if (!r.status.is_ok()) return r;
    const int ob = spec::element_bytes(p.out_format);
    int64_t tainted = -1;
    for (int64_t seq = 0; seq < p.batch && tainted < 0; ++seq)
      for (int64_t i = 0; i < p.q_len && tainted < 0; ++i)
        for (int64_t h = 0; h < p.num_q_heads && tainted < 0; ++h)
          for (int64_t d = 0; d < p.head_dim; ++d)
            if (spec::is_nan_code(p.out_format, load_code(b.out, row_at(p.out_layout, seq, i, h) + d, ob))) {
              tainted = seq;
              break;
            }
    if (tainted < 0) return r;
    const uint32_t nan = quiet_nan_code(p.out_format);
    for (int64_t seq = 0; seq < p.batch; ++seq) {
      const int64_t n = context_of(b, seq);
      if (seq == tainted || !context_valid(p, n)) continue;
      for (int64_t i = 0; i < p.q_len; ++i) {
        if (row_empty(p, n, i)) continue;
        for (int64_t h = 0; h < p.num_q_heads; ++h)
          for (int64_t d = 0; d < p.head_dim; ++d)
            store_code(b.out, row_at(p.out_layout, seq, i, h) + d, ob, nan);
      }
    }
    return r;
  }

  // group_rows_above_8_dropped. Bug class: a code path sized for at most 8 query heads per KV
  // head (b12x #24: groups above 8 dropped rows on one path). Modelled by running the inner
  // backend and writing zeros over the output of every query head whose index in its group is 8
  // or more (and an LSE of 0). Violates spec/operator.md §4-§5. Expected: PACTS-ACC-1, whose
  // generator draws groups up to 64.
  RunResult group_rows_above_8_dropped(const pacts_problem& p, const pacts_buffers& b,
                                       const PlanHint& hint) {
    RunResult r = inner_->run(p, b, hint);
    const int64_t group = p.num_kv_heads > 0 ? p.num_q_heads / p.num_kv_heads : 0;
    if (!r.status.is_ok() || group <= 8) return r;
    const int ob = spec::element_bytes(p.out_format);
    for (int64_t seq = 0; seq < p.batch; ++seq)
      for (int64_t i = 0; i < p.q_len; ++i)
        for (int64_t h = 0; h < p.num_q_heads; ++h) {
          if (h % group < 8) continue;
          for (int64_t d = 0; d < p.head_dim; ++d)
            store_code(b.out, row_at(p.out_layout, seq, i, h) + d, ob, 0u);
          if (p.want_lse) store<float>(b.lse, row_at(p.lse_layout, seq, i, h), 0.0f);
        }
    return r;
  }

  // nan_at_split_count_7. Bug class: a merge that is wrong at one split count only (aiter #4350:
  // NaN at one partition count), which a suite that tries a few counts never meets. Modelled by
  // running the inner backend and, when the plan hint asks for exactly 7 partitions, writing NaN
  // into the first element of every non-empty row of every valid sequence. Violates
  // spec/operator.md §9. Expected: PACTS-META-3, which asks for every count 2..64 on short
  // contexts.
  RunResult nan_at_split_count_7(const pacts_problem& p, const pacts_buffers& b,
                                 const PlanHint& hint) {
    RunResult r = inner_->run(p, b, hint);
    if (!r.status.is_ok() || hint.kind != PlanHint::Kind::kPartitions || hint.value != 7) return r;
    const int ob = spec::element_bytes(p.out_format);
    const uint32_t nan = quiet_nan_code(p.out_format);
    for (int64_t seq = 0; seq < p.batch; ++seq) {
      const int64_t n = context_of(b, seq);
      if (!context_valid(p, n)) continue;
      for (int64_t i = 0; i < p.q_len; ++i) {
        if (row_empty(p, n, i)) continue;
        for (int64_t h = 0; h < p.num_q_heads; ++h) store_code(b.out, row_at(p.out_layout, seq, i, h), ob, nan);
      }
    }
    return r;
  }

  // output_truncated. Bug class: the fp32 accumulator converted to bf16/fp16 by dropping bits
  // (a raw `>> 16`, or a round-toward-zero conversion instruction) instead of RNE. Modelled by
  // running the inner backend with fp32 output into a scratch buffer of the same layout and
  // truncating each element toward zero into out_format. fp32 output: no effect.
  // Violates spec/operator.md §9 (rounded once, RNE). Expected: PACTS-ACC-1, PACTS-ACC-3.
  RunResult output_truncated(const pacts_problem& p, const pacts_buffers& b, const PlanHint& hint) {
    if (p.out_format == PACTS_FORMAT_FP32) return inner_->run(p, b, hint);
    pacts_problem wide = p;
    wide.out_format = PACTS_FORMAT_FP32;
    std::vector<uint8_t> scratch(spec::required_extents(wide).out);
    pacts_buffers wb = b;
    wb.out = {scratch.data(), scratch.size()};
    RunResult r = inner_->run(wide, wb, hint);
    if (!r.status.is_ok()) return r;
    const int ob = spec::element_bytes(p.out_format);
    for (int64_t seq = 0; seq < p.batch; ++seq)
      for (int64_t i = 0; i < p.q_len; ++i)
        for (int64_t h = 0; h < p.num_q_heads; ++h) {
          const int64_t at = row_at(p.out_layout, seq, i, h);
          for (int64_t d = 0; d < p.head_dim; ++d)
            store_code(b.out, at + d, ob, truncate(p.out_format, load<float>(wb.out, at + d)));
        }
    return r;
  }

  // The code of `f` nearest to x in the direction of zero (sign-magnitude formats: one code
  // down in magnitude when RNE rounded away from zero). NaN and Inf are kept.
  static uint32_t truncate(pacts_format f, double x) {
    uint32_t code = spec::encode(f, x, spec::Overflow::kNonSaturate);
    if (std::isfinite(x) && std::fabs(spec::decode(f, code)) > std::fabs(x)) --code;
    return code;
  }

  // merge_wrong_max. Bug class: a split-K reduction that initialises its running maximum from
  // partition 0 instead of the maximum over partitions (spec/operator.md §9 merge; aiter's and
  // FlashInfer's partition reducers). Each L = 1 row's visible keys are split at the middle
  // position h = n / 2 into partition 1 = [lo, h) and partition 2 = [max(lo, h), n), and the two
  // (output, LSE) states are merged in fp32 with m = lse1:
  //   w1 = exp(lse1 - m), w2 = exp(lse2 - m), o = (w1 o1 + w2 o2) / (w1 + w2), lse = m + ln(w1 + w2).
  // The partition LSEs come from inner runs on B = 1 sub-problems (partition 1: context h with a
  // window that starts at lo; partition 2: context n with a window that starts at max(lo, h)).
  // With finite weights the wrong m is only another normalisation, exact in real arithmetic, so
  // the emulation keeps the inner's once-rounded result there (an fp32 merge would add rounding
  // noise that ACC-1 flags on its own, hiding what this fault is about). Where the weights are
  // not finite the row is what fp32 gives: NaN output (inf / inf, or NaN from exp(-inf + inf))
  // and LSE +inf or NaN. That happens when lse2 - lse1 > ln(FLT_MAX) ~ 88.7 (a dominant logit
  // in the second half), and when partition 1 is empty (lse1 = -inf: a window that starts past
  // the middle), which spec/properties.md PACTS-META-3 requires to merge as the identity.
  // Rows with L > 1 are left unsplit. Violates spec/operator.md §9 and spec/contract.md §2.1
  // (no overflow inside the contract). Expected: PACTS-ACC-1, PACTS-ACC-2.
  RunResult merge_wrong_max(const pacts_problem& p, const pacts_buffers& b, const PlanHint& hint) {
    RunResult r = inner_->run(p, b, hint);
    if (!r.status.is_ok() || p.q_len != 1) return r;
    for (int64_t seq = 0; seq < p.batch; ++seq) {
      const int64_t n = context_of(b, seq);
      if (n < 2 || !context_valid(p, n)) continue;
      const int64_t mid = n / 2, lo = p.window > 0 ? std::max<int64_t>(0, n - p.window) : 0;
      std::vector<float> lse1(static_cast<size_t>(p.num_q_heads), -std::numeric_limits<float>::infinity());
      if (lo < mid && !partition_lse(p, b, seq, mid, lo > 0 ? mid - lo : 0, lse1)) continue;
      std::vector<float> lse2(static_cast<size_t>(p.num_q_heads));
      const int64_t start = std::max(lo, mid);
      if (!partition_lse(p, b, seq, n, start > 0 ? n - start : 0, lse2)) continue;
      for (int64_t h = 0; h < p.num_q_heads; ++h) {
        const float m = lse1[static_cast<size_t>(h)];
        const float w1 = std::exp(lse1[static_cast<size_t>(h)] - m);
        const float w2 = std::exp(lse2[static_cast<size_t>(h)] - m);
        const float den = w1 + w2;
        if (std::isfinite(den)) continue;
        fill_row(p, b.out, seq, 0, h, kNaN);
        if (p.want_lse) store<float>(b.lse, row_at(p.lse_layout, seq, 0, h), m + std::log(den));
      }
    }
    return r;
  }

  // The LSE of every head of sequence `seq` (L = 1) over context `n` with window `w`, from a
  // B = 1 sub-problem on the caller's pools. False when the inner run refuses or flags it.
  bool partition_lse(const pacts_problem& p, const pacts_buffers& b, int64_t seq, int64_t n,
                     int64_t w, std::vector<float>& lse) {
    pacts_problem sub = p;
    sub.batch = 1;
    sub.window = static_cast<int32_t>(w);
    sub.has_sinks = 0;  // the LSE excludes the sink (spec/operator.md §9)
    sub.want_lse = 1;
    sub.out_layout = {int64_t{p.num_q_heads} * p.head_dim, int64_t{p.num_q_heads} * p.head_dim,
                      p.head_dim};
    sub.lse_layout = {p.num_q_heads, p.num_q_heads, 1};
    const spec::RequiredExtents e = spec::required_extents(sub);
    std::vector<uint8_t> out(e.out);
    int32_t context = static_cast<int32_t>(n);
    pacts_buffers sb = b;
    const int64_t q_skip = seq * p.q_layout.s_batch * spec::element_bytes(p.q_format);
    const int64_t bt_skip = seq * p.block_table_stride * int64_t{sizeof(int32_t)};
    sb.q = {static_cast<uint8_t*>(b.q.data) + q_skip, b.q.bytes - static_cast<uint64_t>(q_skip)};
    sb.block_table = {static_cast<uint8_t*>(b.block_table.data) + bt_skip,
                      b.block_table.bytes - static_cast<uint64_t>(bt_skip)};
    sb.context_lens = {&context, sizeof context};
    sb.sinks = {};
    sb.out = {out.data(), out.size()};
    sb.lse = {lse.data(), lse.size() * sizeof(float)};
    const RunResult r = inner_->run(sub, sb, PlanHint::automatic());
    return r.status.is_ok() && r.device_error == 0;
  }

  // lse_base2. Bug class: an implementation working in base 2 internally (allowed by
  // spec/operator.md §7) that writes log2(sum e^s) = lse / ln 2, FlashInfer's convention (§12).
  // Violates spec/operator.md §9 (natural log). Expected: PACTS-ACC-2.
  RunResult lse_base2(const pacts_problem& p, const pacts_buffers& b, const PlanHint& hint) {
    RunResult r = inner_->run(p, b, hint);
    if (!r.status.is_ok() || !p.want_lse) return r;
    for (int64_t seq = 0; seq < p.batch; ++seq)
      for (int64_t i = 0; i < p.q_len; ++i)
        for (int64_t h = 0; h < p.num_q_heads; ++h) {
          const int64_t at = row_at(p.lse_layout, seq, i, h);
          store<float>(b.lse, at, static_cast<float>(load<float>(b.lse, at) / std::numbers::ln2));
        }
    return r;
  }

  // sink_scaled. Bug class: the sink treated as one more logit and multiplied by softmax_scale
  // with the Q.K scores (a sink folded into the score tile). Modelled by running the inner
  // backend on a copy of the sinks multiplied by softmax_scale in fp32.
  // Violates spec/operator.md §8 (the sink is not multiplied by tau). Expected: PACTS-ACC-1.
  RunResult sink_scaled(const pacts_problem& p, const pacts_buffers& b, const PlanHint& hint) {
    if (!p.has_sinks) return inner_->run(p, b, hint);
    std::vector<uint8_t> copy = copy_of(b.sinks);
    const pacts_view sinks{copy.data(), copy.size()};
    for (int64_t h = 0; h < p.num_q_heads; ++h)
      store<float>(sinks, h, load<float>(b.sinks, h) * p.softmax_scale);
    pacts_buffers scaled = b;
    scaled.sinks = sinks;
    return inner_->run(p, scaled, hint);
  }

  // empty_row_negative_zero. Bug class: an empty row normalised as 0 / (sum with a -0 term), or
  // written as -(0) by a sign-folding epilogue; its values compare equal to +0, only its bits
  // differ. Modelled by writing -0 to every element of every empty row of a valid sequence (the
  // LSE keeps -inf). Violates spec/operator.md §10 (+0, all bits zero). Expected: PACTS-EDGE-1.
  RunResult empty_row_negative_zero(const pacts_problem& p, const pacts_buffers& b,
                                    const PlanHint& hint) {
    RunResult r = inner_->run(p, b, hint);
    if (!r.status.is_ok()) return r;
    for (int64_t seq = 0; seq < p.batch; ++seq) {
      const int64_t n = context_of(b, seq);
      if (!context_valid(p, n)) continue;
      for (int64_t i = 0; i < p.q_len; ++i)
        if (row_empty(p, n, i))
          for (int64_t h = 0; h < p.num_q_heads; ++h) fill_row(p, b.out, seq, i, h, -0.0);
    }
    return r;
  }

  // output_gap_write. Bug class: a store loop bounded by `d <= D` (or a vector store rounded up
  // past the row): one element past each output row is written. In a dense layout it lands on
  // the next row, which is written afterwards; with strided rows it lands in a gap
  // (#7056: strided output; aiter writing through a reshaped view). Modelled by writing a copy
  // of element D - 1 to element D of every row, wherever that element is inside the view and is
  // not an element of any row. Violates spec/contract.md §1.3 (the write set).
  // Expected: PACTS-EDGE-2.
  RunResult output_gap_write(const pacts_problem& p, const pacts_buffers& b, const PlanHint& hint) {
    RunResult r = inner_->run(p, b, hint);
    if (!r.status.is_ok()) return r;
    std::vector<int64_t> starts;
    for (int64_t seq = 0; seq < p.batch; ++seq)
      for (int64_t i = 0; i < p.q_len; ++i)
        for (int64_t h = 0; h < p.num_q_heads; ++h) starts.push_back(row_at(p.out_layout, seq, i, h));
    std::vector<int64_t> sorted = starts;
    std::sort(sorted.begin(), sorted.end());
    const auto is_element = [&](int64_t x) {
      const auto it = std::upper_bound(sorted.begin(), sorted.end(), x);
      return it != sorted.begin() && x < *std::prev(it) + p.head_dim;
    };
    const int ob = spec::element_bytes(p.out_format);
    const auto elements = static_cast<int64_t>(b.out.bytes / static_cast<uint64_t>(ob));
    for (int64_t at : starts) {
      const int64_t past = at + p.head_dim;
      if (past >= elements || is_element(past)) continue;
      store_code(b.out, past, ob, load_code(b.out, past - 1, ob));
    }
    return r;
  }

  // write_before_validate. Bug class: a wrapper that clears the output (a memset, or
  // `out.zero_()`) before the kernel's host checks run, so a refused call has already written.
  // Modelled by zeroing the bytes of output row (0, 0, 0) that lie inside the view (element
  // (0, 0, 0, d) is at offset d in every layout), then delegating. Accepted calls overwrite them
  // and change nothing. Violates spec/refusals.md and spec/contract.md §1.3 (a refused call
  // writes nothing). Expected: PACTS-REFUSE-1.
  RunResult write_before_validate(const pacts_problem& p, const pacts_buffers& b,
                                  const PlanHint& hint) {
    if (b.out.data != nullptr) {
      const int ob = std::max(spec::element_bytes(p.out_format), 1);
      const uint64_t row_bytes = static_cast<uint64_t>(std::clamp(p.head_dim, 1, 256)) * static_cast<uint64_t>(ob);
      std::memset(b.out.data, 0, static_cast<size_t>(std::min(b.out.bytes, row_bytes)));
    }
    return inner_->run(p, b, hint);
  }

  // device_error_dropped. Bug class: a kernel that writes the NaN rows of an invalid sequence
  // but loses the error bit (the word is written with `=` by a later block, or never copied
  // back). Modelled by clearing the inner's device_error. Violates spec/contract.md §4 (the
  // kernel ORs PACTS_DEVERR_* into the word). Expected: PACTS-DEV-1.
  RunResult device_error_dropped(const pacts_problem& p, const pacts_buffers& b,
                                 const PlanHint& hint) {
    RunResult r = inner_->run(p, b, hint);
    r.device_error = 0;
    return r;
  }

  // neighbour_state_leak. Bug class: a persistent kernel that carries its output state from one
  // work item to the next and does not reset it for a sequence with no keys, so an empty
  // sequence gets the previous sequence's rows (and LSE) instead of +0 / -inf (aiter: Gluon's
  // non-PS path writes nothing for n = 0). Modelled by copying, in batch order, the rows of
  // sequence b - 1 onto those of every empty (n = 0) sequence b > 0. Violates spec/operator.md
  // §10 and spec/properties.md PACTS-META-4 (rows do not depend on neighbours).
  // Expected: PACTS-META-4, PACTS-EDGE-1.
  RunResult neighbour_state_leak(const pacts_problem& p, const pacts_buffers& b,
                                 const PlanHint& hint) {
    RunResult r = inner_->run(p, b, hint);
    if (!r.status.is_ok()) return r;
    const int ob = spec::element_bytes(p.out_format);
    for (int64_t seq = 1; seq < p.batch; ++seq) {
      if (context_of(b, seq) != 0) continue;
      for (int64_t i = 0; i < p.q_len; ++i)
        for (int64_t h = 0; h < p.num_q_heads; ++h) {
          const int64_t to = row_at(p.out_layout, seq, i, h), from = row_at(p.out_layout, seq - 1, i, h);
          for (int64_t d = 0; d < p.head_dim; ++d)
            store_code(b.out, to + d, ob, load_code(b.out, from + d, ob));
          if (p.want_lse)
            store<float>(b.lse, row_at(p.lse_layout, seq, i, h),
                         load<float>(b.lse, row_at(p.lse_layout, seq - 1, i, h)));
        }
    }
    return r;
  }

  // false_not_supported. Bug class: a path missing from the implementation although the
  // backend declares it (#7092's fix did not reach two gfx1250 pipelines; #7056 ran a windowed
  // plan on a path without windows). Modelled by answering NotSupported, writing nothing, for
  // the largest declared page size. Violates spec/properties.md §1 (a claimed capability must
  // pass) and PACTS-REFUSE-2. Expected: PACTS-REFUSE-2.
  RunResult false_not_supported(const pacts_problem& p, const pacts_buffers& b,
                                const PlanHint& hint) {
    if (p.page_size != capabilities().max_page_size) return inner_->run(p, b, hint);
    RunResult r;
    r.status = spec::not_supported("page_size " + std::to_string(p.page_size) +
                                   ": this path is not implemented");
    return r;
  }

  // invariant_plan_from_batch. Bug class: a "batch-invariant" mode whose split still follows the
  // batch (a split count from the batch size, as aiter's get_recommended_splits picks it, where
  // a fixed split size was promised), so a sequence's rows change with its neighbours. Modelled
  // by answering the batch-invariant hint with a split count of 16 / B (at least 1). Violates
  // spec/operator.md §11.1. Expected: PACTS-META-4 (on a backend that splits; the reference
  // ignores plans, so the self-test plants it in the host backend: backends/tests/).
  RunResult invariant_plan_from_batch(const pacts_problem& p, const pacts_buffers& b,
                                      const PlanHint& hint) {
    if (hint.kind != PlanHint::Kind::kBatchInvariant) return inner_->run(p, b, hint);
    return inner_->run(p, b, PlanHint::partitions(std::max(16 / std::max(p.batch, 1), 1)));
  }

  static std::vector<std::vector<double>> zero_leak(const pacts_problem& p) {
    return std::vector<std::vector<double>>(static_cast<size_t>(p.num_kv_heads),
                                            std::vector<double>(static_cast<size_t>(p.head_dim), 0.0));
  }

  std::unique_ptr<Backend> inner_;
  Fault fault_;
  Capabilities caps_;
};

}  // namespace

std::vector<Fault> all_faults() {
  std::vector<Fault> v;
  for (const FaultInfo& f : kFaults) v.push_back(f.fault);
  return v;
}

spec::BugClass fault_bug_class(Fault fault) {
  for (const FaultInfo& f : kFaults)
    if (f.fault == fault) return f.bug_class;
  return spec::BugClass::unowned_data_leak;  // unreachable for the enum's values
}

const char* fault_name(Fault fault) {
  for (const FaultInfo& f : kFaults)
    if (f.fault == fault) return f.name;
  return "unknown";
}

std::optional<Fault> fault_from_name(std::string_view name) {
  for (const FaultInfo& f : kFaults)
    if (name == f.name) return f.fault;
  return std::nullopt;
}

std::unique_ptr<Backend> make_fault_backend(std::unique_ptr<Backend> inner, Fault fault) {
  return std::make_unique<FaultBackend>(std::move(inner), fault);
}

}  // namespace pacts::conformance
