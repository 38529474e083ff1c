#include "case_stream.h"

#include <charconv>

namespace pacts::fuzz {
namespace {

// "pacts-fz": keeps the campaign's RapidCheck keys apart from any other use of the same seed.
constexpr uint64_t kStreamTag = 0x70616374732d667aull;

bool parse_int(std::string_view s, int64_t& out) {
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

}  // namespace

spec::Result<Shard> parse_shard(const std::string& text) {
  const auto refuse = [&] {
    return spec::invalid_argument("--shard '" + text +
                                  "': expected K/N with integers 0 <= K < N, e.g. 3/8");
  };
  const size_t slash = text.find('/');
  if (slash == std::string::npos) return refuse();
  Shard s;
  if (!parse_int(std::string_view(text).substr(0, slash), s.index) ||
      !parse_int(std::string_view(text).substr(slash + 1), s.count))
    return refuse();
  if (s.count < 1 || s.index < 0 || s.index >= s.count) return refuse();
  return s;
}

std::mutex& rapidcheck_lock() {
  static std::mutex m;
  return m;
}

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t CaseId::global_index() const {
  return static_cast<uint64_t>(index) * static_cast<uint64_t>(shard.count) +
         static_cast<uint64_t>(shard.index);
}

Draw draw_of(const CaseId& id) {
  const uint64_t g = id.global_index();
  Draw d;
  // Uniform over 0..100: small sizes give the small cases shrinking would reach, the nominal
  // size the whole structure space (generators.cpp resizes its index picks to 100).
  d.size = static_cast<int>(mix64(g ^ mix64(id.campaign_seed ^ kStreamTag)) % 101);
  // g -> g + c -> mix64 is a bijection for a fixed campaign seed: distinct cases, distinct seeds.
  d.data_seed = mix64(g + mix64(id.campaign_seed));
  return d;
}

std::optional<Generated> generate(const rc::Gen<conformance::CaseSpec>& gen, const CaseId& id,
                                  std::string* why) {
  const Draw d = draw_of(id);
  const rc::Random random(rc::Random::Key{id.campaign_seed, id.global_index(), kStreamTag, 0});
  std::lock_guard<std::mutex> lock(rapidcheck_lock());
  try {
    Generated g{gen(random, d.size), {}};
    g.spec = g.shrinkable.value();
    g.spec.seed = d.data_seed;
    return g;
  } catch (const rc::GenerationFailure& e) {
    if (why) *why = e.what();
    return std::nullopt;
  }
}

ShrinkResult shrink(const Generated& failing, const conformance::Outcome& first,
                    uint64_t data_seed, const CheckFn& check, const ShrinkLimits& limits,
                    const std::atomic<bool>& stop) {
  ShrinkResult r{failing.spec, first, 0, 0, false};
  rc::Shrinkable<conformance::CaseSpec> current = failing.shrinkable;
  bool improved = true;
  while (improved) {
    improved = false;
    rc::Seq<rc::Shrinkable<conformance::CaseSpec>> candidates;
    {
      std::lock_guard<std::mutex> lock(rapidcheck_lock());
      candidates = current.shrinks();
    }
    for (;;) {
      if (r.steps >= limits.max_steps || r.tries >= limits.max_tries ||
          stop.load(std::memory_order_relaxed)) {
        r.stopped = true;
        return r;
      }
      rc::Maybe<rc::Shrinkable<conformance::CaseSpec>> next;
      conformance::CaseSpec spec;
      bool generated = true;
      {
        std::lock_guard<std::mutex> lock(rapidcheck_lock());
        next = candidates.next();
        // A shrink the generator cannot produce is dropped, as RapidCheck's shrinker drops it.
        if (next) try {
            spec = next->value();
          } catch (const rc::GenerationFailure&) {
            generated = false;
          }
      }
      if (!next) break;
      if (!generated) continue;
      spec.seed = data_seed;
      ++r.tries;
      const conformance::Outcome o = check(spec);
      if (o.verdict != first.verdict) continue;
      r.minimal = std::move(spec);
      r.outcome = o;
      ++r.steps;
      current = *next;
      improved = true;
      break;
    }
  }
  return r;
}

}  // namespace pacts::fuzz
