/* pacts problem descriptor: the one description of a paged-attention decode call.
 *
 * C-compatible (plain structs, fixed-width integers, no C++ features) so that the spec
 * library, the kernel API and the C ABI for external backends all share it.
 * Normative meaning: spec/operator.md (§ numbers cited below). Validation: spec/refusals.md.
 *
 * Units: every stride is counted in ELEMENTS of the buffer's storage format, except for
 * e2m1 (MXFP4) data and e8m0 scale pools, whose strides are counted in BYTES (one byte holds
 * two e2m1 elements; one e8m0 scale is one byte). Strides are signed 64-bit but must be >= 0.
 */
#ifndef PACTS_PROBLEM_H
#define PACTS_PROBLEM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PACTS_ABI_VERSION 1u

/* spec/formats.md §1: storage formats. Values are stable (they appear in case files). */
typedef enum pacts_format {
  PACTS_FORMAT_INVALID = 0,
  PACTS_FORMAT_BF16 = 1,
  PACTS_FORMAT_FP16 = 2,
  PACTS_FORMAT_FP32 = 3,      /* output and LSE only */
  PACTS_FORMAT_E4M3FN = 4,    /* OCP fp8, max 448, NaN 0x7F/0xFF, no Inf */
  PACTS_FORMAT_E4M3FNUZ = 5,  /* AMD gfx942 fp8, max 240, NaN 0x80 only */
  PACTS_FORMAT_E5M2 = 6,      /* OCP fp8, Inf 0x7C/0xFC */
  PACTS_FORMAT_E5M2FNUZ = 7,  /* max 57344, NaN 0x80 only */
  PACTS_FORMAT_E2M1 = 8,      /* fp4, packed two per byte; KV data of MXFP4 */
  PACTS_FORMAT_E8M0 = 9,      /* exponent-only scale byte; MXFP4 block scales */
  /* Forces a 32-bit enum whose range is every int32 value: the ABI does not depend on the
   * compiler, and a caller's out-of-range value is refused by validate(), never undefined. */
  PACTS_FORMAT_MAX_ENUM = 0x7FFFFFFF
} pacts_format;

/* spec/formats.md §3: how K or V values are scaled after decoding. */
typedef enum pacts_scale_mode {
  PACTS_SCALE_NONE = 0,       /* value = decode(element) */
  PACTS_SCALE_PER_TENSOR = 1, /* value = decode(element) * problem scalar (k_scale / v_scale) */
  PACTS_SCALE_PER_TOKEN = 2,  /* value = decode(element) * fp32 scale[page][head][token] */
  PACTS_SCALE_MX_BLOCK = 3,   /* value = decode_e2m1(nibble) * decode_e8m0(scale byte of d / 32) */
  PACTS_SCALE_MAX_ENUM = 0x7FFFFFFF
} pacts_scale_mode;

/* spec/formats.md §2: which nibble of an MXFP4 byte holds the even element. */
typedef enum pacts_nibble_order {
  PACTS_NIBBLE_LOW_FIRST = 0, /* element 2i in bits 3..0 (OCP, ONNX, PyTorch, aiter) */
  PACTS_NIBBLE_HIGH_FIRST = 1, /* element 2i in bits 7..4 */
  PACTS_NIBBLE_MAX_ENUM = 0x7FFFFFFF
} pacts_nibble_order;

/* spec/operator.md §3: a K or V pool. Element (page p, kv head h, token t, dim d) sits at
 *   p*s_page + h*s_head + t*s_tok + (d / chunk)*s_chunk + (d % chunk)
 * (in elements; for e2m1 read d as the byte index d/2 and every stride as bytes).
 * chunk = head_dim gives NHD / HND pools; chunk = 16 bytes / element size gives the
 * x-packed K cache; chunk = 1 with s_tok = 1 gives the dim-major ("trans_v") V cache. */
typedef struct pacts_pool_layout {
  int64_t s_page;
  int64_t s_head;
  int64_t s_tok;
  int64_t s_chunk;
  int32_t chunk;
  int32_t reserved0;
} pacts_pool_layout;

/* spec/operator.md §3: per-token fp32 scales (elements) or MXFP4 e8m0 scales (bytes).
 * Scale of (p, h, t) sits at p*s_page + h*s_head + t*s_tok; for MX_BLOCK, block b = d / 32
 * adds b*s_block. */
typedef struct pacts_scale_layout {
  int64_t s_page;
  int64_t s_head;
  int64_t s_tok;
  int64_t s_block;
} pacts_scale_layout;

/* spec/operator.md §3: query [B, L, Hq, D] or output [B, L, Hq, D]; D is contiguous. */
typedef struct pacts_row_layout {
  int64_t s_batch;
  int64_t s_tok;
  int64_t s_head;
} pacts_row_layout;

/* The problem: shape, formats, layouts, scale modes, options. Everything here is host-visible
 * and is checked by pacts_validate / pacts::spec::validate before any buffer is touched. */
typedef struct pacts_problem {
  uint32_t abi_version;       /* PACTS_ABI_VERSION */

  /* Shape (spec/operator.md §2). */
  int32_t batch;              /* B >= 0 */
  int32_t q_len;              /* L, 1..16 */
  int32_t num_q_heads;        /* Hq */
  int32_t num_kv_heads;       /* Hkv; G = Hq / Hkv */
  int32_t head_dim;           /* D: 64, 128, 256 */
  int32_t page_size;          /* tokens per page: power of two, 8..256 */
  int32_t num_pages;          /* pages in each pool: valid page ids are 0..num_pages-1 */
  int32_t max_pages_per_seq;  /* block-table columns */

  /* Formats (spec/formats.md). */
  pacts_format q_format;      /* bf16, fp16, or an fp8 format */
  pacts_format kv_format;     /* bf16, fp16, fp8, or e2m1 (MXFP4) for both K and V */
  pacts_format out_format;    /* bf16, fp16, fp32 */
  pacts_scale_mode k_scale_mode;
  pacts_scale_mode v_scale_mode;
  pacts_nibble_order nibble_order;

  /* Scalars. */
  float softmax_scale;        /* finite, > 0 */
  float q_scale;              /* finite, > 0: multiplies every decoded Q element (1 = none) */
  float k_scale;              /* per-tensor K scale (PER_TENSOR only), finite, > 0 */
  float v_scale;              /* per-tensor V scale (PER_TENSOR only), finite, > 0 */
  float softcap;              /* 0 = none; else finite > 0: s -> c * tanh(s / c) */
  int32_t window;             /* 0 = none; else W >= 1 keys ending at the query's position */
  int32_t has_sinks;          /* 0/1: one fp32 natural-log sink logit per query head */
  int32_t want_lse;           /* 0/1: write fp32 LSE [B, L, Hq] */

  /* Layouts. */
  pacts_row_layout q_layout;
  pacts_row_layout out_layout;
  pacts_row_layout lse_layout;
  pacts_pool_layout k_layout;
  pacts_pool_layout v_layout;
  pacts_scale_layout k_scale_layout;  /* PER_TOKEN (fp32 elements) or MX_BLOCK (bytes) */
  pacts_scale_layout v_scale_layout;
  int64_t block_table_stride;         /* int32 elements between block-table rows */
} pacts_problem;

/* A host- or device-visible view: base pointer and the size of the allocation in bytes that the
 * callee may read (or write). Offsets the layout reaches beyond `bytes` are refused. */
typedef struct pacts_view {
  void* data;
  uint64_t bytes;
} pacts_view;

/* The buffers of one call. Read-only ones are views too (const is not expressible per member in C
 * without two structs; a callee never writes q..sinks). */
typedef struct pacts_buffers {
  pacts_view q;
  pacts_view k;
  pacts_view v;
  pacts_view k_scale;         /* PER_TOKEN fp32 or MX_BLOCK e8m0; empty otherwise */
  pacts_view v_scale;
  pacts_view block_table;     /* int32 [B, max_pages_per_seq] with block_table_stride */
  pacts_view context_lens;    /* int32 [B] */
  pacts_view sinks;           /* fp32 [Hq] when has_sinks */
  pacts_view out;             /* written */
  pacts_view lse;             /* written when want_lse */
} pacts_buffers;

/* spec/refusals.md §1: status codes. */
typedef enum pacts_status_code {
  PACTS_OK = 0,
  PACTS_INVALID_ARGUMENT = 1,
  PACTS_NOT_SUPPORTED = 2,
  PACTS_OUT_OF_RANGE = 3,
  PACTS_DEVICE_ERROR = 4,
  PACTS_INTERNAL = 5,
  PACTS_STATUS_MAX_ENUM = 0x7FFFFFFF
} pacts_status_code;

/* spec/contract.md §4: bits of the device-side error word. */
enum {
  PACTS_DEVERR_CONTEXT_LEN = 1u << 0, /* a context length < 0 or > max_pages_per_seq*page_size */
  PACTS_DEVERR_PAGE_ID = 1u << 1      /* an owned block-table entry outside 0..num_pages-1 */
};

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PACTS_PROBLEM_H */
