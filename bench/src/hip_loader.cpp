// The two builds of the HIP kernels pacts-bench times: the linked (gated) library and the unsafe
// one, loaded with dlopen so that both live in one process and one report.
#include "hip_kernels.h"

#include <dlfcn.h>
#include <unistd.h>

#include <filesystem>
#include <system_error>

namespace pacts::bench {

HipKernels safe_hip_kernels() {
  HipKernels k;
  k.variant = "safe";
  k.plan = &kernels::hip::plan;
  k.decode = &kernels::hip::decode;
  k.select_device = &kernels::hip::memory::select_device;
  return k;
}

spec::Result<HipKernels> load_unsafe_hip_kernels() {
  // Next to the executable first (a build folder copied to a GPU machine), then the search path.
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::filesystem::path beside = self.parent_path() / kUnsafeLibrary;
  const std::string where =
      !ec && std::filesystem::exists(beside) ? beside.string() : std::string(kUnsafeLibrary);
  // RTLD_LOCAL: its symbols stay out of the global scope; the library exports one symbol and
  // binds its own references internally (bench/unsafe.map), so nothing crosses either way.
  void* handle = dlopen(where.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr)
    return spec::not_supported(std::string("unsafe variant: ") + kUnsafeLibrary +
                               " not loaded (" + dlerror() +
                               "); build the target pacts_bench_unsafe to time it");
  using Entry = void (*)(HipKernels*);
  const auto entry = reinterpret_cast<Entry>(dlsym(handle, "pacts_bench_unsafe_kernels"));
  if (entry == nullptr)
    return spec::not_supported(std::string("unsafe variant: ") + where +
                               " has no pacts_bench_unsafe_kernels");
  HipKernels k;
  entry(&k);  // the handle stays open for the life of the process
  return k;
}

}  // namespace pacts::bench
