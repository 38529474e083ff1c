// pacts::spec::validate: every refusal of spec/refusals.md, checked on the host before any
// buffer is read or written. A refused call writes nothing.
#pragma once

#include <pacts/problem.h>
#include <pacts/spec/status.h>

#include <cstdint>

namespace pacts::spec {

// What a particular implementation additionally demands (spec/refusals.md §4). Violations are
// NotSupported, never InvalidArgument: the problem is well formed, this backend cannot run it.
struct Requirements {
  // Base pointers and the start of every contiguous run of a pool, Q and output row must be
  // aligned to this many bytes (the backend's vector width). 1 = element alignment only.
  uint32_t vector_alignment_bytes = 1;
  // Largest element offset the implementation can form (e.g. 2^31 - 1 for 32-bit indexing).
  int64_t max_element_offset = INT64_MAX;
};

// A problem descriptor with every field set to a consistent, contiguous default for the given
// shape (NHD pools, bf16 everywhere, no scales, no options). Tests and generators start here.
pacts_problem make_problem(int32_t batch, int32_t q_len, int32_t num_q_heads,
                           int32_t num_kv_heads, int32_t head_dim, int32_t page_size,
                           int32_t num_pages, int32_t max_pages_per_seq);

// Validation of the descriptor alone (shape, formats, modes, strides, scalars).
Status validate_problem(const pacts_problem& problem, const Requirements& req = {});

// Full validation: the descriptor plus the buffers (presence, alignment, extents, aliasing).
Status validate(const pacts_problem& problem, const pacts_buffers& buffers,
                const Requirements& req = {});

// Bytes a buffer must span for the problem's layouts (0 when the buffer is not used).
struct RequiredExtents {
  uint64_t q, k, v, k_scale, v_scale, block_table, context_lens, sinks, out, lse;
};
RequiredExtents required_extents(const pacts_problem& problem);

}  // namespace pacts::spec
