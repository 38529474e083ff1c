// The driver a GPU report names: the kernel module's version where the system states it
// (/proc/driver/nvidia/version on Linux with NVIDIA's driver, e.g. "580.159.04"), then the driver
// API version the runtime reports ("driver API 13000"). Host code; shared by the hip backend's
// device description and pacts-bench's timer so that reports and bench files agree.
#pragma once

#include <cctype>
#include <cstdio>
#include <sstream>
#include <string>

namespace pacts::platform {

// The module version from the first line of /proc/driver/nvidia/version ("NVRM version: NVIDIA
// UNIX [Open ]Kernel Module [for x86_64]  580.159.04  ..."): the first word after "Module" that
// starts with a digit and holds a dot. Empty where the file is absent or says no such word.
inline std::string nvidia_module_version(const std::string& first_line) {
  const size_t module = first_line.find("Module");
  if (module == std::string::npos) return {};
  std::istringstream words(first_line.substr(module + 6));
  for (std::string w; words >> w;)
    if (std::isdigit(static_cast<unsigned char>(w[0])) && w.find('.') != std::string::npos) return w;
  return {};
}

inline std::string nvidia_module_version() {
  std::string line;
  if (std::FILE* f = std::fopen("/proc/driver/nvidia/version", "r")) {
    char buf[512] = {};
    if (std::fgets(buf, sizeof buf, f) != nullptr) line = buf;
    std::fclose(f);
  }
  return nvidia_module_version(line);
}

// "580.159.04, driver API 13000"; either part alone where only it is known (api < 0: unknown).
inline std::string driver_description(int api) {
  std::string text = nvidia_module_version();
  if (api >= 0) text += (text.empty() ? "" : ", ") + std::string("driver API ") + std::to_string(api);
  return text;
}

}  // namespace pacts::platform
