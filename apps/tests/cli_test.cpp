// Every pacts program speaks the same command-line language (README.md "Exit status",
// apps/cli.h): a misspelt option or a bad value is refused with status 2 before anything runs,
// and --version prints the program and the suite version with status 0.
#include "child_process.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using pacts::testing::read_text;
using pacts::testing::spawn_logged;
using pacts::testing::wait_exit;

struct Program {
  const char* name;
  const char* path;
};

const std::vector<Program>& programs() {
  static const std::vector<Program> all = {
      {"pacts", PACTS_EXE},           {"pacts-conformance", PACTS_CONFORMANCE_EXE},
      {"pacts-qualify", PACTS_QUALIFY_EXE}, {"pacts-bench", PACTS_BENCH_EXE},
      {"pacts-fuzz", PACTS_FUZZ_EXE}, {"pacts-mutate", PACTS_MUTATE_EXE},
      {"pacts-child", PACTS_CHILD_EXE}};
  return all;
}

struct Result {
  int status;
  std::string output;
};

Result run(const Program& p, const std::vector<std::string>& args, const std::string& tag) {
  const fs::path dir = fs::path(PACTS_TEST_OUT) / "cli";
  fs::create_directories(dir);
  const fs::path log = dir / (std::string(p.name) + "-" + tag + ".log");
  const int status = wait_exit(spawn_logged(p.path, args, log), 120);
  return {status, read_text(log)};
}

TEST(Cli, AMisspeltOptionIsRefusedWithStatus2) {
  for (const Program& p : programs()) {
    // pacts itself needs a subcommand first: one it parses (case run) and one it hands to its
    // program (qualify) are both held.
    std::vector<std::vector<std::string>> tries = {{"--bakend", "host"}};
    if (std::string(p.name) == "pacts")
      tries = {{"case", "run", "--bakend", "host"}, {"qualify", "--bakend", "host"}};
    for (const std::vector<std::string>& args : tries) {
      const Result r = run(p, args, "misspelt-" + args[0]);
      EXPECT_EQ(r.status, 2) << p.name << ":\n" << r.output;
      EXPECT_NE(r.output.find("--bakend"), std::string::npos) << p.name << ":\n" << r.output;
    }
  }
}

TEST(Cli, VersionPrintsTheProgramAndTheSuiteVersion) {
  for (const Program& p : programs()) {
    const Result r = run(p, {"--version"}, "version");
    EXPECT_EQ(r.status, 0) << p.name << ":\n" << r.output;
    EXPECT_EQ(r.output.rfind(std::string(p.name) + " ", 0), 0u) << p.name << ":\n" << r.output;
  }
}

// Values that are not numbers, or out of range, are refused (pacts-conformance ran 0 cases and
// passed with `--cases abc`).
TEST(Cli, BadValuesAreRefusedWithStatus2) {
  const Program& conformance = programs()[1];
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--cases", "abc"}, {"--cases", "0"}, {"--seed", "-1"},
        {"--backend", "host", "stray"}}) {
    const Result r = run(conformance, args, "bad-" + args[1]);
    EXPECT_EQ(r.status, 2) << args[0] << " " << args[1] << ":\n" << r.output;
  }
  const Result bench = run(programs()[3], {"--backend", "host", "--repeats", "abc"}, "bench-bad");
  EXPECT_EQ(bench.status, 2) << bench.output;
}

}  // namespace
