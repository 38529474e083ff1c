// Not PyTorch. Included by vLLM's csrc/attention/attention_kernels.cuh for the launchers'
// at::cuda::getCurrentCUDAStream(); the pacts adapter launches on its own stream and compiles
// none of the launchers, so only the CUDA runtime that the real header brings in is needed.
#pragma once

#include <cuda_runtime.h>
