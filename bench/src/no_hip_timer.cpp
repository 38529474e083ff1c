// The "hip" timer of a build without the HIP kernels (bench/CMakeLists.txt compiles this file
// instead of hip_timer.cpp when kernels/hip builds no pacts_kernels_hip).
#include "internal.h"

namespace pacts::bench {

spec::Result<std::unique_ptr<Timer>> make_hip_timer(const Target& target, const Options&) {
  return spec::not_supported("backend " + target.backend +
                             ": this build has no HIP kernels (configure with "
                             "-DPACTS_ENABLE_CUDA=ON)");
}

}  // namespace pacts::bench
