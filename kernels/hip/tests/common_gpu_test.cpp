// kernels/common's math run on the GPU (its unit tests in device code): every code
// of every format dequantised by a kernel, every e2m1 x e8m0 product, and the RNE output rounding
// of sampled binary64 values, each compared on the host with the spec's codecs
// (pacts::spec::decode / encode), bit for bit; and the query requantisation of
// spec/tolerance.md §2.1 (common/requant.h: row exponent, codes, combined logit factor) on random
// fp32 rows against pacts::spec::requantize_row; on NVIDIA, the split kernels' MXFP4 decode by
// table (src/mx_table.h: the device's byte permutes and bf16 pack) against the same functions run
// on the host, which tests/mx_table_test.cpp proves against the scalar decode. Exit 0 pass, 1
// fail, 77 no GPU (ctest: skipped).
#include "platform/gpu.h"

#include "common/dequant.h"
#include "common/requant.h"
#include "common/round.h"
#include "src/kernel.h"
#include "src/mx_table.h"

#include <pacts/spec/formats.h>
#include <pacts/spec/requant.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

namespace {

using namespace pacts::kernels::common;

__global__ void decode_kernel(pacts_format f, uint32_t count, float* out) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) out[i] = decode_code(f, i);
}

// The decode loops' pair decoder (src/kernel.h decode_kv2, NVIDIA's fp8 conversions among them):
// code i with code count - 1 - i, so the two halves of a pair never hold the same code.
template <pacts_format kFormat>
__global__ void pair_kernel(uint32_t count, float* out) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count) return;
  pacts::kernels::hip::detail::decode_kv2<kFormat>(i, count - 1 - i, out[2 * i], out[2 * i + 1]);
}

__global__ void mx_kernel(float* out) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < 16u * 256u) out[i] = mx_value(static_cast<uint8_t>(i & 15u), static_cast<uint8_t>(i >> 4));
}

#if PACTS_HIP_MATRIX_UNIT
// Scale byte blockIdx.x, sweep word threadIdx.x (byte i = (k + {0, 37, 101, 211}[i]) mod 256),
// both nibble orders (y = 0 low-first), the key (z = 0) and value (z = 1) tables: 4 words each.
struct DevicePack {
  __device__ uint32_t operator()(float lo, float hi) const { return pacts::gpu::pack_bf16x2_rn(lo, hi); }
};
__host__ __device__ inline uint32_t sweep_word(uint32_t k) {
  return (k & 0xFFu) | ((k + 37u) & 0xFFu) << 8 | ((k + 101u) & 0xFFu) << 16 | ((k + 211u) & 0xFFu) << 24;
}
__global__ void mx_table_kernel(uint32_t* out) {
  namespace d = pacts::kernels::hip::detail;
  const uint32_t e = blockIdx.x, k = threadIdx.x, order = blockIdx.y, values = blockIdx.z;
  const float scale = e8m0_to_float(static_cast<uint8_t>(e));
  const d::MxTable t = values ? d::mx_table<true>(scale, DevicePack{}) : d::mx_table<false>(scale, DevicePack{});
  const bool swap = d::mx_swap_nibbles(order ? PACTS_NIBBLE_HIGH_FIRST : PACTS_NIBBLE_LOW_FIRST);
  uint32_t w[4];
  d::mx_decode8(d::mx_low_first(sweep_word(k), swap), t, w);
  uint32_t* at = out + (((values * 2 + order) * 256 + e) * 256 + k) * 5;
  for (int i = 0; i < 4; ++i) at[i] = w[i];
  at[4] = t.tiny;
}
#endif

__global__ void round_kernel(const double* x, uint32_t n, uint32_t* bf16, uint32_t* fp16,
                             uint32_t* fp32) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  bf16[i] = round_to_bf16(x[i]);
  fp16[i] = round_to_fp16(x[i]);
  fp32[i] = round_to_fp32(x[i]);
}

// One row of 32 folded query values per thread: the rule's exponent and codes, as a kernel runs
// them, plus the combined factor of the row's exponent with a per-row scale.
__global__ void requant_kernel(const float* rows, const float* scales, uint32_t n_rows, int fnuz,
                               int* exponent, uint8_t* codes, float* significand, int* factor_exp) {
  const uint32_t r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= n_rows) return;
  const Fp8Target t = requant_target(fnuz ? PACTS_FORMAT_E4M3FNUZ : PACTS_FORMAT_E4M3FN);
  uint32_t a = 0;
  for (int d = 0; d < 32; ++d) a = max(a, requant_magnitude(rows[32 * r + d]));
  const int e = requant_exponent(a, t);
  exponent[r] = e;
  for (int d = 0; d < 32; ++d) codes[32 * r + d] = requant_code(rows[32 * r + d], e, t);
  const LogitFactor f = logit_factor(scales[r], e);
  significand[r] = f.significand;
  factor_exp[r] = f.exponent;
}

bool same_float(float got, double want) {
  const float w = static_cast<float>(want);  // every decoded value is exact in fp32 or overflows
  if (std::isnan(w)) return std::isnan(got);
  uint32_t a, b;
  std::memcpy(&a, &got, 4);
  std::memcpy(&b, &w, 4);
  return a == b;
}

template <class T>
T* device_copy(const std::vector<T>& host) {
  void* p = nullptr;
  if (hipMalloc(&p, host.size() * sizeof(T)) != hipSuccess) return nullptr;
  if (hipMemcpy(p, host.data(), host.size() * sizeof(T), hipMemcpyHostToDevice) != hipSuccess) return nullptr;
  return static_cast<T*>(p);
}

template <class T>
std::vector<T> host_copy(const T* device, size_t n) {
  std::vector<T> host(n);
  if (hipMemcpy(host.data(), device, n * sizeof(T), hipMemcpyDeviceToHost) != hipSuccess) host.clear();
  return host;
}

}  // namespace

int main() {
  int devices = 0;
  if (hipGetDeviceCount(&devices) != hipSuccess || devices == 0) {
    std::printf("common_gpu_test: no GPU on this machine: skipped\n");
    return 77;
  }
  int failures = 0;
  int64_t checked = 0;
  const pacts_format formats[] = {PACTS_FORMAT_BF16,     PACTS_FORMAT_FP16, PACTS_FORMAT_E4M3FN,
                                  PACTS_FORMAT_E4M3FNUZ, PACTS_FORMAT_E5M2, PACTS_FORMAT_E5M2FNUZ,
                                  PACTS_FORMAT_E2M1,     PACTS_FORMAT_E8M0};
  for (pacts_format f : formats) {
    const uint32_t count = static_cast<uint32_t>(pacts::spec::code_count(f));
    float* d_out = nullptr;
    if (hipMalloc(reinterpret_cast<void**>(&d_out), count * sizeof(float)) != hipSuccess) return 1;
    hipLaunchKernelGGL(decode_kernel, dim3((count + 255) / 256), dim3(256), 0, nullptr, f, count, d_out);
    if (hipGetLastError() != hipSuccess || hipDeviceSynchronize() != hipSuccess) return 1;
    const std::vector<float> got = host_copy(d_out, count);
    (void)hipFree(d_out);
    for (uint32_t c = 0; c < count; ++c, ++checked)
      if (!same_float(got[c], pacts::spec::decode(f, c)) && failures++ < 10)
        std::printf("FAIL %s code 0x%x: GPU %.9g, spec %.17g\n",
                    std::string(pacts::spec::format_name(f)).c_str(), c, got[c], pacts::spec::decode(f, c));
  }
  const auto check_pairs = [&](pacts_format f, auto kernel) {
    const uint32_t count = static_cast<uint32_t>(pacts::spec::code_count(f));
    float* d_out = nullptr;
    if (hipMalloc(reinterpret_cast<void**>(&d_out), 2 * count * sizeof(float)) != hipSuccess) return false;
    hipLaunchKernelGGL(kernel, dim3((count + 255) / 256), dim3(256), 0, nullptr, count, d_out);
    if (hipGetLastError() != hipSuccess || hipDeviceSynchronize() != hipSuccess) return false;
    const std::vector<float> got = host_copy(d_out, 2 * count);
    (void)hipFree(d_out);
    for (uint32_t c = 0; c < count; ++c)
      for (uint32_t h = 0; h < 2; ++h, ++checked) {
        const uint32_t code = h == 0 ? c : count - 1 - c;
        if (!same_float(got[2 * c + h], pacts::spec::decode(f, code)) && failures++ < 10)
          std::printf("FAIL pair decode %s code 0x%x: GPU %.9g, spec %.17g\n",
                      std::string(pacts::spec::format_name(f)).c_str(), code, got[2 * c + h],
                      pacts::spec::decode(f, code));
      }
    return true;
  };
  if (!check_pairs(PACTS_FORMAT_FP16, pair_kernel<PACTS_FORMAT_FP16>) ||
      !check_pairs(PACTS_FORMAT_E4M3FN, pair_kernel<PACTS_FORMAT_E4M3FN>) ||
      !check_pairs(PACTS_FORMAT_E4M3FNUZ, pair_kernel<PACTS_FORMAT_E4M3FNUZ>) ||
      !check_pairs(PACTS_FORMAT_E5M2, pair_kernel<PACTS_FORMAT_E5M2>) ||
      !check_pairs(PACTS_FORMAT_E5M2FNUZ, pair_kernel<PACTS_FORMAT_E5M2FNUZ>))
    return 1;
  {
    float* d_out = nullptr;
    if (hipMalloc(reinterpret_cast<void**>(&d_out), 4096 * sizeof(float)) != hipSuccess) return 1;
    hipLaunchKernelGGL(mx_kernel, dim3(16), dim3(256), 0, nullptr, d_out);
    if (hipGetLastError() != hipSuccess || hipDeviceSynchronize() != hipSuccess) return 1;
    const std::vector<float> got = host_copy(d_out, 4096);
    (void)hipFree(d_out);
    for (uint32_t i = 0; i < 4096; ++i, ++checked) {
      const double want = pacts::spec::decode_e2m1(static_cast<uint8_t>(i & 15u)) *
                          pacts::spec::decode_e8m0(static_cast<uint8_t>(i >> 4));
      if (!same_float(got[i], want) && failures++ < 10)
        std::printf("FAIL e2m1 0x%x x e8m0 0x%x: GPU %.9g, spec %.17g\n", i & 15u, i >> 4, got[i], want);
    }
  }
#if PACTS_HIP_MATRIX_UNIT
  {
    const uint32_t n = 2 * 2 * 256 * 256 * 5;
    uint32_t* d_out = nullptr;
    if (hipMalloc(reinterpret_cast<void**>(&d_out), n * 4) != hipSuccess) return 1;
    hipLaunchKernelGGL(mx_table_kernel, dim3(256, 2, 2), dim3(256), 0, nullptr, d_out);
    if (hipGetLastError() != hipSuccess || hipDeviceSynchronize() != hipSuccess) return 1;
    const std::vector<uint32_t> got = host_copy(d_out, n);
    (void)hipFree(d_out);
    namespace d = pacts::kernels::hip::detail;
    const auto host_pack = [](float lo, float hi) {
      const auto bits = [](float x) { return std::isnan(x) ? 0x7FFFu : round_to_bf16(static_cast<double>(x)); };
      return bits(lo) | bits(hi) << 16;
    };
    for (uint32_t values = 0; values < 2; ++values)
      for (uint32_t order = 0; order < 2; ++order)
        for (uint32_t e = 0; e < 256; ++e) {
          const float scale = e8m0_to_float(static_cast<uint8_t>(e));
          const d::MxTable t = values ? d::mx_table<true>(scale, host_pack) : d::mx_table<false>(scale, host_pack);
          const bool swap = d::mx_swap_nibbles(order ? PACTS_NIBBLE_HIGH_FIRST : PACTS_NIBBLE_LOW_FIRST);
          for (uint32_t k = 0; k < 256; ++k, ++checked) {
            uint32_t w[4];
            d::mx_decode8(d::mx_low_first(sweep_word(k), swap), t, w);
            const uint32_t* at = got.data() + (((values * 2 + order) * 256 + e) * 256 + k) * 5;
            bool ok = at[4] == static_cast<uint32_t>(t.tiny);
            for (int i = 0; i < 4; ++i)
              for (int h = 0; h < 2; ++h) {  // a NaN of either payload is a NaN
                const uint32_t g16 = at[i] >> (16 * h) & 0xFFFFu, w16 = w[i] >> (16 * h) & 0xFFFFu;
                const bool nan = (w16 & 0x7F80u) == 0x7F80u && (w16 & 0x7Fu) != 0;
                ok = ok && (nan ? (g16 & 0x7F80u) == 0x7F80u && (g16 & 0x7Fu) != 0 : g16 == w16);
              }
            if (!ok && failures++ < 10)
              std::printf("FAIL MXFP4 table (%s, %s first) scale byte 0x%x word 0x%08x\n", values ? "V" : "K",
                          order ? "high" : "low", e, sweep_word(k));
          }
        }
  }
#endif
  {
    // Every bf16/fp16 midpoint region is covered on the CPU; here: random binary64 values over
    // the whole range, exact midpoints of bf16 and fp16, and their neighbours.
    std::mt19937_64 rng(20261129);
    std::vector<double> x;
    for (int i = 0; i < 200000; ++i) {
      const double significand = 1.0 + static_cast<double>(rng() >> 11) * 0x1.0p-53;
      const int exponent = static_cast<int>(rng() % 300) - 150;  // fp32 subnormals to overflow
      x.push_back((rng() & 1 ? -1.0 : 1.0) * std::ldexp(significand, exponent));
    }
    for (uint32_t c = 0; c < 0x7F80; ++c) {
      const double lo = pacts::spec::decode(PACTS_FORMAT_BF16, c), hi = pacts::spec::decode(PACTS_FORMAT_BF16, c + 1);
      const double mid = (lo + hi) / 2;
      x.insert(x.end(), {mid, std::nextafter(mid, 0.0), std::nextafter(mid, INFINITY), -mid});
    }
    const uint32_t n = static_cast<uint32_t>(x.size());
    double* d_x = device_copy(x);
    uint32_t *d_b = nullptr, *d_h = nullptr, *d_s = nullptr;
    if (!d_x || hipMalloc(reinterpret_cast<void**>(&d_b), n * 4) != hipSuccess ||
        hipMalloc(reinterpret_cast<void**>(&d_h), n * 4) != hipSuccess ||
        hipMalloc(reinterpret_cast<void**>(&d_s), n * 4) != hipSuccess)
      return 1;
    hipLaunchKernelGGL(round_kernel, dim3((n + 255) / 256), dim3(256), 0, nullptr, d_x, n, d_b, d_h, d_s);
    if (hipGetLastError() != hipSuccess || hipDeviceSynchronize() != hipSuccess) return 1;
    const std::vector<uint32_t> b = host_copy(d_b, n), h = host_copy(d_h, n), s = host_copy(d_s, n);
    (void)hipFree(d_x);
    (void)hipFree(d_b);
    (void)hipFree(d_h);
    (void)hipFree(d_s);
    const auto want = [](pacts_format f, double v) {
      return pacts::spec::encode(f, v, pacts::spec::Overflow::kNonSaturate);
    };
    for (uint32_t i = 0; i < n; ++i, checked += 3) {
      const bool ok = b[i] == want(PACTS_FORMAT_BF16, x[i]) && h[i] == want(PACTS_FORMAT_FP16, x[i]) &&
                      s[i] == want(PACTS_FORMAT_FP32, x[i]);
      if (!ok && failures++ < 10)
        std::printf("FAIL rounding of %.17g: GPU bf16 0x%x fp16 0x%x fp32 0x%x\n", x[i], b[i], h[i], s[i]);
    }
  }
  for (int fnuz = 0; fnuz < 2; ++fnuz) {
    // Rows of random fp32 bit patterns in a random binade window, NaNs and zeros among them.
    std::mt19937_64 rng(20261201 + fnuz);
    const uint32_t n_rows = 20000;
    std::vector<float> rows(32 * n_rows), scales(n_rows);
    for (uint32_t r = 0; r < n_rows; ++r) {
      const uint32_t top = static_cast<uint32_t>(rng() % 255), spread = static_cast<uint32_t>(rng() % 48);
      for (int d = 0; d < 32; ++d) {
        const uint32_t e = top > spread ? top - static_cast<uint32_t>(rng() % (spread + 1)) : top;
        uint32_t bits = (static_cast<uint32_t>(rng() & 1) << 31) | (e << 23) |
                        (static_cast<uint32_t>(rng()) & 0x7FFFFFu);
        if (rng() % 3 == 0) bits &= 0xFFF00000u | (1u << (rng() % 20));
        if (rng() % 100 == 0) bits = 0x7FC00001u;
        std::memcpy(&rows[32 * r + d], &bits, 4);
      }
      const uint32_t sbits = static_cast<uint32_t>(rng()) & 0x7F7FFFFFu;
      std::memcpy(&scales[r], &sbits, 4);
    }
    float* d_rows = device_copy(rows);
    float* d_scales = device_copy(scales);
    int *d_e = nullptr, *d_fe = nullptr;
    uint8_t* d_codes = nullptr;
    float* d_sig = nullptr;
    if (!d_rows || !d_scales || hipMalloc(reinterpret_cast<void**>(&d_e), n_rows * 4) != hipSuccess ||
        hipMalloc(reinterpret_cast<void**>(&d_fe), n_rows * 4) != hipSuccess ||
        hipMalloc(reinterpret_cast<void**>(&d_sig), n_rows * 4) != hipSuccess ||
        hipMalloc(reinterpret_cast<void**>(&d_codes), 32 * n_rows) != hipSuccess)
      return 1;
    hipLaunchKernelGGL(requant_kernel, dim3((n_rows + 127) / 128), dim3(128), 0, nullptr, d_rows,
                       d_scales, n_rows, fnuz, d_e, d_codes, d_sig, d_fe);
    if (hipGetLastError() != hipSuccess || hipDeviceSynchronize() != hipSuccess) return 1;
    const std::vector<int> e = host_copy(d_e, n_rows), fe = host_copy(d_fe, n_rows);
    const std::vector<uint8_t> codes = host_copy(d_codes, 32 * n_rows);
    const std::vector<float> sig = host_copy(d_sig, n_rows);
    for (void* p : {static_cast<void*>(d_rows), static_cast<void*>(d_scales), static_cast<void*>(d_e),
                    static_cast<void*>(d_fe), static_cast<void*>(d_sig), static_cast<void*>(d_codes)})
      (void)hipFree(p);
    const pacts_format target = fnuz ? PACTS_FORMAT_E4M3FNUZ : PACTS_FORMAT_E4M3FN;
    for (uint32_t r = 0; r < n_rows; ++r, checked += 34) {
      const pacts::spec::RequantRow want = pacts::spec::requantize_row(rows.data() + 32 * r, 32, target);
      bool ok = e[r] == want.exponent;
      for (int d = 0; d < 32; ++d) ok = ok && codes[32 * r + d] == want.codes[static_cast<size_t>(d)];
      ok = ok && std::ldexp(static_cast<double>(sig[r]), fe[r]) ==
                     std::ldexp(static_cast<double>(scales[r]), want.exponent);
      if (!ok && failures++ < 10)
        std::printf("FAIL requantisation (%s) of row %u: GPU e %d, spec e %d\n",
                    std::string(pacts::spec::format_name(target)).c_str(), r, e[r], want.exponent);
    }
  }
  std::printf("common_gpu_test: %lld values checked on the GPU against the spec codecs, %d failed\n",
              static_cast<long long>(checked), failures);
  return failures == 0 ? 0 : 1;
}
