// The builds of the HIP kernels pacts-bench times: the linked (gated) library and the variant
// libraries, loaded with dlopen so that all of them live in one process and one report.
#include "hip_kernels.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cctype>
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

std::string variant_library(const std::string& name) { return "libpacts_bench_" + name + ".so"; }

spec::Result<HipKernels> load_variant_hip_kernels(const std::string& name) {
  for (const char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_'))
      return spec::invalid_argument("variant '" + name +
                                    "': accepted are names of letters, digits and '_'");
  const std::string library = variant_library(name);
  // Next to the executable first (a build folder copied to a GPU machine), then the search path.
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::filesystem::path beside = self.parent_path() / library;
  const std::string where =
      !ec && std::filesystem::exists(beside) ? beside.string() : library;
  // RTLD_LOCAL: its symbols stay out of the global scope; the library exports one symbol and
  // binds its own references internally (kernels/hip/bench/variant.map), so nothing crosses
  // either way.
  void* handle = dlopen(where.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr)
    return spec::not_supported("variant " + name + ": " + library + " not loaded (" + dlerror() +
                               "); build the target pacts_bench_" + name + " to time it");
  using Entry = void (*)(HipKernels*);
  const auto entry = reinterpret_cast<Entry>(dlsym(handle, "pacts_bench_variant_kernels"));
  if (entry == nullptr)
    return spec::not_supported("variant " + name + ": " + where +
                               " has no pacts_bench_variant_kernels");
  HipKernels k;
  entry(&k);  // the handle stays open for the life of the process
  if (k.variant != name)
    return spec::invalid_argument("variant " + name + ": " + where + " says it is '" + k.variant +
                                  "'");
  return k;
}

}  // namespace pacts::bench
