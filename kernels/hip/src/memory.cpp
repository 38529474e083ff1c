// pacts::kernels::hip::memory (pacts/hip.h): the runtime's memory calls, checked, for callers
// without a GPU header. Compiled as device code so that one runtime serves the whole library.
#include <pacts/hip.h>

#include "platform/gpu.h"

namespace pacts::kernels::hip::memory {

spec::Status select_device(int32_t ordinal) {
  PACTS_GPU_CHECK(hipSetDevice(ordinal));
  return spec::Status::ok();
}

spec::Result<void*> allocate(uint64_t bytes) {
  void* p = nullptr;
  PACTS_GPU_CHECK(hipMalloc(&p, bytes));
  return p;
}

void release(void* device_pointer) {
  if (device_pointer != nullptr) (void)hipFree(device_pointer);
}

spec::Status to_device(void* dst, const void* src, uint64_t bytes) {
  PACTS_GPU_CHECK(hipMemcpy(dst, src, bytes, hipMemcpyHostToDevice));
  return spec::Status::ok();
}

spec::Status to_host(void* dst, const void* src, uint64_t bytes) {
  PACTS_GPU_CHECK(hipMemcpy(dst, src, bytes, hipMemcpyDeviceToHost));
  return spec::Status::ok();
}

spec::Status fill(void* dst, int byte, uint64_t bytes) {
  PACTS_GPU_CHECK(hipMemset(dst, byte, bytes));
  return spec::Status::ok();
}

spec::Status synchronize() {
  PACTS_GPU_CHECK(hipDeviceSynchronize());
  PACTS_GPU_CHECK(hipGetLastError());
  return spec::Status::ok();
}

}  // namespace pacts::kernels::hip::memory
