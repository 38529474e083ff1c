// The fault-injecting backend: wraps another backend and plants exactly one known bug, so that
// the suite can show that its properties bite (spec/properties.md §1, "Every property must
// bite"). Each fault models a real bug class (docs/bug-classes.md, spec/operator.md §12) by
// changing the inputs the wrapper passes to the inner backend, or the outputs it returns;
// fault_backend.cpp documents each one with the clause it violates. Used by the self-test (ctest
// label `selftest`).
#pragma once

#include <pacts/conformance/backend.h>
#include <pacts/spec/bug_classes.h>

#include <memory>
#include <optional>
#include <string_view>
#include <vector>

namespace pacts::conformance {

enum class Fault {
  kVTailLeak,             // #7092: the unowned tail of the last page reaches P.V (0 * NaN)
  kPaddingEntryAsPage,    // #7092: the first padding block-table entry is used as a page id
  kVScaleTailLeak,        // #7092: the V scale of an unowned tail slot reaches P * v_scale
  kCausalOffByOne,        // every row sees one key past its position
  kWindowPlusOne,         // FlyDSL upstream: W + 1 keys
  kWindowMinusOne,        // Gluon: W - 1 keys
  kOutputTruncated,       // the output is truncated toward zero instead of rounded (RNE)
  kMergeWrongMax,         // split partials merged with the first partition's max
  kLseBase2,              // the LSE is written in base 2 (FlashInfer's convention)
  kSinkScaled,            // the sink is multiplied by softmax_scale
  kEmptyRowNegativeZero,  // empty rows are written as -0 instead of +0
  kOutputGapWrite,        // one element past every output row is written (into a gap)
  kWriteBeforeValidate,   // the output is cleared before validation, so a refusal writes
  kDeviceErrorDropped,    // invalid sequences are NaN but the error word stays 0
  kNeighbourStateLeak,    // an empty sequence gets the previous sequence's rows
  kFalseNotSupported,     // a declared capability (page size 256) is refused as NotSupported
  kInvariantPlanFromBatch,  // the batch-invariant plan's split count taken from the batch size
  kTinyVScalesFlushed,      // per-token V scales below 2^-90 read as 0 (a tiny key dropped)
  kWindowPageEdge,          // tokenspeed #578: a window one key off a page multiple is taken as
                            // the multiple (W = k P + 1 loses its oldest key, k P - 1 gains one)
  kNanCrossesSequences,     // flashinfer #942: a NaN in one sequence's output reaches every
                            // other sequence's rows (a batch-wide reduction)
  kGroupRowsAbove8Dropped,  // b12x #24: with more than 8 query heads per KV head, the heads
                            // past the 8th of each group are written as zeros
  kNanAtSplitCount7,        // aiter #4350: a plan of exactly 7 partitions gives a NaN in the
                            // first element of every non-empty row
                            // (acts on plans: planted in a splitting backend, not the reference)
};

// Every fault, in declaration order.
std::vector<Fault> all_faults();

// The bug class a fault plants (pacts/spec/bug_classes.h: the table the mutants draw from too).
spec::BugClass fault_bug_class(Fault fault);

// The snake_case name of a fault ("v_tail_leak"); "unknown" for values outside the enum.
const char* fault_name(Fault fault);
std::optional<Fault> fault_from_name(std::string_view name);

// `inner` with `fault` planted. The wrapper reports the inner backend's capabilities, profile
// and device, and its name is "<inner name>+<fault name>".
std::unique_ptr<Backend> make_fault_backend(std::unique_ptr<Backend> inner, Fault fault);

}  // namespace pacts::conformance
