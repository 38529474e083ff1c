// Not PyTorch. vLLM's attention kernel headers (csrc/attention/attention_kernels.cuh) include
// <torch/all.h> for the Tensor-based launchers in paged_attention_v1.cu / paged_attention_v2.cu,
// which the pacts adapter (../../vllm_paged_attention.cu) does not compile: it launches the
// kernel templates itself. What the headers it does compile still name is TORCH_CHECK, in the
// host helper vllm::get_fp8_kv_cache_data_type (csrc/attention/dtype_fp8.cuh), which the adapter
// never calls. This header provides that macro and nothing else; PyTorch is not installed on the
// build machine and nothing of it is linked.
#pragma once

#include <stdexcept>
#include <string>

namespace pacts_vllm_shim {
[[noreturn]] inline void torch_check_failed(const char* condition) {
  throw std::runtime_error(std::string("vLLM TORCH_CHECK failed: ") + condition);
}
}  // namespace pacts_vllm_shim

// The message arguments are dropped: the only use is unreachable from the adapter.
#define TORCH_CHECK(cond, ...) \
  ((cond) ? static_cast<void>(0) : ::pacts_vllm_shim::torch_check_failed(#cond))
