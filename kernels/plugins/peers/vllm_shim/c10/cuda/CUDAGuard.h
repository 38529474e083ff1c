// Not PyTorch. Included by vLLM's csrc/attention/attention_kernels.cuh for the launchers'
// at::cuda::OptionalCUDAGuard; the pacts adapter runs on the current device and compiles none
// of the launchers, so this header is empty.
#pragma once
