#include "case_stream.h"

#include <pacts/spec/validate.h>

#include <charconv>
#include <exception>

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
  const auto bounded = [&] {
    r.stopped = r.steps >= limits.max_steps || r.tries >= limits.max_tries ||
                stop.load(std::memory_order_relaxed);
    return r.stopped;
  };
  // The 2^16 low pages (CaseShape::low_pages) stay only when the failure needs them: while they
  // stay, every candidate builds and runs pools of up to 128 MiB each, and RapidCheck's smaller
  // candidates draw them even where the failing case had none (their pages fit the budget).
  bool without_low_pages = failing.spec.shape.low_pages == 0;
  // Checks a candidate and takes it when its outcome keeps the first verdict.
  const auto take = [&](conformance::CaseSpec spec) {
    spec.seed = data_seed;
    if (without_low_pages) spec.shape.low_pages = 0;
    ++r.tries;
    const conformance::Outcome o = check(spec);
    if (o.verdict != first.verdict) return false;
    r.minimal = std::move(spec);
    r.outcome = o;
    ++r.steps;
    return true;
  };
  if (!without_low_pages && !bounded()) {
    conformance::CaseSpec lean = failing.spec;
    lean.shape.low_pages = 0;
    without_low_pages = true;
    if (!take(std::move(lean))) without_low_pages = false;
  }
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
      if (bounded()) return r;
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
      if (!generated || !take(std::move(spec))) continue;
      current = *next;
      improved = true;
      break;
    }
  }
  // Structural reductions from the case RapidCheck left, first candidate that keeps the verdict.
  improved = true;
  while (improved) {
    improved = false;
    for (conformance::CaseSpec& spec : reductions(r.minimal)) {
      if (bounded()) return r;
      if (!take(std::move(spec))) continue;
      improved = true;
      break;
    }
  }
  return r;
}

namespace {

using conformance::CaseSpec;
using conformance::Override;

bool valid(const CaseSpec& spec) {
  try {
    return spec::validate_problem(conformance::case_problem(spec.shape, spec.seed)).is_ok();
  } catch (const std::exception&) {
    return false;
  }
}

bool is_key_tensor(Override::Tensor t) {
  return t == Override::Tensor::kK || t == Override::Tensor::kV || t == Override::Tensor::kKScale ||
         t == Override::Tensor::kVScale;
}

// Drops the overrides `gone` says are outside the reduced case.
template <typename Pred>
void drop_overrides(CaseSpec& s, Pred gone) {
  std::vector<Override> kept;
  for (const Override& o : s.overrides)
    if (!gone(o)) kept.push_back(o);
  s.overrides = std::move(kept);
}

}  // namespace

std::vector<CaseSpec> reductions(const CaseSpec& spec) {
  std::vector<CaseSpec> out;
  const auto add = [&](CaseSpec c) {
    if (valid(c)) out.push_back(std::move(c));
  };
  const conformance::CaseShape& sh = spec.shape;
  // One sequence fewer.
  if (sh.batch > 1 && static_cast<int32_t>(sh.contexts.size()) == sh.batch) {
    for (int32_t b = sh.batch - 1; b >= 0; --b) {
      CaseSpec c = spec;
      --c.shape.batch;
      c.shape.contexts.erase(c.shape.contexts.begin() + b);
      drop_overrides(c, [&](const Override& o) { return o.seq == b; });
      for (Override& o : c.overrides)
        if (o.seq > b) --o.seq;
      add(std::move(c));
    }
  }
  // One query token fewer.
  if (sh.q_len > 1) {
    CaseSpec c = spec;
    --c.shape.q_len;
    drop_overrides(c, [&](const Override& o) {
      return o.tensor == Override::Tensor::kQ && o.pos >= c.shape.q_len;
    });
    add(std::move(c));
  }
  // A sequence's context halved.
  for (size_t b = 0; b < sh.contexts.size(); ++b) {
    if (sh.contexts[b] <= 1) continue;
    CaseSpec c = spec;
    c.shape.contexts[b] /= 2;
    drop_overrides(c, [&](const Override& o) {
      return is_key_tensor(o.tensor) && o.seq == static_cast<int32_t>(b) && o.pos >= c.shape.contexts[b];
    });
    add(std::move(c));
  }
  // One query head per KV head, then one KV head.
  const int32_t group = sh.num_kv_heads > 0 ? sh.num_q_heads / sh.num_kv_heads : 1;
  if (group > 1) {
    CaseSpec c = spec;
    c.shape.num_q_heads = sh.num_kv_heads;
    drop_overrides(c, [&](const Override& o) {
      return (o.tensor == Override::Tensor::kQ || o.tensor == Override::Tensor::kSink) &&
             o.head >= c.shape.num_q_heads;
    });
    add(std::move(c));
  }
  if (sh.num_kv_heads > 1) {
    CaseSpec c = spec;
    c.shape.num_kv_heads = 1;
    c.shape.num_q_heads = group;
    drop_overrides(c, [&](const Override& o) {
      return is_key_tensor(o.tensor) ? o.head >= 1 : o.head >= group;
    });
    add(std::move(c));
  }
  if (sh.head_dim > 64) {
    CaseSpec c = spec;
    c.shape.head_dim = 64;
    drop_overrides(c, [&](const Override& o) {
      const bool mx_scale = o.tensor == Override::Tensor::kKScale || o.tensor == Override::Tensor::kVScale;
      return o.tensor != Override::Tensor::kSink && (mx_scale ? o.dim >= 2 : o.dim >= 64);
    });
    add(std::move(c));
  }
  if (sh.page_size > 8) {
    CaseSpec c = spec;
    c.shape.page_size /= 2;
    add(std::move(c));
  }
  // The options off, one at a time.
  const auto option = [&](auto&& edit) {
    CaseSpec c = spec;
    if (edit(c.shape)) add(std::move(c));
  };
  option([](auto& s) { return s.window != 0 ? (s.window = 0, true) : false; });
  option([](auto& s) { return s.softcap != 0 ? (s.softcap = 0, true) : false; });
  option([](auto& s) { return s.sinks ? (s.sinks = false, true) : false; });
  option([](auto& s) { return s.lse ? (s.lse = false, true) : false; });
  option([](auto& s) { return s.q_gap != 0 ? (s.q_gap = 0, true) : false; });
  option([](auto& s) { return s.out_gap != 0 ? (s.out_gap = 0, true) : false; });
  option([](auto& s) { return s.q_head_major ? (s.q_head_major = false, true) : false; });
  option([](auto& s) { return s.out_head_major ? (s.out_head_major = false, true) : false; });
  option([](auto& s) { return s.bt_extra_cols != 0 ? (s.bt_extra_cols = 0, true) : false; });
  option([](auto& s) { return s.extra_pages != 0 ? (s.extra_pages = 0, true) : false; });
  option([](auto& s) { return s.share_pages ? (s.share_pages = false, true) : false; });
  option([](auto& s) { return s.low_pages != 0 ? (s.low_pages = 0, true) : false; });
  option([](auto& s) {
    using L = conformance::PoolLayout;
    if (s.k_layout == L::kNHD && s.v_layout == L::kNHD) return false;
    s.k_layout = s.v_layout = L::kNHD;
    return true;
  });
  // One override fewer.
  for (size_t i = 0; i < spec.overrides.size(); ++i) {
    CaseSpec c = spec;
    c.overrides.erase(c.overrides.begin() + static_cast<std::ptrdiff_t>(i));
    add(std::move(c));
  }
  return out;
}

}  // namespace pacts::fuzz
