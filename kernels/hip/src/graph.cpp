// pacts::kernels::hip::CapturedDecode (pacts/hip.h): decode() captured into a graph and
// replayed, for serving loops and PACTS-DEV-3. Compiled as device code like memory.cpp, so the
// one runtime of the library serves it.
#include <pacts/hip.h>

#include <utility>

#include "platform/gpu.h"

namespace pacts::kernels::hip {

spec::Result<CapturedDecode> CapturedDecode::capture(const Plan& plan, const pacts_buffers& buffers,
                                                     uint32_t* error_word, void* workspace,
                                                     uint64_t workspace_bytes) {
  CapturedDecode c;
  hipStream_t stream = nullptr;
  PACTS_GPU_CHECK(hipStreamCreate(&stream));
  c.stream_ = stream;
  // Relaxed: decode() may raise a kernel's shared-memory limit (not a stream operation) while
  // the stream is being captured.
  PACTS_GPU_CHECK(hipStreamBeginCapture(stream, hipStreamCaptureModeRelaxed));
  const spec::Status launched =
      decode(plan, buffers, error_word, workspace, workspace_bytes, stream);
  hipGraph_t graph = nullptr;
  const hipError_t ended = hipStreamEndCapture(stream, &graph);
  c.graph_ = graph;
  if (!launched) return launched;  // a refusal or launch failure: nothing was captured to keep
  PACTS_GPU_CHECK(ended);
  hipGraphExec_t exec = nullptr;
  PACTS_GPU_CHECK(hipGraphInstantiate(&exec, graph, nullptr, nullptr, 0));
  c.exec_ = exec;
  return spec::Result<CapturedDecode>(std::move(c));
}

spec::Status CapturedDecode::replay() {
  const auto stream = static_cast<hipStream_t>(stream_);
  PACTS_GPU_CHECK(hipGraphLaunch(static_cast<hipGraphExec_t>(exec_), stream));
  PACTS_GPU_CHECK(hipStreamSynchronize(stream));
  PACTS_GPU_CHECK(hipGetLastError());
  return spec::Status::ok();
}

CapturedDecode::CapturedDecode(CapturedDecode&& other) noexcept
    : stream_(std::exchange(other.stream_, nullptr)),
      graph_(std::exchange(other.graph_, nullptr)),
      exec_(std::exchange(other.exec_, nullptr)) {}

CapturedDecode& CapturedDecode::operator=(CapturedDecode&& other) noexcept {
  if (this != &other) {
    reset();
    stream_ = std::exchange(other.stream_, nullptr);
    graph_ = std::exchange(other.graph_, nullptr);
    exec_ = std::exchange(other.exec_, nullptr);
  }
  return *this;
}

CapturedDecode::~CapturedDecode() { reset(); }

// Errors are ignored: this runs in destructors.
void CapturedDecode::reset() {
  if (exec_ != nullptr) (void)hipGraphExecDestroy(static_cast<hipGraphExec_t>(exec_));
  if (graph_ != nullptr) (void)hipGraphDestroy(static_cast<hipGraph_t>(graph_));
  if (stream_ != nullptr) (void)hipStreamDestroy(static_cast<hipStream_t>(stream_));
  exec_ = graph_ = stream_ = nullptr;
}

}  // namespace pacts::kernels::hip
