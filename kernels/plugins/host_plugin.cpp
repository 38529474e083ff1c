// The example external backend: the host kernels (pacts/host.h) behind the C ABI of
// pacts/backend_abi.h, built as libpacts_host_plugin.so. It is what a vendor's plugin looks like:
// one exported entry point, a static descriptor, an opaque instance owning its workspace, and no
// C++ type or exception crossing the boundary. The tests load it through
// pacts-qualify / pacts-conformance --backend-lib.
//
// Test builds only (never shipped):
// - PACTS_PLUGIN_FAULT_DROP_SINKS plants a real bug class: the sinks are ignored (the kernel is run
//   with has_sinks = 0), which spec/operator.md's softmax denominator forbids; PACTS-ACC-1 must fail.
// - PACTS_PLUGIN_ABI_VERSION overrides the declared ABI version (the loader must refuse it).
// - PACTS_PLUGIN_NO_ENTRY exports the descriptor under another name (the loader must refuse it).
// - PACTS_PLUGIN_ABI_V1 / PACTS_PLUGIN_ABI_V2 build a version 1 / version 2 plugin (they must
//   still load).
// - PACTS_PLUGIN_TIMED_NO_RELEASE declares timed calls without release (the loader must refuse).
// - PACTS_PLUGIN_CRASH_ON_RUN=N: abort() at the Nth run() of the process (pacts must survive it
//   when the plugin runs isolated in pacts-child).
// - PACTS_PLUGIN_TIMED_WRITES_NOTHING: enqueue() answers OK and computes nothing (pacts-bench must
//   not report its time as a row).
// - PACTS_PLUGIN_MAX_PAGE_SIZE overrides the declared largest page size (48: the loader must
//   refuse a capability the spec does not define).
#include <pacts/backend_abi.h>
#include <pacts/decode.h>
#include <pacts/host.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <vector>

#ifndef PACTS_PLUGIN_ABI_VERSION
#define PACTS_PLUGIN_ABI_VERSION PACTS_BACKEND_ABI_VERSION
#endif
#ifndef PACTS_PLUGIN_MAX_PAGE_SIZE
#define PACTS_PLUGIN_MAX_PAGE_SIZE 256
#endif

namespace {

namespace host = pacts::kernels::host;

}  // namespace

// The instance: the plan target and a workspace reused across runs, poisoned before every run
// (backend_abi.h: the suite cannot reach a plugin's workspace, so PACTS-POISON-5/6 rely on it).
struct pacts_backend_instance {
  pacts::kernels::DeviceInfo device = host::device();
  std::vector<float> workspace;
  uint64_t runs = 0;
};

namespace {

void set_text(char* dst, size_t capacity, const std::string& text) {
  std::snprintf(dst, capacity, "%s", text.c_str());
}

pacts_backend_capabilities capabilities() {
  pacts_backend_capabilities c{};
  const pacts_format q[] = {PACTS_FORMAT_BF16,   PACTS_FORMAT_FP16,      PACTS_FORMAT_E4M3FN,
                            PACTS_FORMAT_E4M3FNUZ, PACTS_FORMAT_E5M2, PACTS_FORMAT_E5M2FNUZ};
  c.num_q_formats = 6;
  std::memcpy(c.q_formats, q, sizeof q);
  c.num_kv_formats = 7;
  std::memcpy(c.kv_formats, q, sizeof q);
  c.kv_formats[6] = PACTS_FORMAT_E2M1;
  c.num_out_formats = 3;
  c.out_formats[0] = PACTS_FORMAT_BF16;
  c.out_formats[1] = PACTS_FORMAT_FP16;
  c.out_formats[2] = PACTS_FORMAT_FP32;
  c.num_scale_modes = 4;
  c.scale_modes[0] = PACTS_SCALE_NONE;
  c.scale_modes[1] = PACTS_SCALE_PER_TENSOR;
  c.scale_modes[2] = PACTS_SCALE_PER_TOKEN;
  c.scale_modes[3] = PACTS_SCALE_MX_BLOCK;
  c.num_head_dims = 3;
  c.head_dims[0] = 64;
  c.head_dims[1] = 128;
  c.head_dims[2] = 256;
  c.min_page_size = 8;
  c.max_page_size = PACTS_PLUGIN_MAX_PAGE_SIZE;
  c.max_q_len = 16;
  c.max_group = 64;
  c.chunked_layouts = c.sinks = c.window = c.softcap = c.lse = 1;
  c.deterministic = c.split_plans = c.plan_replay = 1;
  const pacts::spec::Requirements req = host::requirements();
  c.vector_alignment_bytes = req.vector_alignment_bytes;
  c.max_element_offset = req.max_element_offset;
  return c;
}

pacts_backend_numerics numerics() {
  const pacts::spec::NumericsProfile p = host::profile();
  pacts_backend_numerics n{};
  n.u_logit = p.u_logit;
  n.u_q = p.u_q;
  n.u_p = p.u_p;
  n.eta_p = p.eta_p;
  n.u_acc = p.u_acc;
  n.u_partial = p.u_partial;
  n.eps_exp = p.eps_exp;
  n.eps_tanh = p.eps_tanh;
  n.eps_log = p.eps_log;
  n.p_rounded_in_denominator = p.p_rounded_in_denominator ? 1 : 0;
  n.ftz = p.ftz ? 1 : 0;
  return n;
}

pacts_status_code create(pacts_backend_instance** instance, char* message, uint32_t bytes) {
  *instance = nullptr;
  try {
    *instance = new pacts_backend_instance;
    return PACTS_OK;
  } catch (const std::exception& e) {
    set_text(message, bytes, std::string("host plugin: create: ") + e.what());
    return PACTS_INTERNAL;
  } catch (...) {
    set_text(message, bytes, "host plugin: create: a non-standard exception");
    return PACTS_INTERNAL;
  }
}

void destroy(pacts_backend_instance* instance) { delete instance; }

// Plans, then decodes once, or twice with the context lengths replaced in between (one plan and
// one workspace for both: the plan depends on the shape only, PACTS-DEV-3).
void run_plan(pacts_backend_instance* self, const pacts_problem* problem_in,
              const pacts_buffers* buffers, const int32_t* replay, int32_t replay_count,
              const pacts_backend_plan_hint* hint, pacts_backend_result* result) {
  pacts_problem problem = *problem_in;
  pacts_buffers views = *buffers;
  // A refusal writes nothing (backend_abi.h): the replayed lengths are checked before any decode.
  if (replay != nullptr &&
      (replay_count != problem.batch ||
       static_cast<uint64_t>(replay_count) * sizeof(int32_t) > buffers->context_lens.bytes)) {
    result->status = PACTS_INVALID_ARGUMENT;
    set_text(result->message, sizeof result->message,
             "replayed_context_lens: " + std::to_string(replay_count) +
                 " values: accepted: exactly batch = " + std::to_string(problem.batch));
    return;
  }
#ifdef PACTS_PLUGIN_FAULT_DROP_SINKS
  // The planted fault: the sinks are silently ignored (no refusal, a wrong softmax denominator).
  problem.has_sinks = 0;
  views.sinks = pacts_view{nullptr, 0};
#endif
  const int32_t size =
      hint->kind == PACTS_HINT_PARTITION_SIZE || hint->kind == PACTS_HINT_BATCH_INVARIANT ? hint->value : 0;
  const int32_t parts = hint->kind == PACTS_HINT_PARTITIONS ? hint->value : 0;
  auto plan = pacts::kernels::plan(problem, self->device, size, parts,
                                   hint->kind == PACTS_HINT_BATCH_INVARIANT);
  if (!plan) {
    result->status = static_cast<pacts_status_code>(plan.status().code());
    set_text(result->message, sizeof result->message, plan.status().message());
    return;
  }
  const pacts::kernels::Plan& chosen = plan.value();
  const uint64_t bytes = pacts::kernels::workspace_size(chosen);
  if (self->workspace.size() * sizeof(float) < bytes) self->workspace.resize((bytes + 3) / 4);
  uint32_t error_word = 0;
  // Before every decode the workspace holds a poison that alternates between runs (NaN bytes,
  // then a large finite value), as the host adapter does: a partial read before it is written
  // changes the output between two runs (PACTS-META-2, POISON-5) or makes it NaN (POISON-6).
  const auto decode_once = [&] {
    const int fill = (self->runs++ % 2 == 0) ? 0xFF : 0x5A;
    if (bytes > 0) std::memset(self->workspace.data(), fill, static_cast<size_t>(bytes));
    error_word = 0;
    return host::decode(chosen, views, &error_word, bytes ? self->workspace.data() : nullptr,
                        bytes);
  };
  pacts::spec::Status status = decode_once();
  if (status.is_ok() && replay != nullptr) {
    std::memcpy(buffers->context_lens.data, replay,
                static_cast<size_t>(replay_count) * sizeof(int32_t));
    status = decode_once();
  }
  result->status = static_cast<pacts_status_code>(status.code());
  set_text(result->message, sizeof result->message, status.message());
  result->device_error = error_word;
  result->partition_size = chosen.num_partitions > 1 ? chosen.partition_size : 0;
  result->max_partitions = chosen.num_partitions;
  set_text(result->variant, sizeof result->variant, chosen.variant);
}

// No exception may cross the C boundary (backend_abi.h): anything thrown is Internal.
template <class F>
void guarded(pacts_backend_result* result, F&& body) {
  try {
    body();
  } catch (const std::exception& e) {
    result->status = PACTS_INTERNAL;
    set_text(result->message, sizeof result->message, std::string("host plugin: ") + e.what());
  } catch (...) {
    result->status = PACTS_INTERNAL;
    set_text(result->message, sizeof result->message, "host plugin: a non-standard exception");
  }
}

void run(pacts_backend_instance* self, const pacts_problem* problem, const pacts_buffers* buffers,
         const pacts_backend_plan_hint* hint, pacts_backend_result* result) {
#ifdef PACTS_PLUGIN_CRASH_ON_RUN
  // The planted crash: the process dies at this instance's Nth run (a plugin bug that takes its
  // host process down; isolated, it fails one case).
  // With PACTS_PLUGIN_CRASH_MARK set to a path, only the first process to get there crashes (it
  // leaves the file behind): a restarted child then computes.
  static int calls = 0;
  if (++calls == PACTS_PLUGIN_CRASH_ON_RUN) {
    const char* mark = std::getenv("PACTS_PLUGIN_CRASH_MARK");
    if (mark == nullptr) std::abort();
    if (std::FILE* f = std::fopen(mark, "r")) {
      std::fclose(f);
    } else {
      if (std::FILE* g = std::fopen(mark, "w")) std::fclose(g);
      std::abort();
    }
  }
#endif
  guarded(result, [&] { run_plan(self, problem, buffers, nullptr, 0, hint, result); });
  // Planted misbehaviour of a plugin (tests of the isolation, apps/tests/plugin_qualify_test.cpp):
  // a hang, a slow call (3 s), exit(0), a heap overflow of its own (64 MiB written from a 64-byte
  // block, into whatever follows it), a write 8 bytes past out, a read 64 KiB past k, each after
  // computing.
#if defined(PACTS_PLUGIN_HANG)
  std::this_thread::sleep_for(std::chrono::hours(1));
#elif defined(PACTS_PLUGIN_SLOW)
  std::this_thread::sleep_for(std::chrono::seconds(3));
#elif defined(PACTS_PLUGIN_HEAP_OVERFLOW)
  if (auto* block = static_cast<uint8_t*>(std::malloc(64))) {
    volatile uint8_t* p = block;
    for (size_t i = 0; i < (size_t{64} << 20); ++i) p[i] = 0x42;
    std::free(block);
  }
#elif defined(PACTS_PLUGIN_EXIT)
  std::exit(0);
#elif defined(PACTS_PLUGIN_WRITE_PAST_OUT)
  if (buffers->out.data != nullptr) std::memset(static_cast<uint8_t*>(buffers->out.data) + buffers->out.bytes, 0x42, 8);
#elif defined(PACTS_PLUGIN_READ_PAST_K)
  if (buffers->k.data != nullptr) {
    const uint8_t byte = static_cast<const volatile uint8_t*>(buffers->k.data)[buffers->k.bytes + 65536];
    if (byte == 0x5A && result->message[0] == '\0') result->message[0] = ' ';  // keeps the read
  }
#endif
}

void run_replayed(pacts_backend_instance* self, const pacts_problem* problem,
                  const pacts_buffers* buffers, const int32_t* lens, int32_t count,
                  const pacts_backend_plan_hint* hint, pacts_backend_result* result) {
  guarded(result, [&] { run_plan(self, problem, buffers, lens, count, hint, result); });
}

// Timed calls (backend ABI version 3), in host memory: prepare plans and keeps the views, enqueue
// decodes into the caller's out (and lse). The workspace is poisoned once, in prepare.
}  // namespace

struct pacts_backend_prepared {
  pacts_backend_instance* self = nullptr;
  pacts::kernels::Plan plan;
  pacts_buffers views{};
  uint64_t bytes = 0;
  uint32_t error_word = 0;
};

namespace {

// [[maybe_unused]]: the version 1 and 2 test builds do not declare them.
[[maybe_unused]] void prepare(pacts_backend_instance* self, const pacts_problem* problem,
             const pacts_buffers* buffers, const int32_t* /*host_block_table: the same memory*/,
             const int32_t* /*host_context_lens*/, const pacts_backend_plan_hint* hint,
             pacts_backend_prepared** prepared, pacts_backend_result* result) {
  *prepared = nullptr;
  guarded(result, [&] {
    const int32_t size =
        hint->kind == PACTS_HINT_PARTITION_SIZE || hint->kind == PACTS_HINT_BATCH_INVARIANT
            ? hint->value
            : 0;
    const int32_t parts = hint->kind == PACTS_HINT_PARTITIONS ? hint->value : 0;
    auto plan = pacts::kernels::plan(*problem, self->device, size, parts,
                                     hint->kind == PACTS_HINT_BATCH_INVARIANT);
    if (!plan) {
      result->status = static_cast<pacts_status_code>(plan.status().code());
      set_text(result->message, sizeof result->message, plan.status().message());
      return;
    }
    auto call = std::make_unique<pacts_backend_prepared>();
    call->self = self;
    call->plan = plan.value();
    call->views = *buffers;
    call->bytes = pacts::kernels::workspace_size(call->plan);
    if (self->workspace.size() * sizeof(float) < call->bytes)
      self->workspace.resize((call->bytes + 3) / 4);
    if (call->bytes > 0) std::memset(self->workspace.data(), 0xFF, static_cast<size_t>(call->bytes));
    result->status = PACTS_OK;
    result->partition_size = call->plan.num_partitions > 1 ? call->plan.partition_size : 0;
    result->max_partitions = call->plan.num_partitions;
    set_text(result->variant, sizeof result->variant, call->plan.variant);
    *prepared = call.release();
  });
}

[[maybe_unused]] pacts_status_code enqueue(pacts_backend_prepared* call, void* stream, char* message,
                          uint32_t bytes) {
  if (stream != nullptr) {
    set_text(message, bytes, "stream: accepted: NULL (a host-memory plugin)");
    return PACTS_INVALID_ARGUMENT;
  }
  try {
    call->error_word = 0;
#ifdef PACTS_PLUGIN_TIMED_WRITES_NOTHING
    // The planted fault of the timed calls: success without a decode (pacts-bench's output check
    // must refuse the row).
    return PACTS_OK;
#endif
    const pacts::spec::Status s =
        host::decode(call->plan, call->views, &call->error_word,
                     call->bytes ? call->self->workspace.data() : nullptr, call->bytes);
    if (!s) set_text(message, bytes, s.message());
    return static_cast<pacts_status_code>(s.code());
  } catch (const std::exception& e) {
    set_text(message, bytes, std::string("host plugin: ") + e.what());
    return PACTS_INTERNAL;
  } catch (...) {
    set_text(message, bytes, "host plugin: a non-standard exception");
    return PACTS_INTERNAL;
  }
}

[[maybe_unused]] uint32_t device_error(pacts_backend_prepared* call) { return call->error_word; }

[[maybe_unused]] void release(pacts_backend_prepared* call) { delete call; }

#ifdef PACTS_PLUGIN_FAULT_DROP_SINKS
constexpr const char* kName = "host-plugin-drop-sinks";
#elif defined(PACTS_PLUGIN_ABI_V1)
constexpr const char* kName = "host-plugin-v1";
#else
constexpr const char* kName = "host-plugin";
#endif

#ifdef PACTS_PLUGIN_ABI_V1
// A version 1 plugin (backend_abi.h "Versions"): what plugins built before version 2 return.
const pacts_backend_v1& descriptor() {
  static const std::string device = host::device().name;
  static const pacts_backend_v1 d = {
      1u, sizeof(pacts_backend_v1), PACTS_ABI_VERSION, 0,
      kName, device.c_str(), "", "", "1",
      capabilities(), numerics(),
      create, destroy, run, run_replayed,
  };
  return d;
}
#elif defined(PACTS_PLUGIN_ABI_V2)
// A version 2 plugin: the version 1 descriptor, then the query requantisation (none: the host
// kernels keep Q in fp32) and the batch-invariant plan, which the host kernels have.
const pacts_backend_v1& descriptor() {
  static const std::string device = host::device().name;
  static const pacts_backend_v2 d = {
      {2u, sizeof(pacts_backend_v2), PACTS_ABI_VERSION, 0,
       "host-plugin-v2", device.c_str(), "", "", "1",
       capabilities(), numerics(),
       create, destroy, run, run_replayed},
      {PACTS_Q_REQUANT_NONE, 0, {}, 1, 0},
  };
  return d.v1;
}
#else
// Version 3: version 2's descriptor, then the timed calls (host memory; nothing to capture).
// PACTS_PLUGIN_TIMED_NO_RELEASE (a test build) declares timed calls without release: the
// loader must refuse it.
#ifdef PACTS_PLUGIN_TIMED_NO_RELEASE
constexpr void (*kRelease)(pacts_backend_prepared*) = nullptr;
#else
constexpr void (*kRelease)(pacts_backend_prepared*) = release;
#endif
const pacts_backend_v1& descriptor() {
  static const std::string device = host::device().name;
  static const pacts_backend_v3 d = {
      {{PACTS_PLUGIN_ABI_VERSION, sizeof(pacts_backend_v3), PACTS_ABI_VERSION, 0,
        kName, device.c_str(), "", "", "1",
        capabilities(), numerics(),
        create, destroy, run, run_replayed},
       {PACTS_Q_REQUANT_NONE, 0, {}, 1, 0}},
      {1, PACTS_BACKEND_MEMORY_HOST, 0, 0, prepare, enqueue, device_error, kRelease},
  };
  return d.v2.v1;
}
#endif

}  // namespace

#ifndef PACTS_PLUGIN_NO_ENTRY
extern "C" PACTS_BACKEND_EXPORT const pacts_backend_v1* pacts_backend_entry(void) {
  return &descriptor();
}
#else
// A library exporting its descriptor under another name: what pacts cannot find.
extern "C" PACTS_BACKEND_EXPORT const pacts_backend_v1* pacts_backend_entry_v0(void) {
  return &descriptor();
}
#endif
