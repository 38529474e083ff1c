// The GPU operations of bench_timing.h: device code (CUDA on NVIDIA), the runtime through
// platform/gpu.h. Each is the runtime call pacts-bench's timer makes, checked.
#include "bench_timing.h"

#include "bench_inputs.h"
#include "platform/driver_version.h"
#include "platform/gpu.h"

namespace pacts::kernels::hip::timing {
namespace {

constexpr int kFillBlocks = 2048, kThreads = 256;

__global__ void fill_kernel(uint8_t* dst, uint64_t elements, pacts_format format, uint64_t seed) {
  const int eb = bench::input_element_bytes(format);
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < elements;
       i += uint64_t{gridDim.x} * blockDim.x)
    bench::store_input(dst + i * eb, format, seed, i);
}

// The XOR of what a thread read is stored only when it equals a value the data never produces,
// so no load can be elided and nothing is written.
__global__ void read_only_kernel(const uint4* src, uint64_t n, uint32_t* never) {
  uint32_t acc = 0;
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n;
       i += uint64_t{gridDim.x} * blockDim.x) {
    const uint4 v = src[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0xDEADBEEFu) never[0] = acc;
}

hipStream_t stream_of(void* s) { return static_cast<hipStream_t>(s); }
hipEvent_t event_of(void* e) { return static_cast<hipEvent_t>(e); }

}  // namespace

DeviceBuffer::~DeviceBuffer() {
  if (p_) (void)hipFree(p_);
}

spec::Status DeviceBuffer::allocate(uint64_t bytes) {
  bytes_ = bytes;
  if (bytes == 0) return spec::Status::ok();
  PACTS_GPU_CHECK(hipMalloc(&p_, bytes));
  return spec::Status::ok();
}

Graph::~Graph() {
  if (exec_) (void)hipGraphExecDestroy(static_cast<hipGraphExec_t>(exec_));
  if (graph_) (void)hipGraphDestroy(static_cast<hipGraph_t>(graph_));
}

Stream::~Stream() {
  if (start_) (void)hipEventDestroy(event_of(start_));
  if (stop_) (void)hipEventDestroy(event_of(stop_));
  if (stream_) (void)hipStreamDestroy(stream_of(stream_));
}

spec::Status Stream::open(int32_t ordinal) {
  PACTS_GPU_CHECK(hipSetDevice(ordinal));
  hipStream_t stream = nullptr;
  PACTS_GPU_CHECK(hipStreamCreateWithFlags(&stream, hipStreamNonBlocking));
  stream_ = stream;
  hipEvent_t start = nullptr, stop = nullptr;
  PACTS_GPU_CHECK(hipEventCreate(&start));
  start_ = start;
  PACTS_GPU_CHECK(hipEventCreate(&stop));
  stop_ = stop;
  return spec::Status::ok();
}

spec::Status Stream::memset(void* dst, int byte, uint64_t bytes) {
  PACTS_GPU_CHECK(hipMemsetAsync(dst, byte, bytes, stream_of(stream_)));
  return spec::Status::ok();
}

spec::Status Stream::copy(void* dst, const void* src, uint64_t bytes) {
  PACTS_GPU_CHECK(hipMemcpyAsync(dst, src, bytes, hipMemcpyDeviceToDevice, stream_of(stream_)));
  return spec::Status::ok();
}

spec::Status Stream::fill_inputs(void* dst, uint64_t bytes, pacts_format format, uint64_t seed) {
  if (bytes == 0) return spec::Status::ok();
  hipLaunchKernelGGL(fill_kernel, dim3(kFillBlocks), dim3(kThreads), 0, stream_of(stream_),
                     static_cast<uint8_t*>(dst), bytes / bench::input_element_bytes(format),
                     format, seed);
  PACTS_GPU_CHECK(hipGetLastError());
  return spec::Status::ok();
}

spec::Status Stream::read_only(const void* src, uint64_t bytes, uint32_t* never, int32_t blocks) {
  hipLaunchKernelGGL(read_only_kernel, dim3(blocks), dim3(kThreads), 0, stream_of(stream_),
                     static_cast<const uint4*>(src), bytes / 16, never);
  PACTS_GPU_CHECK(hipGetLastError());
  return spec::Status::ok();
}

spec::Status Stream::record_start() {
  PACTS_GPU_CHECK(hipEventRecord(event_of(start_), stream_of(stream_)));
  return spec::Status::ok();
}

spec::Status Stream::record_stop() {
  PACTS_GPU_CHECK(hipEventRecord(event_of(stop_), stream_of(stream_)));
  return spec::Status::ok();
}

spec::Result<double> Stream::elapsed_us() {
  PACTS_GPU_CHECK(hipEventSynchronize(event_of(stop_)));
  float ms = 0;
  PACTS_GPU_CHECK(hipEventElapsedTime(&ms, event_of(start_), event_of(stop_)));
  return 1e3 * static_cast<double>(ms);
}

spec::Status Stream::synchronize() {
  PACTS_GPU_CHECK(hipStreamSynchronize(stream_of(stream_)));
  return spec::Status::ok();
}

spec::Status Stream::begin_capture() {
  PACTS_GPU_CHECK(hipStreamBeginCapture(stream_of(stream_), hipStreamCaptureModeRelaxed));
  return spec::Status::ok();
}

spec::Status Stream::end_capture(Graph& g) {
  hipGraph_t graph = nullptr;
  const hipError_t ended = hipStreamEndCapture(stream_of(stream_), &graph);
  g.graph_ = graph;
  PACTS_GPU_CHECK(ended);
  return spec::Status::ok();
}

spec::Status Stream::instantiate(Graph& g) {
  hipGraphExec_t exec = nullptr;
  PACTS_GPU_CHECK(hipGraphInstantiateWithFlags(&exec, static_cast<hipGraph_t>(g.graph_), 0));
  g.exec_ = exec;
  return spec::Status::ok();
}

spec::Status Stream::launch(const Graph& g) {
  PACTS_GPU_CHECK(hipGraphLaunch(static_cast<hipGraphExec_t>(g.exec_), stream_of(stream_)));
  return spec::Status::ok();
}

spec::Result<int> driver_api_version() {
  int v = 0;
  PACTS_GPU_CHECK(hipDriverGetVersion(&v));
  return v;
}

std::string driver_description(int driver_api) { return platform::driver_description(driver_api); }

spec::Result<int> runtime_version() {
  int v = 0;
  PACTS_GPU_CHECK(hipRuntimeGetVersion(&v));
  return v;
}

spec::Result<int64_t> l2_cache_bytes(int32_t ordinal) {
  int l2 = 0;
  PACTS_GPU_CHECK(hipDeviceGetAttribute(&l2, hipDeviceAttributeL2CacheSize, ordinal));
  return int64_t{l2};
}

spec::Status to_device(void* device_dst, const void* host_src, uint64_t bytes) {
  PACTS_GPU_CHECK(hipMemcpy(device_dst, host_src, bytes, hipMemcpyHostToDevice));
  return spec::Status::ok();
}

spec::Status to_host(void* host_dst, const void* device_src, uint64_t bytes) {
  PACTS_GPU_CHECK(hipMemcpy(host_dst, device_src, bytes, hipMemcpyDeviceToHost));
  return spec::Status::ok();
}

void clear_last_error() { (void)hipGetLastError(); }

spec::Status profiler_start() {
  PACTS_GPU_CHECK(hipProfilerStart());
  return spec::Status::ok();
}

spec::Status profiler_stop() {
  PACTS_GPU_CHECK(hipProfilerStop());
  return spec::Status::ok();
}

}  // namespace pacts::kernels::hip::timing
