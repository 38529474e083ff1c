// PACTS-DEV-2's case transform: a small valid case spread over large addresses, every byte a
// 32-bit-wrapped offset could reach set to NaN (spec/properties.md PACTS-DEV-2). The threshold
// is a parameter so the transform itself is tested on the CPU with small buffers
// (backends/tests/large_addresses_test.cpp); the property uses 2^31.
#pragma once

#include <pacts/conformance/case_data.h>

#include <cstdint>
#include <optional>
#include <string>

namespace pacts::conformance {

enum class LargeAddressVariant {
  kPools = 0,     // K/V pools (and scale pools) grown so every owned page starts past the
                  // threshold, the case's pages moved to the highest ids, the rest NaN
  kQueryView = 1, // the Q view's batch stride puts the last sequence past the threshold, gaps NaN
  kOutputView = 2 // the same for the output view
};

std::string describe(LargeAddressVariant v);

// Spreads `c` (valid, built by make_case) in place. Returns why the variant does not apply to
// this case (e.g. B < 2 for the view variants), leaving `c` unusable, or nullopt on success;
// the result is valid and has the same reference answer as the input. May throw std::bad_alloc.
std::optional<std::string> spread_to_large_addresses(CaseData& c, LargeAddressVariant variant,
                                                     int64_t threshold_elements);

// The pages of `c` a spread moved: id - shift is where a block-table entry pointed before. For
// tests that emulate a wrapped offset.
int64_t large_address_page_shift(const pacts_problem& p, int64_t threshold_elements);

}  // namespace pacts::conformance
