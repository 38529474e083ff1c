// The GPU operations pacts-bench times the HIP kernels with (its HIP timer): device
// memory, one non-blocking stream with two events, graph capture and replay, the device fill of
// bench_inputs.h's rule and a read-only kernel for the bandwidth ceiling. Plain C++: the GPU
// runtime stays behind this header (bench_timing.cpp is the device code, platform/gpu.h its one
// vendor-aware include). Every failing runtime call is a DeviceError naming the call.
#pragma once

#include <pacts/problem.h>
#include <pacts/spec/status.h>

#include <string>

#include <cstdint>

namespace pacts::kernels::hip::timing {

// A device allocation of this library's runtime, released on scope exit.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  spec::Status allocate(uint64_t bytes);  // nothing for 0 bytes
  uint8_t* data() const { return static_cast<uint8_t*>(p_); }
  uint64_t bytes() const { return bytes_; }
  pacts_view view() const { return {p_, bytes_}; }

 private:
  void* p_ = nullptr;
  uint64_t bytes_ = 0;
};

// A captured graph and its executable, destroyed on scope exit.
class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  ~Graph();
  bool instantiated() const { return exec_ != nullptr; }

 private:
  friend class Stream;
  void* graph_ = nullptr;  // hipGraph_t
  void* exec_ = nullptr;   // hipGraphExec_t
};

// One device's timing stream: non-blocking, with a start and a stop event.
class Stream {
 public:
  Stream() = default;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream();

  // Makes `ordinal` the current device and creates the stream and its events.
  spec::Status open(int32_t ordinal);
  void* handle() const { return stream_; }  // the hipStream_t a decode() call takes

  // Asynchronous on the stream.
  spec::Status memset(void* dst, int byte, uint64_t bytes);
  spec::Status copy(void* dst, const void* src, uint64_t bytes);  // device to device
  // `bytes` at `dst` filled with bench_inputs.h's codes of `format` from `seed`.
  spec::Status fill_inputs(void* dst, uint64_t bytes, pacts_format format, uint64_t seed);
  // Reads every 16 bytes of `src` (`bytes`, a multiple of 16) once in `blocks` blocks; `never`
  // (4 bytes) is written only for a value the data never produces (src filled with 0x01 bytes).
  spec::Status read_only(const void* src, uint64_t bytes, uint32_t* never, int32_t blocks);

  spec::Status record_start();
  spec::Status record_stop();
  // Waits for the stop event: the time between the two events, in microseconds.
  spec::Result<double> elapsed_us();
  spec::Status synchronize();

  // Relaxed capture (a decode() may raise a kernel's shared-memory limit, not a stream operation,
  // while the stream is captured); end_capture() stores the graph in `g` even when it fails.
  spec::Status begin_capture();
  spec::Status end_capture(Graph& g);
  spec::Status instantiate(Graph& g);
  spec::Status launch(const Graph& g);

 private:
  void* stream_ = nullptr;  // hipStream_t
  void* start_ = nullptr;   // hipEvent_t
  void* stop_ = nullptr;    // hipEvent_t
};

// The driver API version and the runtime version the runtime reports (as its integers).
spec::Result<int> driver_api_version();
spec::Result<int> runtime_version();
// The driver as reports name it (platform/driver_version.h): "580.159.04, driver API 13000".
std::string driver_description(int driver_api);
// The L2 cache of device `ordinal`, in bytes.
spec::Result<int64_t> l2_cache_bytes(int32_t ordinal);
// Synchronous copies between host and device memory.
spec::Status to_device(void* device_dst, const void* host_src, uint64_t bytes);
spec::Status to_host(void* host_dst, const void* device_src, uint64_t bytes);
// Clears the runtime's last error (after a failed capture, so it is not the next call's).
void clear_last_error();
// Profilers started with collection off (ncu --profile-from-start off) see what runs in between.
spec::Status profiler_start();
spec::Status profiler_stop();

}  // namespace pacts::kernels::hip::timing
