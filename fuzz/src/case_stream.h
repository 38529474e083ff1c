// The case stream of a campaign: which case is number i of shard K/N, how it is generated with
// the property's RapidCheck generator, and how a failing case is shrunk (fuzz/README.md).
//
// A case is identified by (campaign seed, shard K/N, index i). Its global index g = i * N + K
// numbers the campaign's one stream, so the shards of a campaign partition that stream and no two
// shards (nor two workers of one shard, which take indices from one counter) ever run the same
// case. Everything below is a pure function of (seed, g) and the property list: a case is
// regenerated from the printed seed alone.
#pragma once

#include <pacts/conformance/generators.h>
#include <pacts/conformance/property.h>

#include <rapidcheck.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace pacts::fuzz {

struct Shard {
  int64_t index = 0;  // K
  int64_t count = 1;  // N
};

// Parses "K/N" (0 <= K < N); InvalidArgument naming the value and what is accepted.
spec::Result<Shard> parse_shard(const std::string& text);

// RapidCheck keeps its implicit parameters (the handler gen::exec draws through) in process-wide
// statics, not thread_local (rapidcheck/detail/ImplicitParam.h), and a Shrinkable made by
// gen::exec re-runs the generator on every value() / shrinks(). Every RapidCheck call of the
// campaign therefore holds this lock; checks (the expensive part) run outside it.
std::mutex& rapidcheck_lock();

// Where case i of a shard sits in the campaign.
struct CaseId {
  uint64_t campaign_seed = 0;
  Shard shard;
  int64_t index = 0;

  uint64_t global_index() const;  // i * N + K
};

// How the case is drawn: RapidCheck's size (0..100, formats note §4: never above 100) and the
// seed of the bulk data (CaseSpec::seed).
struct Draw {
  int size = 0;
  uint64_t data_seed = 0;
};
Draw draw_of(const CaseId& id);

// A generated case: the Shrinkable (for shrinking) and its value.
struct Generated {
  rc::Shrinkable<conformance::CaseSpec> shrinkable;
  conformance::CaseSpec spec;
};

// Generates case `id` with `gen` (a property's gen_case). The data seed of every case and of all
// its shrinks is replaced by draw_of(id).data_seed: RapidCheck draws the seed with
// gen::arbitrary, whose range scales with size, so at small sizes different cases would share
// seeds (and bytes); the bijective derivation makes the bytes of two cases of a campaign differ.
// nullopt when the generator cannot produce the case (rc::GenerationFailure), which RapidCheck's
// own loop counts as a discarded case; `why` then says what the generator reported.
std::optional<Generated> generate(const rc::Gen<conformance::CaseSpec>& gen, const CaseId& id,
                                  std::string* why = nullptr);

// Greedy shrinking: take the first shrink of the current case whose outcome has the same verdict
// (Fail stays Fail, QualityWarning stays QualityWarning), repeat until none does or a bound is hit.
struct ShrinkLimits {
  int32_t max_steps = 200;       // accepted shrinks
  int32_t max_tries = 2000;      // candidates checked in all
};
struct ShrinkResult {
  conformance::CaseSpec minimal;
  conformance::Outcome outcome;  // the minimal case's outcome
  int32_t steps = 0, tries = 0;
  bool stopped = false;          // a bound or `stop` ended it before a local minimum
};
using CheckFn = std::function<conformance::Outcome(const conformance::CaseSpec&)>;
// Shrinks a failing case in two phases: RapidCheck's shrinks of the generated structure, then
// structural reductions (reductions() below) that RapidCheck cannot make where the generator drew
// a branch first (the batch-of-5-or-more branch never shrinks below 5). A candidate is taken when
// its outcome has the first one's verdict; both phases end at a case none of whose candidates
// does, or at a bound.
ShrinkResult shrink(const Generated& failing, const conformance::Outcome& first,
                    uint64_t data_seed, const CheckFn& check, const ShrinkLimits& limits,
                    const std::atomic<bool>& stop);

// The structural reductions of a case, smallest first: one sequence fewer (its overrides dropped,
// later sequences' renumbered), one query token fewer, a sequence's context halved, one query
// head per KV head, one KV head, head dim 64, the page size halved (down to 8), the options off (window, soft-cap, sinks, LSE, gaps,
// head-major rows, padding columns, spare and shared pages, layouts NHD), one override fewer.
// Only candidates whose problem is valid (spec::validate_problem of the built case) are returned.
std::vector<conformance::CaseSpec> reductions(const conformance::CaseSpec& spec);

// splitmix64's finaliser: a bijection of 64-bit words.
uint64_t mix64(uint64_t x);

}  // namespace pacts::fuzz
