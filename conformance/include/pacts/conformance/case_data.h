// A problem with its host buffers: the unit every check, generator and case file works on.
// Owns every byte; `buffers()` gives the views spec::validate, the reference and backends take.
#pragma once

#include <pacts/problem.h>
#include <pacts/spec/mask.h>

#include <cstdint>
#include <vector>

namespace pacts::conformance {

struct CaseData {
  pacts_problem problem{};
  std::vector<uint8_t> q, k, v, k_scale, v_scale, sinks, out, lse;
  std::vector<int32_t> block_table, context_lens;

  // Sizes every buffer to spec::required_extents(problem) (zero-filled). The problem must pass
  // spec::validate_problem.
  void allocate();
  // Views over the owned storage (empty views for buffers the problem does not use).
  pacts_buffers buffers();
};

// Which bytes of the input buffers are owned (spec/contract.md §1): one flag per byte of k, v,
// k_scale, v_scale and one per block-table entry. Everything not flagged may hold any bits.
struct Ownership {
  std::vector<uint8_t> k, v, k_scale, v_scale, block_table;
};
Ownership owned_bytes(const CaseData& c);

// The keys a sequence of `context_len` keys owns, U_b of spec/contract.md §1.1, half-open
// (spec::sequence_keys, pacts/spec/mask.h, the spec's executable definition).
spec::KeyRange visible_keys(const pacts_problem& p, int32_t context_len);

// Poison fills for unowned data (spec/properties.md PACTS-POISON-*).
enum class Poison {
  kNaN,          // the format's NaN code (fp8 0x7F/0x80 by format, e2m1: its e8m0 0xFF), scales NaN
  kInf,          // the format's Inf code; formats without Inf: not applicable (returns false)
  kRandomBytes,  // uniformly random bytes
  kMaxFinite,    // the format's largest finite value (a fill that overflows naive sums)
};

// Overwrites every unowned byte of k, v and the scale pools, and every unowned block-table entry
// (with ids that are out of range, negative, or point at poisoned pages). Returns false, and
// changes nothing, when the fill does not exist for the format (Inf of e4m3fn): such a fill
// would silently be a finite value and make the check unable to fail (docs/bug-classes.md, #7092).
bool poison_unowned(CaseData& c, Poison fill, uint64_t seed);

}  // namespace pacts::conformance
