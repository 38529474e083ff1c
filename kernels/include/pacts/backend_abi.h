/* pacts external backend ABI, version 3: how a shared library presents its own paged-attention
 * decode kernel to pacts (pacts-qualify --backend-lib PATH, pacts-conformance --backend-lib PATH),
 * so a vendor qualifies its kernel without recompiling pacts.
 *
 * Plain C (C99 and C++), built on the spec's problem descriptor (pacts/problem.h): nothing that
 * crosses this boundary is a C++ type, and no exception may cross it.
 *
 * A plugin exports ONE symbol, PACTS_BACKEND_ENTRY_SYMBOL:
 *
 *   PACTS_BACKEND_EXPORT const pacts_backend_v1* pacts_backend_entry(void);
 *
 * returning a pointer to a static, immutable descriptor. Its first two fields (abi_version,
 * descriptor_bytes) keep their place in every future version, so pacts reads them before anything
 * else and refuses a version it does not implement (InvalidArgument naming the library, the field
 * and the versions it accepts), never misreading a newer layout.
 *
 * Versions: a version 1 plugin returns a pacts_backend_v1 (abi_version 1, descriptor_bytes
 * sizeof(pacts_backend_v1)) and still loads. A version 2 plugin returns the first member of a
 * pacts_backend_v2 (abi_version 2, descriptor_bytes sizeof(pacts_backend_v2)): the version 1
 * descriptor followed by the version 2 extension, the query requantisation rule of its numerics
 * (spec/tolerance.md §2.1) and the batch-invariant plan (spec/operator.md §11.1). A version 3
 * plugin returns the first member of a pacts_backend_v3 (abi_version 3, descriptor_bytes
 * sizeof(pacts_backend_v3)): version 2's descriptor followed by the timed calls (below), with
 * which pacts-bench times the kernel beside pacts' own by the same method.
 *
 * Ownership:
 * - The descriptor and every string it points to belong to the plugin and must stay valid and
 *   unchanged until the library is unloaded (dlclose). pacts copies what it keeps.
 * - Instances are opaque: create() makes one, destroy() ends it; pacts destroys every instance
 *   it created before unloading the library.
 * - Buffers (pacts_buffers) are HOST memory owned by pacts, valid for the duration of one call
 *   only; a plugin must not keep their addresses. A GPU plugin uploads the inputs, runs, and
 *   downloads the WHOLE out and lse allocations (spec/properties.md PACTS-EDGE-2 checks the bytes
 *   it must not write). It writes `out` and, with want_lse, `lse`; run_replayed() also overwrites
 *   `context_lens` (below). Nothing else is written.
 * - pacts_backend_result is owned by the caller, zero-filled before the call; the plugin fills
 *   it. Its text fields are fixed arrays: the plugin writes NUL-terminated text and truncates.
 *
 * Threading:
 * - entry() and the descriptor may be read from any thread.
 * - create() and destroy() may be called from any thread, but never concurrently with another
 *   call on the same instance.
 * - pacts calls one instance from one thread at a time (calls may come from different threads,
 *   one after the other). Distinct instances may be used concurrently; a plugin that cannot
 *   allow that must serialise internally.
 *
 * Errors: every function reports through a pacts_status_code and a message that names the field,
 * the value and what is accepted (spec/refusals.md §1), as pacts' own backends do. A refusal
 * (status other than PACTS_OK from run) writes nothing to out or lse. Device-resident
 * precondition failures (spec/contract.md §4) are reported in `device_error` with status PACTS_OK.
 *
 * Workspace: a plugin owns its scratch memory, which pacts cannot reach. Before every decode it
 * should fill it with a poison that alternates between runs (NaN bytes, then a large finite
 * value), as kernels/plugins/host_plugin.cpp and pacts' own adapters do: PACTS-POISON-5 and
 * PACTS-POISON-6 detect a partial read before it is written only through that poison, and pass
 * vacuously for a plugin whose scratch memory always holds the same harmless bytes.
 */
#ifndef PACTS_BACKEND_ABI_H
#define PACTS_BACKEND_ABI_H

#include <pacts/problem.h>

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this header. Incremented on any change of a struct layout or a function's
 * meaning; pacts accepts exactly the versions its loader implements (today: 1, 2 and 3). */
#define PACTS_BACKEND_ABI_VERSION 3u

/* The one symbol a plugin exports. */
#define PACTS_BACKEND_ENTRY_SYMBOL "pacts_backend_entry"

#if defined(_WIN32)
#define PACTS_BACKEND_EXPORT __declspec(dllexport)
#else
#define PACTS_BACKEND_EXPORT __attribute__((visibility("default")))
#endif

/* Capacity of the capability lists and of the text fields. */
#define PACTS_BACKEND_LIST_MAX 16
#define PACTS_BACKEND_MESSAGE_BYTES 512
#define PACTS_BACKEND_VARIANT_BYTES 64

/* An instance of the plugin's backend (one device, one workspace, ...): opaque to pacts. */
typedef struct pacts_backend_instance pacts_backend_instance;

/* What a backend claims; mirrors pacts::conformance::Capabilities (conformance/include/pacts/
 * conformance/backend.h). A problem outside it is NotSupported, never Fail; inside it, every
 * property must pass (spec/properties.md §1). Booleans are int32_t 0 or 1; any other value is
 * refused when the library is loaded, as are counts above PACTS_BACKEND_LIST_MAX, values the spec
 * does not define for the field, and an empty list. */
typedef struct pacts_backend_capabilities {
  uint32_t num_q_formats;
  pacts_format q_formats[PACTS_BACKEND_LIST_MAX];     /* bf16, fp16, fp8 formats */
  uint32_t num_kv_formats;
  pacts_format kv_formats[PACTS_BACKEND_LIST_MAX];    /* the above and e2m1 */
  uint32_t num_out_formats;
  pacts_format out_formats[PACTS_BACKEND_LIST_MAX];   /* bf16, fp16, fp32 */
  uint32_t num_scale_modes;
  pacts_scale_mode scale_modes[PACTS_BACKEND_LIST_MAX];
  uint32_t num_head_dims;
  int32_t head_dims[PACTS_BACKEND_LIST_MAX];          /* 64, 128, 256 */
  int32_t min_page_size;    /* powers of two, 8 <= min <= max <= 256 */
  int32_t max_page_size;
  int32_t max_q_len;        /* 1..16 */
  int32_t max_group;        /* >= 1: largest Hq / Hkv */
  int32_t chunked_layouts;  /* x-packed K and dim-major V (chunk != head_dim) */
  int32_t sinks;
  int32_t window;
  int32_t softcap;
  int32_t lse;
  int32_t deterministic;    /* bitwise reproducible for a fixed plan (PACTS-META-2) */
  int32_t split_plans;      /* honours plan hints (PACTS-META-3) */
  int32_t plan_replay;      /* run_replayed is provided (PACTS-DEV-3) */
  int32_t large_buffers;    /* runs PACTS-DEV-2's cases: views past 2^31 elements (~8 GiB each) */
  /* spec/refusals.md §4: what the kernel needs beyond the spec. */
  uint32_t vector_alignment_bytes; /* power of two >= 1 */
  uint32_t reserved0;              /* 0 */
  int64_t max_element_offset;      /* >= 1: largest element offset the kernel can form */
} pacts_backend_capabilities;

/* How the kernel rounds; mirrors pacts::spec::NumericsProfile (spec/tolerance.md §2), from which
 * the tolerance bound takes its constants. Every number is finite, >= 0 and < 1; booleans are 0
 * or 1. Declaring less error than the kernel has makes it fail PACTS-ACC-1; declaring more only
 * loosens its own bound, which the report shows. The query requantisation rule (spec/tolerance.md
 * §2.1) is version 2's extension: a version 1 plugin is judged against the plain reference. */
typedef struct pacts_backend_numerics {
  double u_logit;      /* unit roundoff of Q.K and of the logit arithmetic */
  double u_q;          /* relative rounding of the scaled query before Q.K (0: not rounded) */
  double u_p;          /* relative rounding of P before P.V */
  double eta_p;        /* absolute per-key floor of that rounding */
  double u_acc;        /* precision of the P.V and denominator accumulation */
  double u_partial;    /* rounding of stored partials when split */
  double eps_exp;      /* relative error of exp */
  double eps_tanh;     /* absolute error of tanh (soft-cap) */
  double eps_log;      /* absolute error of log (LSE) */
  int32_t p_rounded_in_denominator; /* the softmax denominator sums the rounded P */
  int32_t ftz;                      /* subnormals may be flushed to zero */
} pacts_backend_numerics;

/* Version 2: the query requantisation a kernel applies (spec/tolerance.md §2.1). */
typedef enum pacts_backend_q_requant {
  PACTS_Q_REQUANT_NONE = 0,          /* the query is not requantised */
  PACTS_Q_REQUANT_FP8_ROW_POW2 = 1,  /* `fp8-row-pow2`, for the KV formats listed */
  PACTS_Q_REQUANT_MAX_ENUM = 0x7FFFFFFF
} pacts_backend_q_requant;

/* Version 2: what follows the version 1 descriptor. */
typedef struct pacts_backend_v2_extension {
  pacts_backend_q_requant q_requant;
  uint32_t num_q_requant_kv_formats;  /* 0 with NONE; else 1..LIST_MAX of the formats below */
  pacts_format q_requant_kv_formats[PACTS_BACKEND_LIST_MAX]; /* e4m3fn, e4m3fnuz, e5m2, e5m2fnuz,
                                                                e2m1 */
  int32_t batch_invariant;  /* honours PACTS_HINT_BATCH_INVARIANT (spec/operator.md §11.1) */
  uint32_t reserved1;       /* 0 */
} pacts_backend_v2_extension;

/* How the caller wants the context split (spec/properties.md PACTS-META-3). */
typedef enum pacts_backend_hint_kind {
  PACTS_HINT_AUTOMATIC = 0,      /* the backend's own choice; value 0 */
  PACTS_HINT_PARTITION_SIZE = 1, /* value = keys per partition */
  PACTS_HINT_PARTITIONS = 2,     /* value = partitions per sequence */
  PACTS_HINT_BATCH_INVARIANT = 3, /* version 2: the batch-invariant plan (spec/operator.md
                                     §11.1); value = keys per partition, 0 = the backend's
                                     default. Sent only to a plugin that declares
                                     batch_invariant */
  PACTS_HINT_MAX_ENUM = 0x7FFFFFFF
} pacts_backend_hint_kind;

typedef struct pacts_backend_plan_hint {
  pacts_backend_hint_kind kind;
  int32_t value;
} pacts_backend_plan_hint;

/* What one run produced besides the output. Zero-filled by the caller. */
typedef struct pacts_backend_result {
  pacts_status_code status;     /* PACTS_OK, or the refusal / device failure */
  uint32_t device_error;        /* PACTS_DEVERR_* bits (spec/contract.md §4) */
  int32_t partition_size;       /* plan used: keys per partition, 0 = unsplit */
  int32_t max_partitions;       /* plan used: partitions of the longest sequence (>= 1) */
  char message[PACTS_BACKEND_MESSAGE_BYTES]; /* with a status other than OK: field, value, what is accepted */
  char variant[PACTS_BACKEND_VARIANT_BYTES]; /* the kernel variant run (bitwise comparisons are
                                                made only between runs of one variant) */
} pacts_backend_result;

/* The descriptor a plugin's entry point returns. */
typedef struct pacts_backend_v1 {
  uint32_t abi_version;          /* PACTS_BACKEND_ABI_VERSION the plugin was built with */
  uint32_t descriptor_bytes;     /* sizeof(pacts_backend_v1) as the plugin saw it */
  uint32_t problem_abi_version;  /* PACTS_ABI_VERSION of the pacts_problem it reads */
  uint32_t reserved0;            /* 0 */

  const char* name;     /* 1-64 characters of [A-Za-z0-9._-], e.g. "acme-paged-decode" */
  const char* device;   /* e.g. "Acme X1 (gfx950), 304 CUs"; non-empty */
  const char* driver;   /* driver version, or "" when the plugin cannot say */
  const char* runtime;  /* runtime / toolkit version, or "" */
  const char* version;  /* the plugin's own version, or "" */

  pacts_backend_capabilities capabilities;
  pacts_backend_numerics numerics;

  /* Makes an instance. On failure returns the status, leaves *instance NULL and writes a
   * NUL-terminated message of at most message_bytes bytes. */
  pacts_status_code (*create)(pacts_backend_instance** instance, char* message,
                              uint32_t message_bytes);
  void (*destroy)(pacts_backend_instance* instance);

  /* Runs one problem (spec/operator.md) on host buffers; see Ownership above. */
  void (*run)(pacts_backend_instance* instance, const pacts_problem* problem,
              const pacts_buffers* buffers, const pacts_backend_plan_hint* hint,
              pacts_backend_result* result);

  /* PACTS-DEV-3, NULL unless capabilities.plan_replay: one plan (on a GPU, one captured graph)
   * run twice, first as given, then after overwriting buffers->context_lens in place with the
   * `count` (= problem->batch) values of replayed_context_lens, as a serving loop updates the
   * buffer a captured graph reads. The second run's output is left in the buffers and its result
   * returned. */
  void (*run_replayed)(pacts_backend_instance* instance, const pacts_problem* problem,
                       const pacts_buffers* buffers, const int32_t* replayed_context_lens,
                       int32_t count, const pacts_backend_plan_hint* hint,
                       pacts_backend_result* result);
} pacts_backend_v1;

/* The version 2 descriptor: its first member is what the entry point returns a pointer to. */
typedef struct pacts_backend_v2 {
  pacts_backend_v1 v1;  /* v1.abi_version = 2, v1.descriptor_bytes = sizeof(pacts_backend_v2) */
  pacts_backend_v2_extension v2;
} pacts_backend_v2;

/* Version 3: timed calls. run() includes the plugin's uploads, downloads and layout copies, so
 * it cannot be timed as a decode call. The timed calls separate them: prepare() does everything
 * that a serving stack does once (checks, the plan, copies of the inputs into layouts the kernel
 * can address), enqueue() is the decode call alone, which pacts-bench times as it times pacts'
 * own kernels (events around graph replays on its stream, the L2 flushed before each replay).
 *
 * Memory: with memory = PACTS_BACKEND_MEMORY_DEVICE every buffer of `buffers` is device memory of
 * the GPU the instance runs on (a CUDA / HIP device pointer; pacts-bench allocates and fills it),
 * and `stream` of enqueue() is a cudaStream_t / hipStream_t of that device, owned by pacts. With
 * PACTS_BACKEND_MEMORY_HOST (a CPU kernel) the buffers are host memory and `stream` is NULL.
 * `host_block_table` and `host_context_lens` are host copies of those two buffers (the same
 * values), for planners that need them on the host, as serving stacks keep them.
 *
 * Ownership: the buffers passed to prepare() stay valid and unchanged (but for out and lse) until
 * release(); the plugin may keep their addresses until then, and nothing after. The host copies
 * are valid during prepare() only. A prepared call belongs to the instance that prepared it; at
 * most one exists per instance at a time, and pacts releases it before calling run(),
 * run_replayed() or destroy() on that instance.
 *
 * enqueue() writes out (and lse with want_lse) in the problem's layouts, as run() does, and does
 * nothing else that outlives it: no allocation, no host synchronisation, no copy of an input, so
 * that with graph_capturable = 1 pacts may capture it into a graph once and replay the graph. It
 * may be called any number of times; each call computes the same result. A problem the plugin
 * cannot time (a layout it would have to copy per call, for instance) is refused by prepare()
 * with NotSupported and a message naming the field; prepare() answers refusals and device
 * preconditions in `result` as run() does and then makes no prepared call. */
typedef struct pacts_backend_prepared pacts_backend_prepared;

typedef enum pacts_backend_memory {
  PACTS_BACKEND_MEMORY_HOST = 0,    /* buffers in host memory, stream NULL */
  PACTS_BACKEND_MEMORY_DEVICE = 1,  /* buffers in device memory, stream of that device */
  PACTS_BACKEND_MEMORY_MAX_ENUM = 0x7FFFFFFF
} pacts_backend_memory;

typedef struct pacts_backend_v3_extension {
  int32_t timed_calls;       /* 1: the four functions below are set; 0: all four are NULL */
  pacts_backend_memory memory;
  int32_t graph_capturable;  /* 0 or 1: enqueue() may be captured into a CUDA / HIP graph */
  uint32_t reserved2;        /* 0 */
  /* On success *prepared is set and result->status is PACTS_OK (result also names the plan and
   * the variant that enqueue() runs); otherwise *prepared stays NULL. */
  void (*prepare)(pacts_backend_instance* instance, const pacts_problem* problem,
                  const pacts_buffers* buffers, const int32_t* host_block_table,
                  const int32_t* host_context_lens, const pacts_backend_plan_hint* hint,
                  pacts_backend_prepared** prepared, pacts_backend_result* result);
  /* The decode call on `stream`; PACTS_OK, or the failure with a message. */
  pacts_status_code (*enqueue)(pacts_backend_prepared* prepared, void* stream, char* message,
                               uint32_t message_bytes);
  /* After enqueue() (and the stream's work) completed: the device error bits of the last call
   * (spec/contract.md §4), 0 when the kernel checks nothing. */
  uint32_t (*device_error)(pacts_backend_prepared* prepared);
  void (*release)(pacts_backend_prepared* prepared);
} pacts_backend_v3_extension;

/* The version 3 descriptor: its first member is what the entry point returns a pointer to. */
typedef struct pacts_backend_v3 {
  pacts_backend_v2 v2;  /* v2.v1.abi_version = 3, v2.v1.descriptor_bytes = sizeof(pacts_backend_v3) */
  pacts_backend_v3_extension v3;
} pacts_backend_v3;

/* The type of the entry point, for dlsym. */
typedef const pacts_backend_v1* (*pacts_backend_entry_fn)(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PACTS_BACKEND_ABI_H */
