// Output folders (conformance/out_dir.h): the lock, what happens to an earlier run's files, and
// writes all or none. The programs' side (a second pacts-qualify or pacts-fuzz refused, a report
// write that fails) is tested in apps/tests/qualify_cli_test.cpp and fuzz/tests/fuzz_test.cpp.
#include <pacts/conformance/out_dir.h>

#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

extern char** environ;

namespace pacts::conformance {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("pacts_out_dir_test_" + std::to_string(getpid())) / name;
  fs::remove_all(dir);
  return dir;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(OutDir, ASecondClaimIsRefusedUntilTheFirstEnds) {
  const fs::path dir = fresh_dir("lock");
  {
    auto first = claim_out_dir(dir.string(), "--out", {});
    ASSERT_TRUE(first.is_ok()) << first.status().to_string();
    auto second = claim_out_dir(dir.string(), "--out", {});
    ASSERT_FALSE(second.is_ok());
    EXPECT_EQ(second.status().code(), spec::Code::kInvalidArgument);
    EXPECT_NE(second.status().message().find("--out '" + dir.string() +
                                             "': another pacts run is writing into this folder (process " +
                                             std::to_string(getpid()) + ")"),
              std::string::npos)
        << second.status().message();
  }
  EXPECT_TRUE(claim_out_dir(dir.string(), "--out", {}).is_ok());
  const auto empty = claim_out_dir("", "--out", {});
  ASSERT_FALSE(empty.is_ok());
  EXPECT_NE(empty.status().message().find("--out '': accepted: the path of a folder"), std::string::npos);
}

// A child process started while the folder is claimed (a plugin's pacts-child, a kernel's helper)
// does not hold the lock: once the run ends, the folder is free even while the child lives on.
TEST(OutDir, ChildProcessesDoNotHoldTheLock) {
  const fs::path dir = fresh_dir("children");
  std::optional<spec::Result<OutDir>> claimed(claim_out_dir(dir.string(), "--out", {}));
  ASSERT_TRUE(claimed->is_ok()) << claimed->status().to_string();
  // The child waits on its standard input, a pipe whose write end this test holds: it lives
  // until the end of the test, past the claim.
  int to_child[2];
  ASSERT_EQ(pipe2(to_child, O_CLOEXEC), 0);  // the child holds only its standard input
  char sh[] = "/bin/sh", c[] = "-c", body[] = "read line";
  char* argv[] = {sh, c, body, nullptr};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, to_child[0], 0);
  pid_t child = -1;
  ASSERT_EQ(posix_spawn(&child, "/bin/sh", &actions, nullptr, argv, environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  close(to_child[0]);
  EXPECT_FALSE(claim_out_dir(dir.string(), "--out", {}).is_ok());
  claimed.reset();  // the run ends: its lock goes, though its child lives on
  const auto freed = claim_out_dir(dir.string(), "--out", {});
  EXPECT_TRUE(freed.is_ok()) << freed.status().to_string();
  close(to_child[1]);  // end of input: the child ends
  kill(child, SIGKILL);  // in case it did not
  int status = 0;
  waitpid(child, &status, 0);
}

// An earlier run's files named by the caller move together into previous-*/; other files stay.
TEST(OutDir, AnEarlierRunsFilesAreMovedTogether) {
  const fs::path dir = fresh_dir("previous");
  fs::create_directories(dir / "failures");
  std::ofstream(dir / "report.md") << "old report";
  std::ofstream(dir / "failures" / "a.json") << "{}";
  std::ofstream(dir / "notes.txt") << "mine";
  auto claimed = claim_out_dir(dir.string(), "--out", {"report.md", "report.json", "failures"});
  ASSERT_TRUE(claimed.is_ok()) << claimed.status().to_string();
  const fs::path previous = claimed.value().previous();
  ASSERT_FALSE(previous.empty());
  EXPECT_EQ(previous.parent_path(), dir);
  EXPECT_EQ(previous.filename().string().rfind("previous-", 0), 0u);
  EXPECT_EQ(read_text(previous / "report.md"), "old report");
  EXPECT_TRUE(fs::exists(previous / "failures" / "a.json"));
  EXPECT_FALSE(fs::exists(dir / "report.md"));
  EXPECT_FALSE(fs::exists(dir / "failures"));
  EXPECT_EQ(read_text(dir / "notes.txt"), "mine");
}

// All or none: a file that cannot be written (its folder is missing) leaves every target as it
// was, and no temporary file behind.
TEST(OutDir, WritesAllOrNone) {
  const fs::path dir = fresh_dir("atomic");
  fs::create_directories(dir);
  std::ofstream(dir / "a.txt") << "old a";
  const spec::Status s = write_files_atomically(
      {{(dir / "a.txt").string(), "new a"}, {(dir / "missing" / "b.txt").string(), "new b"}});
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find((dir / "missing" / "b.txt").string() + ": not written"), std::string::npos)
      << s.message();
  EXPECT_EQ(read_text(dir / "a.txt"), "old a");
  for (const auto& e : fs::directory_iterator(dir)) EXPECT_EQ(e.path().filename(), "a.txt");
  ASSERT_TRUE(write_files_atomically({{(dir / "a.txt").string(), "new a"}, {(dir / "b.txt").string(), "new b"}})
                  .is_ok());
  EXPECT_EQ(read_text(dir / "a.txt"), "new a");
  EXPECT_EQ(read_text(dir / "b.txt"), "new b");
}

}  // namespace
}  // namespace pacts::conformance
