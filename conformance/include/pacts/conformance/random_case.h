// Seeded random problems with realistic data: the bulk-data half of the generators (RapidCheck
// chooses structure; this fills megabytes from a seed, reproducibly on every machine).
#pragma once

#include <pacts/conformance/case_data.h>

#include <cstdint>

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
  int32_t extra_pages = 3;    // pages in the pool that no sequence owns
};

// Draws a random structure covering every format, scale mode, layout and option.
CaseShape random_shape(uint64_t seed, int32_t max_context = 80);

// Builds the problem and fills every owned byte with data of moderate magnitude; unowned bytes
// are zero (poison them with poison_unowned). Physical pages are a random permutation.
CaseData make_case(const CaseShape& shape, uint64_t seed);

// Fills a K or V pool layout for `layout` (exposed for layout-invariance checks).
pacts_pool_layout pool_layout(PoolLayout layout, const pacts_problem& p, bool is_k);

}  // namespace pacts::conformance
