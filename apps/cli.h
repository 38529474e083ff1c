// What every pacts program says the same way: its exit statuses and its command line's refusals.
//   0   the run passed (nothing Mandatory failed; the bench timed what it was asked to)
//   1   a Mandatory failure (for pacts-bench: the conformance gate refused the backend)
//   2   a usage or load error: an unknown or misspelt option, a bad value, a backend or file that
//       cannot be loaded; nothing ran
//   128 + N   stopped by signal N (the programs that catch SIGINT, SIGTERM and SIGHUP)
// Programs may add statuses above 2 for findings of their own (pacts-bench: 3 a baseline
// comparison changed beyond the noise, 4 a timed row errored). README.md lists them.
#pragma once

#include <CLI/CLI.hpp>
#include <pacts/suite_version.h>  // PACTS_SUITE_VERSION, generated at build time

#include <filesystem>
#include <string>
#include <system_error>

namespace pacts::apps {

inline constexpr int kExitPass = 0, kExitFail = 1, kExitUsage = 2;

// A data file of pacts (the mustpass set, the stored peers' figures): in an installed tree it lies
// at <prefix>/share/pacts/<installed>, found from the running program (<prefix>/bin/NAME); in a
// build tree, at the source path the build compiled in (`build_tree`). The installed copy wins
// where both exist, so an installed program never reads a source tree that moved or changed.
// The folder of the running program (empty when /proc/self/exe cannot be read).
inline std::filesystem::path program_dir() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::path() : exe.parent_path();
}

inline std::string data_path(const std::string& installed, const std::string& build_tree) {
  const std::filesystem::path dir = program_dir();
  if (!dir.empty()) {
    std::error_code ec;
    const std::filesystem::path at = dir.parent_path() / "share" / "pacts" / installed;
    if (std::filesystem::exists(at, ec)) return at.string();
  }
  return build_tree;
}

// "pacts-bench 0.3.0 (git abc1234)": PACTS_PROGRAM comes from the build (apps/CMakeLists.txt,
// pacts_app), PACTS_SUITE_VERSION from <pacts/suite_version.h> (cmake/suite_version.cmake).
inline std::string version_line() { return std::string(PACTS_PROGRAM) + " " + PACTS_SUITE_VERSION; }

// --version on a CLI11 program: prints version_line() and exits 0.
inline void add_version(CLI::App& app) { app.set_version_flag("--version", version_line()); }

}  // namespace pacts::apps

// CLI11_PARSE with pacts' statuses: --help and --version print and exit 0; every parse error (an
// unknown option, a value out of range or not a number) prints CLI11's message and exits 2.
#define PACTS_CLI_PARSE(app, argc, argv)                                                          \
  do {                                                                                            \
    try {                                                                                         \
      (app).parse((argc), (argv));                                                                \
    } catch (const CLI::ParseError& e) {                                                          \
      return (app).exit(e) == 0 ? ::pacts::apps::kExitPass : ::pacts::apps::kExitUsage;          \
    }                                                                                             \
  } while (0)
