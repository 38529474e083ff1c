// The bug classes pacts plants to show that its properties bite (spec/properties.md §1, "every
// property must bite"): one table, like a conformance suite's function tables, from which both
// planting mechanisms draw. Each fault of the fault-injecting backend (conformance/
// fault_backend.h, fault_bug_class) and each mutant of the kernels (kernels/common/mutant.h, its
// second field) names exactly one class; mutation/'s test shows every class planted at least once
// and pacts-mutate --list prints it. docs/bug-classes.md tells the public bugs behind them.
// Header-only and plain data, so that device code can include it.
#pragma once

// X(id, the spec clauses it violates, what goes wrong). Append only: the enum follows the order.
#define PACTS_BUG_CLASS_LIST(X)                                                                   \
  X(unowned_data_leak, "spec/contract.md §1.2, §5",                                               \
    "unowned K/V rows, their scales or padding block-table entries reach the result (#7092)")     \
  X(mask_bounds, "spec/operator.md §5-§6",                                                        \
    "a causal or window bound off by one, or taken from another query token")                     \
  X(row_mapping, "spec/operator.md §3.1, §4, §8",                                                 \
    "a query row, head, KV head or sink mapped to another one's data")                            \
  X(split_merge, "spec/operator.md §9",                                                           \
    "partitions that overlap, an online rescale skipped, partials merged with the wrong origin "  \
    "or weight")                                                                                  \
  X(output_rounding, "spec/operator.md §9, spec/formats.md §4",                                   \
    "the output converted by truncation instead of round-to-nearest-even")                        \
  X(lse_convention, "spec/operator.md §9",                                                        \
    "the LSE in another base, with the sink's term, or from a part of the state")                 \
  X(sink_handling, "spec/operator.md §8-§9",                                                      \
    "the sink scaled, soft-capped, dropped or counted once per partition")                        \
  X(empty_rows, "spec/operator.md §10",                                                           \
    "a row with no visible key left unwritten, written as -0 or with another sequence's rows")    \
  X(write_set, "spec/contract.md §1.3, spec/refusals.md §1",                                      \
    "a write outside the output's write set, or before the call was validated")                   \
  X(strides_layouts, "spec/operator.md §3.1-3.2, spec/contract.md §1.3",                          \
    "a stride assumed contiguous or packed, a chunked pool layout read as dense")                 \
  X(device_preconditions, "spec/contract.md §4",                                                  \
    "an invalid sequence not detected or not reported, or a valid one refused")                   \
  X(format_decoding, "spec/formats.md §1-§2",                                                     \
    "codes decoded with another format's bias, the other nibble, a saturating or flushing "       \
    "decoder")                                                                                    \
  X(scale_application, "spec/operator.md §7, spec/formats.md §3",                                 \
    "a scale never applied, applied in the wrong place, or read from the wrong slot or block")    \
  X(range_overflow, "spec/contract.md §2.1, spec/tolerance.md §2",                                \
    "a factor deferred past an accumulation that then leaves fp32's range or bf16's precision "   \
    "(#7056)")                                                                                    \
  X(pipeline_sync, "spec/operator.md §9",                                                         \
    "a staged GPU pipeline without a wait or barrier: a tile computed from stale or overwritten " \
    "data")                                                                                       \
  X(addressing_32bit, "spec/contract.md §1, spec/properties.md PACTS-DEV-2",                      \
    "element offsets computed in 32 bits, which wrap past 2^31 elements")                         \
  X(false_refusal, "spec/refusals.md §1",                                                         \
    "a declared capability refused as NotSupported")                                              \
  X(plan_dependence, "spec/operator.md §11.1",                                                    \
    "the batch-invariant plan's split taken from the batch")                                      \
  X(narrow_page_ids, "spec/operator.md §2 (page ids 0..N-1), §3.2",                               \
    "page ids read or multiplied in 16- or 24-bit arithmetic, which wrap at 2^16 or 2^24 pages") \
  X(dropped_parameter, "spec/operator.md §5-§8",                                                  \
    "a parameter (soft-cap, sinks, window, a scale) ignored on one path, where the generated "    \
    "values rarely make it matter")

namespace pacts::spec {

#define PACTS_BUG_CLASS_ENUM_ITEM(id, clause, what) id,
enum class BugClass : int { PACTS_BUG_CLASS_LIST(PACTS_BUG_CLASS_ENUM_ITEM) };
#undef PACTS_BUG_CLASS_ENUM_ITEM

struct BugClassInfo {
  BugClass id;
  const char* name;    // "unowned_data_leak"
  const char* clause;  // the spec clauses such a bug violates
  const char* what;    // what goes wrong
};

#define PACTS_BUG_CLASS_INFO_ITEM(id, clause, what) BugClassInfo{BugClass::id, #id, clause, what},
// kBugClasses[static_cast<int>(c)] describes class c.
inline constexpr BugClassInfo kBugClasses[] = {PACTS_BUG_CLASS_LIST(PACTS_BUG_CLASS_INFO_ITEM)};
#undef PACTS_BUG_CLASS_INFO_ITEM

inline constexpr int kBugClassCount = static_cast<int>(sizeof(kBugClasses) / sizeof(kBugClasses[0]));

inline constexpr const BugClassInfo& bug_class_info(BugClass c) { return kBugClasses[static_cast<int>(c)]; }

}  // namespace pacts::spec
