// RapidCheck generators of conformance cases (spec/properties.md §2, generation).
// RapidCheck builds and shrinks the structure (shape, formats, layouts, options, contexts, where
// special values go); the bulk data comes from CaseSpec::seed through make_case(), so a case of
// megabytes is a few dozen shrinkable numbers.
#pragma once

#include <pacts/conformance/backend.h>
#include <pacts/conformance/random_case.h>

#include <rapidcheck.h>

#include <cstdint>
#include <string>
#include <vector>

namespace pacts::conformance {

// Everything that regenerates a case's exact bytes (the content of a case file).
struct CaseSpec {
  CaseShape shape;
  uint64_t seed = 0;
  std::vector<Override> overrides;

  CaseData build() const { return make_case(shape, seed, overrides); }
};

// What a property lets the generator produce.
struct GenLimits {
  // Reference work per case, in multiply-adds (keeps the CI budget: spec/properties.md §2).
  int64_t max_reference_work = int64_t{1} << 22;
  int32_t max_batch = 64;
  int32_t long_context = 1000;  // the "long" context of the edge list
  // Owned special values: zeros, -0, subnormals, format extremes (inside the range contract).
  bool special_values = true;
  // Owned NaN / Inf codes and e8m0 0xFF (outside the range contract: NaN propagation only).
  bool non_finite = false;
  // e8m0 bytes across the range contract with tiny Q (exact logits in range, naive order not).
  bool e8m0_extremes = true;
  // Only the shape features the property needs; e.g. causal consistency wants L > 1.
  int32_t min_q_len = 1;
  bool allow_window = true;
  bool allow_sinks = true;
  bool allow_softcap = true;
  // What the backend under test runs (restrict_to_capabilities): formats, head dims and layouts
  // are drawn from these lists only, in the generator's own order (empty: every value), so a
  // GPU run spends its cases on problems the backend claims rather than on NotSupported ones.
  std::vector<pacts_format> q_formats, kv_formats, out_formats;
  std::vector<pacts_scale_mode> scale_modes;
  std::vector<int32_t> head_dims;
  bool chunked_layouts = true;
  // The shape limits of the capabilities: a drawn L above max_q_len is lowered to it (unless the
  // property needs more, min_q_len), groups above max_group and page sizes outside the range are
  // not drawn, and without LSE no case asks for it.
  int32_t max_q_len = 16, max_group = 64, min_page_size = 8, max_page_size = 256;
  bool allow_lse = true;
  // false for properties that want problems outside the capabilities (PACTS-REFUSE-2).
  bool follow_capabilities = true;
  // Pools of 2^16 + n pages whose owned pages all have ids of at least 2^16 (CaseShape::
  // low_pages), drawn for three in four cases whose 2^16 unowned pages fit kHighIdPoolBytes.
  bool high_page_ids = true;
};

// The unowned pages below the owned ones in a high-page-id case, and the most bytes they may take.
inline constexpr int32_t kLowPages = int32_t{1} << 16;
inline constexpr uint64_t kHighIdPoolBytes = uint64_t{128} << 20;

rc::Gen<CaseSpec> gen_case(const GenLimits& limits = {});

// `limits` narrowed to what `caps` declares, unless the property opted out
// (follow_capabilities = false). Backends that declare everything generate exactly as before.
GenLimits restrict_to_capabilities(GenLimits limits, const Capabilities& caps);

// Multiply-adds the reference spends on a case (2 per visible key per dim per row, Q.K and P.V).
int64_t reference_work(const CaseShape& shape);

// One line naming the structure, for failure messages and classification.
std::string describe(const CaseSpec& spec);

}  // namespace pacts::conformance
