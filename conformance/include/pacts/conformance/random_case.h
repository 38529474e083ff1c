// Seeded random problems with realistic data: the bulk-data half of the generators (RapidCheck
// chooses structure; this fills megabytes from a seed, reproducibly on every machine).
#pragma once

#include <pacts/conformance/case_data.h>

#include <cstdint>
#include <vector>

namespace pacts::conformance {

enum class PoolLayout { kNHD, kHND, kXPackedK, kDimMajorV, kPadded };

// The structure of a case. Everything else (data, page assignment) follows from `seed`.
struct CaseShape {
  int32_t batch = 2, q_len = 1, num_q_heads = 4, num_kv_heads = 2, head_dim = 64, page_size = 16;
  pacts_format q_format = PACTS_FORMAT_BF16, kv_format = PACTS_FORMAT_BF16,
               out_format = PACTS_FORMAT_FP32;
  pacts_scale_mode k_scale_mode = PACTS_SCALE_NONE, v_scale_mode = PACTS_SCALE_NONE;
  pacts_nibble_order nibble_order = PACTS_NIBBLE_LOW_FIRST;
  PoolLayout k_layout = PoolLayout::kNHD, v_layout = PoolLayout::kNHD;
  float softcap = 0;
  int32_t window = 0;
  bool sinks = false, lse = true;
  int32_t max_context = 64;   // contexts are drawn in 0..max_context, weighted to the edges
  std::vector<int32_t> contexts;  // explicit context per sequence (size batch); empty: drawn
  int32_t extra_pages = 3;    // pages in the pool that no sequence owns
  int32_t q_gap = 0;          // elements of gap after every query head row (strides with gaps)
  int32_t out_gap = 0;        // elements of gap after every output / LSE head row
  // Row orders of the query and of the output (and LSE): token-major [B][L][Hq] rows (s_tok =
  // Hq x s_head), or head-major [B][Hq][L] (s_head = L x s_tok), as a stack that keeps each
  // head's tokens together has them. The same for L = 1.
  bool q_head_major = false, out_head_major = false;
  int32_t bt_extra_cols = 0;  // block-table columns beyond the longest context (padding)
  bool share_pages = false;   // every sequence's first page is sequence 0's first page
  // Pool pages below every owned page: ids 0..low_pages-1 belong to no sequence and their bytes
  // stay 0, so every owned page id is at least low_pages (65536: ids past 16 bits, aiter #3062).
  int32_t low_pages = 0;
  int32_t k_e8m0_lo = 122, k_e8m0_hi = 127;  // MXFP4 K scale bytes are drawn in [lo, hi]
  int32_t v_e8m0_lo = 122, v_e8m0_hi = 127;  // MXFP4 V scale bytes
  int32_t q_exponent = 0;     // Q values are scaled by 2^q_exponent (tiny Q meets huge K)
};

// A raw code placed at a logical position after the bulk data is drawn (spec/properties.md:
// special values from bit patterns). Positions of keys the sequence does not own are ignored.
struct Override {
  enum class Tensor { kQ, kK, kV, kKScale, kVScale, kSink };
  Tensor tensor = Tensor::kQ;
  int32_t seq = 0;    // sequence b
  int32_t pos = 0;    // key token j (K, V, scales) or query token i (Q)
  int32_t head = 0;   // KV head (K, V, scales) or query head (Q, sink)
  int32_t dim = 0;    // element d (K, V, Q) or e8m0 block (MX scales)
  uint32_t code = 0;  // raw bits in the tensor's format (fp32 bits for float scales and sinks)
};

// Draws a random structure covering every format, scale mode, layout and option.
CaseShape random_shape(uint64_t seed, int32_t max_context = 80);

// The descriptor make_case builds for `shape` with `num_pages` pool pages and `max_pages_per_seq`
// block-table columns (spec/case_files.md §3.1 step 3; q_exponent's q_scale is set later). A case
// file's reader checks it, and the memory its buffers take, before make_case allocates them.
pacts_problem shape_problem(const CaseShape& shape, int32_t num_pages, int32_t max_pages_per_seq);

// The descriptor make_case(shape, seed) builds, without allocating or filling its buffers (a
// shrinker checks its candidates with it; a high-page-id case's pools take up to 256 MiB).
pacts_problem case_problem(const CaseShape& shape, uint64_t seed);

// Builds the problem and fills every row of every page (owned or not) and every query with data
// of moderate magnitude, then applies the overrides (owned positions only). Unowned rows thus
// hold ordinary data; poison them with poison_unowned. Physical pages are a random permutation.
CaseData make_case(const CaseShape& shape, uint64_t seed, const std::vector<Override>& overrides = {});

// Writes one override into a built case (no effect for unowned key positions).
void apply_override(CaseData& c, const Override& o);

// Fills a K or V pool layout for `layout` (exposed for layout-invariance checks).
pacts_pool_layout pool_layout(PoolLayout layout, const pacts_problem& p, bool is_k);

}  // namespace pacts::conformance
