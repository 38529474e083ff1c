// A seeded generator whose every output is specified here, bit for bit, on every platform and
// standard library: case files regenerate exact bytes from a seed, so nothing may depend on
// implementation-defined std:: distributions or on libm rounding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace pacts::conformance {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}

  // splitmix64 (Steele, Lea, Flood 2014).
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n), n >= 1 (modulo; the bias, below n / 2^64, is irrelevant here).
  uint64_t below(uint64_t n) { return next() % n; }
  int32_t range(int32_t lo, int32_t hi_inclusive) {
    return lo + static_cast<int32_t>(below(static_cast<uint64_t>(hi_inclusive - lo) + 1));
  }
  // Uniform in [0, 1) with 53 random bits: exact, no rounding.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // Approximately normal(0, sigma): Irwin-Hall sum of four uniforms, centred and scaled. Only
  // exactly rounded IEEE operations, so identical everywhere.
  double normal(double sigma) {
    const double s = uniform() + uniform() + uniform() + uniform() - 2.0;
    return s * 1.7320508075688772 * sigma;  // sqrt(3): variance of the sum is 1/3
  }
  template <class T>
  void shuffle(std::vector<T>& items) {
    for (std::size_t i = items.size(); i > 1; --i) std::swap(items[i - 1], items[below(i)]);
  }

 private:
  uint64_t state_;
};

}  // namespace pacts::conformance
