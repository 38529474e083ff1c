// pacts kernels: mutant schemata (mutation/README.md).
//
// Every mutant is a deliberate bug, modelled on a real class of paged-attention bug, planted at
// a point of the production code as
//
//     if (PACTS_MUTANT(v_tail_unmasked)) { ...the bug... }
//
// Production builds (PACTS_MUTANTS undefined) compile PACTS_MUTANT(name) to a constant false: the
// name is still checked against the list below, the branch is dead code and no object changes.
// The mutant build (PACTS_MUTANTS defined: the *_mutants libraries of kernels/) compiles every
// mutant in, each behind a run-time switch: on the host the process-wide id set from the
// environment variable PACTS_MUTANT=<name> (read once, before main) or by set_active_mutant();
// in device code the __device__ variable `mutant_device_id`, which the HIP kernels' host code
// copies from the host's id before its launches (kernels/hip/src/decode_hip.cpp,
// sync_device_mutant).
//
// The list is the one source of the ids, the names, the spec clause each mutant violates and the
// bug class it models; mutation/pacts-mutate prints it with the property that kills each one.
#pragma once

#include "common/hd.h"

#include <pacts/spec/bug_classes.h>

#include <cstdint>

// X(name, bug class (spec/include/pacts/spec/bug_classes.h), spec clause violated, the real bug it
// models). Append only: ids are positions.
// Q(...) marks a mutant whose only effect the spec judges is a QualityWarning (its clause is a
// "preferred" behaviour, spec/properties.md §1): a QualityWarning detects it, no Fail can.
// G(...) marks a mutant planted in kernels/hip/ only: the host run (pacts-mutate) skips it, the
// GPU run (pacts-mutate-hip, tools/gpu/h200_mutants.sh) runs it.
#define PACTS_MUTANT_LIST(X, Q, G)                                                                 \
  /* kernels/common/dequant.h */                                                                   \
  X(e8m0_zero_as_zero, format_decoding, "spec/formats.md §1.9",                                    \
    "e8m0 byte 0x00 decoded as 0 instead of 2^-127 (an fp32 subnormal)")                           \
  Q(e8m0_ff_not_nan, format_decoding,                                                              \
    "spec/formats.md §1.9, spec/contract.md §3 (NaN propagation)",                                 \
    "e8m0 byte 0xFF decoded as the finite 2^127 instead of NaN (a saturating decoder)")            \
  X(e4m3fn_read_as_fnuz, format_decoding, "spec/formats.md §1.4-1.5",                              \
    "e4m3fn KV codes decoded with the e4m3fnuz bias (OCP vs AMD fp8 mixed up)")                    \
  X(nibbles_swapped, format_decoding, "spec/operator.md §3.3, spec/formats.md §2",                 \
    "MXFP4 element d read from the other nibble of its byte")                                      \
  X(fp16_subnormals_flushed, format_decoding,                                                      \
    "spec/formats.md §1.2, spec/tolerance.md §2 (ftz declared false)",                             \
    "fp16 subnormal codes flushed to zero while the profile declares no flushing")                 \
  X(q_scale_ignored, scale_application, "spec/operator.md §7, spec/contract.md §2.1",              \
    "q_scale never applied to the query")                                                          \
  X(q_scale_after_dot, range_overflow, "spec/contract.md §2.1",                                    \
    "#7056: the Q scale deferred past the Q.K accumulation, which then holds the logit "           \
    "divided by a tiny q_scale and overflows")                                                     \
  /* kernels/common/mask.h */                                                                      \
  X(causal_sees_next_key, mask_bounds, "spec/operator.md §5",                                      \
    "causal bound off by one: row i also sees key pos + 1")                                        \
  X(window_one_short, mask_bounds, "spec/operator.md §6",                                          \
    "sliding window of W - 1 keys (Gluon's convention)")                                           \
  X(window_one_long, mask_bounds, "spec/operator.md §6",                                           \
    "sliding window of W + 1 keys (FlyDSL upstream's convention)")                                 \
  X(partition_overlap, split_merge, "spec/operator.md §9",                                         \
    "split-KV partitions overlap by one key: the boundary key counted in two partials")            \
  X(context_len_bound_exclusive, device_preconditions, "spec/contract.md §4 (P1)",                 \
    "n_b = M * P refused as a device error (P1 checked with < instead of <=)")                     \
  /* kernels/common/round.h */                                                                     \
  X(bf16_truncated, output_rounding, "spec/operator.md §9, spec/formats.md §4",                    \
    "bf16 output stored by truncation instead of round-to-nearest-even")                           \
  /* kernels/common/softmax.h */                                                                   \
  X(rescale_skipped, split_merge, "spec/operator.md §9",                                           \
    "online softmax: the accumulator not rescaled when the running max grows")                     \
  X(merge_wrong_max, split_merge, "spec/operator.md §9",                                           \
    "partition merge rescales to the first partition's max instead of the larger one")             \
  X(empty_partition_nan, unowned_data_leak, "spec/operator.md §9-§10, spec/contract.md §5",        \
    "an empty partial is merged with weight e^(-inf - m) = 0 times its unwritten accumulator "     \
    "(0 * NaN)")                                                                                   \
  X(lse_base2, lse_convention, "spec/operator.md §9",                                              \
    "LSE returned in base 2 (log2 l + m / ln 2)")                                                  \
  /* kernels/host/ */                                                                              \
  X(v_tail_unmasked, unowned_data_leak, "spec/contract.md §1.2, §5",                               \
    "#7092: V of the last page's tail enters P.V with P = 0 (0 * NaN = NaN)")                      \
  X(padding_entries_as_pages, unowned_data_leak, "spec/contract.md §1.1-1.2, §5",                  \
    "#7092: padding block-table entries used as page ids (when in range) and their V enters "      \
    "P.V with P = 0")                                                                              \
  X(v_scale_unowned_not_zeroed, unowned_data_leak, "spec/contract.md §5",                          \
    "#7092: V bytes of the tail masked but their per-token / block scales multiplied in (0 * "     \
    "NaN scale)")                                                                                  \
  X(k_unowned_in_tile_max, unowned_data_leak, "spec/contract.md §5",                               \
    "K (with its scale) of the tail's unowned rows enters the tile max before masking")            \
  X(padding_checked_as_page_ids, device_preconditions,                                             \
    "spec/contract.md §4 (P2 on owned entries only)",                                              \
    "padding block-table entries validated as page ids: a valid sequence reports PAGE_ID")         \
  X(page_id_unchecked, device_preconditions, "spec/contract.md §4 (P2)",                           \
    "owned block-table entries used without the range check (reads outside the pool)")             \
  X(device_error_not_reported, device_preconditions, "spec/contract.md §4",                        \
    "an invalid sequence's rows are NaN but the error word is not set")                            \
  X(invalid_row_zero, device_preconditions, "spec/contract.md §4",                                 \
    "an invalid sequence's rows written as zeros instead of NaN")                                  \
  X(kv_head_interleaved, row_mapping, "spec/operator.md §4",                                       \
    "wrong KV head for a query head: h % Hkv instead of h / G")                                    \
  X(rows_token_major_q, row_mapping, "spec/operator.md §3.1, §5",                                  \
    "rows of different L positions mixed: Q of row (i, h) read with the (h, i) decomposition")     \
  X(rows_share_last_mask, mask_bounds, "spec/operator.md §5",                                      \
    "every query token of a sequence masked as the last one (an L = 1 kernel run with L > 1)")     \
  X(q_stride_contiguous, strides_layouts, "spec/operator.md §3.1",                                 \
    "query strides assumed contiguous: the padding between rows read as data")                     \
  X(out_stride_contiguous, strides_layouts, "spec/contract.md §1.3",                               \
    "output strides assumed contiguous: rows written at the wrong places")                         \
  X(out_row_overrun, write_set, "spec/contract.md §1.3",                                           \
    "one element written past the end of each output row (inside the view)")                       \
  X(empty_row_unwritten, empty_rows, "spec/operator.md §10",                                       \
    "a row with no visible key (ctx = 0, pos < 0) left unwritten")                                 \
  X(pool_chunks_ignored, strides_layouts, "spec/operator.md §3.2",                                 \
    "chunked (x-packed) pool layout read as if contiguous")                                        \
  X(per_token_scale_wrong_slot, scale_application, "spec/operator.md §7, spec/formats.md §3",      \
    "per-token scale read from the neighbouring slot of the page (slot ^ 1)")                      \
  X(k_block_scales_rolled, scale_application, "spec/operator.md §7, spec/formats.md §3",           \
    "#7056 review: MXFP4 K block scales rolled by one block")                                      \
  X(v_tensor_scale_ignored, scale_application, "spec/operator.md §7",                              \
    "#7056 review: the fp8 per-tensor V scale not applied")                                        \
  X(sink_times_softmax_scale, sink_handling, "spec/operator.md §8",                                \
    "the sink multiplied by the softmax scale")                                                    \
  X(sink_softcapped, sink_handling, "spec/operator.md §8",                                         \
    "the sink soft-capped like a logit")                                                           \
  X(sink_dropped_when_split, sink_handling, "spec/operator.md §8-§9",                              \
    "the sink dropped when the context is split into partitions")                                  \
  X(sink_counted_per_partition, sink_handling, "spec/operator.md §8-§9",                           \
    "the sink added to every partition's denominator (counted once per partition)")                \
  X(lse_includes_sink, lse_convention, "spec/operator.md §9",                                      \
    "the LSE includes the sink's term")                                                            \
  X(softcap_on_unscaled_logits, scale_application, "spec/operator.md §7",                          \
    "soft-cap applied to q.k before the softmax scale")                                            \
  /* kernels/hip/ (GPU only: pacts-mutate-hip, tools/gpu/h200_mutants.sh) */                       \
  G(hip_v_tail_unmasked, unowned_data_leak, "spec/contract.md §1.2, §5",                           \
    "#7092 in the tensor-core kernel: the last tile's slots past n_b loaded through the last "     \
    "page's entry, so V of the page's tail meets P = 0 in the MMA (0 * NaN = NaN)")                \
  G(hip_padding_entries_as_pages, unowned_data_leak, "spec/contract.md §1.1-1.2, §5",              \
    "#7092 in the tensor-core kernel: the last tile's slots on padding columns loaded through "    \
    "their block-table entries (page 0 where an entry is no page id), their V meets P = 0")        \
  G(hip_cp_async_wait_skipped, pipeline_sync, "spec/operator.md §9",                               \
    "staged K/V pipeline without its wait (the bulk copies' stage barrier or cp.async's "          \
    "wait_group): a tile computed from a stage whose copies are still in flight (stale K/V)")      \
  G(hip_final_barrier_dropped, pipeline_sync, "spec/operator.md §9",                               \
    "missing __syncthreads before shared memory is reused: a warp done with its tiles writes "     \
    "its final state over the stages another warp is still reading")                               \
  G(hip_q_barrier_dropped, pipeline_sync, "spec/operator.md §9",                                   \
    "missing __syncthreads between the Q~ fragment loads and the first tile's copies into the "    \
    "same shared memory (a race; the results change only when it bites, racecheck reports it)")    \
  G(hip_kv_offset_32bit, addressing_32bit, "spec/contract.md §1, spec/properties.md PACTS-DEV-2",  \
    "#7056 class: K/V element offsets computed in 32-bit int, which wrap for pools beyond 2^31 "   \
    "elements")                                                                                    \
  G(hip_q_rescale_dropped, range_overflow,                                                         \
    "spec/tolerance.md §2 (u_q), spec/properties.md PACTS-EDGE-6",                                 \
    "the Q~ row rescale before the bf16 rounding dropped: a tiny Q~ row loses its bits in bf16 "   \
    "(the tiny query row of docs/kernel-design.md)")                                               \
  G(hip_lse_first_warp, lse_convention, "spec/operator.md §9",                                     \
    "the LSE written from the first warp's softmax state instead of the merged one")               \
  G(hip_out_token_stride_packed, strides_layouts, "spec/contract.md §1.3",                         \
    "output token stride assumed to be H_q times the head stride (heads packed): rows land at "    \
    "the wrong places in a padded output view")                                                    \
  G(hip_mask_rows_token_major, mask_bounds, "spec/operator.md §3.1, §5",                           \
    "rows of different L positions mixed: the causal bound of row r taken from r % L (a "          \
    "[head][token] row order) while Q and the output use r / G")                                   \
  G(hip_sink_of_kv_head, row_mapping, "spec/operator.md §8",                                       \
    "the sink indexed by the KV head instead of the query head")                                   \
  G(hip_direct_error_not_reported, device_preconditions, "spec/contract.md §4",                    \
    "an unsplit plan writes an invalid sequence's NaN rows but never sets the error word "         \
    "(only the merge kernel reports)")                                                             \
  G(hip_padding_checked_as_page_ids, device_preconditions,                                         \
    "spec/contract.md §4 (P2 on owned entries only)",                                              \
    "every block-table column up to max_pages_per_seq checked as a page id: a valid sequence "     \
    "with out-of-range padding entries reports PAGE_ID")                                           \
  G(hip_empty_rows_unwritten, empty_rows, "spec/operator.md §10",                                  \
    "an unsplit plan leaves the rows without a visible key (ctx = 0) unwritten (Gluon's "          \
    "non-PS path)")                                                                                \
  G(hip_chunks_ignored, strides_layouts, "spec/operator.md §3.2",                                  \
    "a stride assumed contiguous: the x-packed K / dim-major V chunk stride ignored, elements "    \
    "read as if the row were dense")                                                               \
  G(hip_mx_k_scales_rolled, scale_application, "spec/operator.md §7, spec/formats.md §3",          \
    "#7056 review in the HIP kernels: MXFP4 K block scales rolled by one block")                   \
  G(hip_v_tensor_scale_dropped, scale_application, "spec/formats.md §3, spec/contract.md §2.1",    \
    "a per-tensor V scale deferred to the end of the sum (narrow V formats) and never applied")    \
  G(hip_k_tensor_scale_dropped, scale_application, "spec/formats.md §3, spec/contract.md §2.1",    \
    "a per-tensor K scale deferred to the logit (fp8 K as its exact codes) and never applied")     \
  /* kernels/common/softmax.h */                                                                   \
  X(max_sentinel_finite, range_overflow, "spec/operator.md §9, spec/contract.md §2.1",             \
    "flashinfer #4450: the running maximum starts at a finite sentinel (-5e4) instead of -inf, "   \
    "so a row whose every logit lies below it gets no weight at all")                              \
  /* kernels/hip/ again (appended: the ids above stay) */                                          \
  G(hip_out_past_end, write_set, "spec/contract.md §1.3, spec/properties.md PACTS-EDGE-2",         \
    "an out-of-bounds store: the first output element's low byte also written to the two bytes "   \
    "just past the output view (inside the allocation, where compute-sanitizer sees nothing)")     \
  G(hip_tiny_keys_dropped, scale_application, "spec/formats.md §3, spec/operator.md §7",           \
    "per-token fp8 V: a key whose scale may give tiny elements is kept out of the MMAs and never " \
    "added on the CUDA cores either (its V flushed to zero)")                                      \
  /* kernels/host/ and kernels/hip/ again (appended) */                                           \
  X(page_id_16bit, narrow_page_ids, "spec/operator.md §2 (page ids 0..N-1), §3.2",                 \
    "aiter #3062: a block-table entry read through 16-bit arithmetic, so page ids of 2^16 and "    \
    "above wrap to a page 2^16 lower")                                                             \
  G(hip_page_id_16bit, narrow_page_ids, "spec/operator.md §2 (page ids 0..N-1), §3.2",             \
    "aiter #3062 in the HIP kernels: a block-table entry read through 16-bit arithmetic in the "   \
    "key slots' lookup")                                                                           \
  /* kernels/host/ again (appended) */                                                             \
  X(softcap_dropped_from_40, dropped_parameter, "spec/operator.md §7",                             \
    "flashinfer #1193: the soft-cap silently dropped on one path (here: caps of 40 and above, "   \
    "such as Gemma 2's 50, which logits of a few units barely feel)")

namespace pacts::kernels::common {

#define PACTS_MUTANT_ENUM_ITEM(name, bug_class, clause, bug) name,
// The mutants by id; `none` (0) is the production behaviour.
enum class Mutant : int32_t {
  none = 0,
  PACTS_MUTANT_LIST(PACTS_MUTANT_ENUM_ITEM, PACTS_MUTANT_ENUM_ITEM, PACTS_MUTANT_ENUM_ITEM)
  count
};
#undef PACTS_MUTANT_ENUM_ITEM

inline constexpr int32_t kMutantCount = static_cast<int32_t>(Mutant::count) - 1;

struct MutantInfo {
  const char* name;
  spec::BugClass bug_class;  // its class in the one table (spec/include/pacts/spec/bug_classes.h)
  const char* clause;  // the spec clause the mutant violates
  const char* bug;     // the real bug it models
  bool quality_only;   // listed with Q(...): a QualityWarning is the strongest verdict it can get
  bool gpu_only;       // listed with G(...): planted in kernels/hip/ only
};

#define PACTS_MUTANT_INFO_ITEM(name, bug_class, clause, bug)                                       \
  MutantInfo{#name, spec::BugClass::bug_class, clause, bug, false, false},
#define PACTS_MUTANT_QUALITY_ITEM(name, bug_class, clause, bug)                                    \
  MutantInfo{#name, spec::BugClass::bug_class, clause, bug, true, false},
#define PACTS_MUTANT_GPU_ITEM(name, bug_class, clause, bug)                                        \
  MutantInfo{#name, spec::BugClass::bug_class, clause, bug, false, true},
// kMutants[id - 1] describes mutant `id`.
inline constexpr MutantInfo kMutants[] = {
    PACTS_MUTANT_LIST(PACTS_MUTANT_INFO_ITEM, PACTS_MUTANT_QUALITY_ITEM, PACTS_MUTANT_GPU_ITEM)};
#undef PACTS_MUTANT_INFO_ITEM
#undef PACTS_MUTANT_QUALITY_ITEM
#undef PACTS_MUTANT_GPU_ITEM

}  // namespace pacts::kernels::common

#if !defined(PACTS_MUTANTS)

// Production: no mutant. The comparison of two distinct enumerators is a constant false (and
// checks the name), so every mutant branch is dead code.
#define PACTS_MUTANT(name)                                                                         \
  (::pacts::kernels::common::Mutant::name == ::pacts::kernels::common::Mutant::none)

#else  // the mutant build

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace pacts::kernels::common {
PACTS_COMMON_ABI_BEGIN

#if defined(__CUDACC__) || defined(__HIPCC__)
// The active mutant in device code. One copy per translation unit (no relocatable device code
// needed): every TU that launches kernels sets its own before the launches, with
// hipMemcpyToSymbol(mutant_device_id, &id, sizeof id) (decode_hip.cpp's sync_device_mutant).
static __device__ int32_t mutant_device_id = 0;
#endif

// The id of a name, 0 for "none" or "", -1 for an unknown name.
inline int32_t mutant_id(const char* name) {
  if (name == nullptr || name[0] == '\0' || std::strcmp(name, "none") == 0) return 0;
  for (int32_t i = 0; i < kMutantCount; ++i)
    if (std::strcmp(kMutants[i].name, name) == 0) return i + 1;
  return -1;
}

// PACTS_MUTANT=<name>, read once at start-up; an unknown name stops the process: a typo must not
// run the production code and report every property as having "killed" nothing.
inline int32_t mutant_from_environment() {
  const char* name = std::getenv("PACTS_MUTANT");
  const int32_t id = mutant_id(name);
  if (id < 0) {
    std::fprintf(stderr, "PACTS_MUTANT=%s: no such mutant (pacts-mutate --list)\n", name);
    std::abort();
  }
  return id;
}

// The host's active mutant. Written before any decode runs (start-up, or pacts-mutate
// --mutant), read by every worker thread afterwards.
inline int32_t host_mutant_id = mutant_from_environment();

inline void set_active_mutant(int32_t id) { host_mutant_id = id; }

PACTS_HD inline bool mutant_active(Mutant m) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return static_cast<int32_t>(m) == mutant_device_id;
#else
  return static_cast<int32_t>(m) == host_mutant_id;
#endif
}

PACTS_COMMON_ABI_END
}  // namespace pacts::kernels::common

#define PACTS_MUTANT(name)                                                                         \
  (::pacts::kernels::common::mutant_active(::pacts::kernels::common::Mutant::name))

#endif  // PACTS_MUTANTS
