// platform/driver_version.h: the kernel module's version read from the first line of
// /proc/driver/nvidia/version, as the lines of NVIDIA's proprietary and open modules print it.
#include "platform/driver_version.h"

#include <gtest/gtest.h>

namespace {

using pacts::platform::nvidia_module_version;

TEST(DriverVersion, ProprietaryModule) {
  EXPECT_EQ(nvidia_module_version("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  "
                                  "Thu Oct 30 19:56:09 UTC 2025\n"),
            "580.159.04");
}

TEST(DriverVersion, OpenModule) {
  EXPECT_EQ(nvidia_module_version("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  "
                                  "570.86.15  Release Build  (dvs-builder@U16-I3-B13-4-1)\n"),
            "570.86.15");
}

TEST(DriverVersion, NoVersionNoText) {
  EXPECT_EQ(nvidia_module_version(""), "");
  EXPECT_EQ(nvidia_module_version("NVRM version: something else 1.2"), "");
  // A word after "Module" without a dot (a build number) is not a version.
  EXPECT_EQ(nvidia_module_version("NVRM version: NVIDIA UNIX Kernel Module 42 build"), "");
}

TEST(DriverVersion, DescriptionJoinsWhatIsKnown) {
  const std::string module = nvidia_module_version();  // this machine's, empty without NVIDIA
  EXPECT_EQ(pacts::platform::driver_description(13000),
            module.empty() ? "driver API 13000" : module + ", driver API 13000");
  EXPECT_EQ(pacts::platform::driver_description(-1), module);
}

}  // namespace
