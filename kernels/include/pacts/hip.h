// pacts kernels on a GPU through HIP (NVIDIA through our CUDA mapping, AMD through ROCm): the
// production algorithm of pacts/decode.h as device kernels. Vendor-neutral: no GPU header here.
//
//   auto dev = pacts::kernels::hip::device(0);                      // queries the GPU
//   auto p = pacts::kernels::hip::plan(problem, dev.value());      // host only
//   pacts::kernels::hip::decode(p.value(), device_buffers, d_error_word, d_ws, bytes, stream);
#pragma once

#include <pacts/decode.h>
#include <pacts/spec/tolerance.h>
#include <pacts/spec/validate.h>

#include <cstdint>

namespace pacts::kernels::hip {

// GPU `ordinal` as a plan target (multiprocessor count, warp size, name). DeviceError when there
// is no such device.
spec::Result<DeviceInfo> device(int32_t ordinal = 0);

// What the kernels accept beyond the spec (spec/refusals.md §4): element alignment (16-byte
// loads are taken where a row is aligned, element loads elsewhere) and 64-bit offsets.
spec::Requirements requirements();

// The numerics the kernels really have (spec/tolerance.md §2); decode_hip.cpp derives each one.
// On AMD they depend on the device's architecture (DeviceInfo::arch): gfx942 and gfx950 requantise
// the query for the KV formats their fp8 matrix instructions read (spec/tolerance.md §2.1).
spec::NumericsProfile profile(const DeviceInfo& device);

// The work split (pacts/decode.h Plan) for this device: same meaning and arguments as
// pacts::kernels::plan(); the tile and row tile are the GPU kernels'. Host only.
spec::Result<Plan> plan(const pacts_problem& problem, const DeviceInfo& device,
                        int32_t fixed_partition_size = 0, int32_t fixed_partitions = 0,
                        bool batch_invariant = false);

// Runs the plan on DEVICE memory: every view of `buffers`, `error_word` (may be null) and
// `workspace` are device pointers; `stream` is a hipStream_t (cudaStream_t on NVIDIA), null for
// the default stream. Host-visible checks as host::decode (nothing written on refusal).
// Neither allocates nor synchronises: capturable in a graph and replayable with new context
// lengths. A launch failure is DeviceError. error_word bits are ORed, never cleared.
spec::Status decode(const Plan& plan, const pacts_buffers& buffers, uint32_t* error_word,
                    void* workspace, uint64_t workspace_bytes, void* stream = nullptr);

// Device memory for callers that hold no GPU header (the conformance adapter, tools): thin checked
// wrappers of the runtime on the current device; failures are DeviceError naming the call.
namespace memory {
spec::Status select_device(int32_t ordinal);
spec::Result<void*> allocate(uint64_t bytes);
void release(void* device_pointer);  // null is a no-op; errors are ignored (destructors)
spec::Status to_device(void* device_dst, const void* host_src, uint64_t bytes);
spec::Status to_host(void* host_dst, const void* device_src, uint64_t bytes);
spec::Status fill(void* device_dst, int byte, uint64_t bytes);
spec::Status synchronize();  // the whole device; also reports asynchronous kernel faults
}  // namespace memory

// A decode captured once into a GPU graph on a stream of its own and replayed (spec/properties.md
// PACTS-DEV-3: a serving loop captures the decode once and replays it after updating the context
// lengths and block table in device memory). Capture records the launches of decode() with the
// given device buffers; replay() re-launches them and waits, so whatever the buffers hold at
// replay time is what the kernels read. Move-only; the destructor releases the graph and stream.
class CapturedDecode {
 public:
  // DeviceError naming the runtime call when capture fails; decode()'s refusals as they are.
  static spec::Result<CapturedDecode> capture(const Plan& plan, const pacts_buffers& buffers,
                                              uint32_t* error_word, void* workspace,
                                              uint64_t workspace_bytes);
  spec::Status replay();

  CapturedDecode(CapturedDecode&& other) noexcept;
  CapturedDecode& operator=(CapturedDecode&& other) noexcept;
  CapturedDecode(const CapturedDecode&) = delete;
  CapturedDecode& operator=(const CapturedDecode&) = delete;
  ~CapturedDecode();

 private:
  CapturedDecode() = default;
  void reset();
  void* stream_ = nullptr;  // hipStream_t
  void* graph_ = nullptr;   // hipGraph_t
  void* exec_ = nullptr;    // hipGraphExec_t
};

}  // namespace pacts::kernels::hip
