// pacts kernels on CPU threads: the production algorithm of pacts/decode.h, run by a pool of
// host threads. The backend a machine without a GPU qualifies (spec/properties.md).
#pragma once

#include <pacts/decode.h>
#include <pacts/spec/tolerance.h>
#include <pacts/spec/validate.h>

#include <cstdint>

namespace pacts::kernels::host {

// This machine as a plan target: `threads` workers (0 = all hardware threads).
DeviceInfo device(int32_t threads = 0);

// What the host kernels may be given (spec/refusals.md §4): element alignment, 64-bit offsets.
spec::Requirements requirements();

// The numerics the host kernels really have (spec/tolerance.md §2): fp32 logits, P, P.V and
// partials, binary64 merge and normalisation; decode_host.cpp derives each constant.
spec::NumericsProfile profile();

// Runs the plan on host memory. Validates every host-visible argument first: the buffers with
// spec::validate(plan.problem, buffers, requirements()), then the plan record itself (a plan not
// made by plan() for this shape is InvalidArgument) and the workspace (too small, null or not
// 4-byte aligned: InvalidArgument). A refusal writes nothing: not the output, the LSE, the error
// word or the workspace. The buffers are read through plan.problem: a plan made for another
// problem than the one the buffers hold is the caller's mistake, caught only as far as the views'
// sizes go.
// `error_word` receives PACTS_DEVERR_* bits for device-resident preconditions (ORed, never
// cleared; may be null), and that sequence's rows are NaN (spec/contract.md §4). `workspace`
// must hold workspace_size(plan) bytes (may be null when that is 0); its prior contents never
// matter. Nothing is allocated but the bookkeeping of `threads` - 1 worker threads (each keeps
// its scratch on its own stack).
// The result depends on the plan only, never on `threads` (0 = plan.workers): bitwise identical
// for any thread count (spec/operator.md §11).
spec::Status decode(const Plan& plan, const pacts_buffers& buffers, uint32_t* error_word,
                    void* workspace, uint64_t workspace_bytes, int32_t threads = 0);

}  // namespace pacts::kernels::host
