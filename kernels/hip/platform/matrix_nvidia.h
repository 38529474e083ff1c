// pacts HIP platform layer, NVIDIA side: the matrix-unit and asynchronous-copy instructions of
// the tensor-core tile kernel (src/kernel_mma.h), as inline PTX: mma.sync, ldmatrix and cp.async
// for sm_80 and later, the bulk copies and transaction barriers for sm_90 (the build targets
// sm_90). Include "platform/gpu.h", never this file: it is the only place that names
// these instructions, so nothing outside platform/ knows the vendor.
//
// Operand layouts are those of the PTX ISA, "Matrix fragments for mma.m16n8k16" (bf16): per
// lane g = lane / 4, q = lane % 4,
//   A (16 x 16, row major)  a0: (g, 2q..2q+1)  a1: (g+8, 2q..)  a2: (g, 2q+8..)  a3: (g+8, 2q+8..)
//   B (16 x 8, "col")       b0: (k 2q..2q+1, n g)  b1: (k 2q+8.., n g)
//   C (16 x 8, fp32)        c0,c1: (g, 2q..2q+1)  c2,c3: (g+8, 2q..2q+1)
// and ldmatrix: lanes 8m..8m+7 name the 8 row addresses (16 bytes each) of matrix m; lane l
// receives of each matrix the two elements (l / 4, 2 (l % 4)..+1), or with .trans the two
// elements (2 (l % 4)..+1, l / 4).
#pragma once

#include <cstdint>

// The tile kernel of src/kernel_mma.h exists for this vendor (gpu.h defines 0 for the others).
#define PACTS_HIP_MATRIX_UNIT 1

namespace pacts::gpu {

// A 32-bit shared-memory address (the state space of ldmatrix and cp.async).
__device__ inline uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared without registers, bypassing L1 (.cg): every KV byte is read once.
__device__ inline void cp_async16(void* smem_dst, const void* global_src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(smem_dst)),
               "l"(global_src)
               : "memory");
}
__device__ inline void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most kPending of this thread's committed groups are still in flight.
template <int kPending>
__device__ inline void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// sm_90 bulk copies and transaction barriers (PTX ISA "cp.async.bulk", "mbarrier"): the bf16 tile
// kernel moves a whole contiguous K or V row (16-byte aligned, a multiple of 16 bytes) with one
// instruction, and its warp waits for a stage's rows on the stage's barrier, which completes its
// phase when the expected bytes have landed and its one arrival was made.
__device__ inline void mbarrier_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count)
               : "memory");
}
// Makes barrier initialisations visible to the asynchronous proxy (the bulk copies' completion).
__device__ inline void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// Orders this thread's earlier shared-memory accesses (loads, stores) before later accesses of
// the asynchronous proxy (a bulk copy into memory that was read or written as ordinary memory).
__device__ inline void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// The one arrival of a phase, announcing `bytes` of bulk copies that complete on the barrier.
__device__ inline void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile(
      "{\n.reg .b64 st;\nmbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}\n" ::"r"(
          smem_addr(bar)),
      "r"(bytes)
      : "memory");
}
// One arrival (release: this thread's earlier shared-memory writes are visible to the thread that
// sees the phase complete).
__device__ inline void mbarrier_arrive(uint64_t* bar) {
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(
                   smem_addr(bar))
               : "memory");
}
// Announces `bytes` of bulk copies that complete on the barrier's current phase, without arriving.
__device__ inline void mbarrier_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)),
               "r"(bytes)
               : "memory");
}
// Waits until the phase of parity `parity` has completed (acquire: the copies' bytes are visible).
__device__ inline void mbarrier_wait_parity(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred done;\nwait_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
}
// `bytes` (a multiple of 16; both addresses 16-byte aligned) global -> shared, completing on `bar`.
__device__ inline void cp_async_bulk_row(void* smem_dst, const void* global_src, uint32_t bytes,
                                         uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::
          "r"(smem_addr(smem_dst)),
      "l"(global_src), "r"(bytes), "r"(smem_addr(bar))
      : "memory");
}

// Two OCP fp8 codes (the first in the low byte of `codes`) as two fp32 values, exactly: every e4m3
// and e5m2 value is an fp16 value (the conversion to fp16 is exact, NaN stays NaN, e5m2's Inf
// stays Inf), and fp16 to fp32 is exact. x holds the first code's value.
__device__ inline float2 f16x2_to_float2(uint32_t h) {
  float lo, hi;
  asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %2;\ncvt.f32.f16 %0, l;\ncvt.f32.f16 %1, h;\n}\n"
      : "=f"(lo), "=f"(hi)
      : "r"(h));
  return make_float2(lo, hi);
}
// Two e4m3fn codes (the first in the low byte) as an fp16 pair (the first in the low half),
// exactly: one conversion instruction.
__device__ inline uint32_t e4m3x2_to_f16x2(uint32_t codes) {
  uint32_t h;
  asm("{\n.reg .b16 c;\ncvt.u16.u32 c, %1;\ncvt.rn.f16x2.e4m3x2 %0, c;\n}\n" : "=r"(h) : "r"(codes));
  return h;
}
__device__ inline float2 e4m3x2_to_float2(uint32_t codes) {
  return f16x2_to_float2(e4m3x2_to_f16x2(codes));
}
// The same for the two codes of one 16-bit half of `word` (the low half, or the high one where
// kHigh): the half is the conversion's operand as it stands, so no instruction takes the bytes
// apart first. `high` is a constant where the callers' loops are unrolled.
__device__ inline uint32_t e4m3x2_half_to_f16x2(uint32_t word, bool high) {
  uint32_t h;
  if (high)
    asm("{\n.reg .b16 l, c;\nmov.b32 {l, c}, %1;\ncvt.rn.f16x2.e4m3x2 %0, c;\n}\n" : "=r"(h) : "r"(word));
  else
    asm("{\n.reg .b16 c, u;\nmov.b32 {c, u}, %1;\ncvt.rn.f16x2.e4m3x2 %0, c;\n}\n" : "=r"(h) : "r"(word));
  return h;
}
__device__ inline uint32_t e5m2x2_half_to_f16x2(uint32_t word, bool high) {
  uint32_t h;
  if (high)
    asm("{\n.reg .b16 l, c;\nmov.b32 {l, c}, %1;\ncvt.rn.f16x2.e5m2x2 %0, c;\n}\n" : "=r"(h) : "r"(word));
  else
    asm("{\n.reg .b16 c, u;\nmov.b32 {c, u}, %1;\ncvt.rn.f16x2.e5m2x2 %0, c;\n}\n" : "=r"(h) : "r"(word));
  return h;
}
__device__ inline float2 e5m2x2_to_float2(uint32_t codes) {
  uint32_t h;
  asm("{\n.reg .b16 c;\ncvt.u16.u32 c, %1;\ncvt.rn.f16x2.e5m2x2 %0, c;\n}\n" : "=r"(h) : "r"(codes));
  return f16x2_to_float2(h);
}

}  // namespace pacts::gpu

// Lane `src`'s value of x; whether any lane's flag is set (whole warp).
#define PACTS_SHFL(x, src) __shfl_sync(0xFFFFFFFFu, (x), (src))
#define PACTS_ANY(flag) (__any_sync(0xFFFFFFFFu, (flag)) != 0)

namespace pacts::gpu {

__device__ inline void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(row)));
}
__device__ inline void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(row)));
}

// c += A . B, bf16 operands, fp32 accumulation (mma.sync m16n8k16).
__device__ inline void mma_bf16_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                      uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// c += A . B, fp16 operands, fp32 accumulation (mma.sync m16n8k16): the fragment layouts of
// mma_bf16_16816.
__device__ inline void mma_f16_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                     uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The transpose of an 8 x 8 matrix of 16-bit elements held in the C-fragment layout (lane l: row
// l / 4, columns 2 (l % 4) and + 1, the lower column in the low half), in the same layout.
__device__ inline uint32_t movmatrix_trans(uint32_t x) {
  uint32_t r;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(r) : "r"(x));
  return r;
}

// Two fp32 values rounded to nearest even to bf16 (NaN stays NaN, overflow gives Inf), packed
// with `lo` in the low half: the element of the lower column index of a fragment pair.
__device__ inline uint32_t pack_bf16x2_rn(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// The same rounded to fp16 (RNE, subnormals kept, overflow gives Inf).
__device__ inline uint32_t pack_f16x2_rn(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

}  // namespace pacts::gpu
