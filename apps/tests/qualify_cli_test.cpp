// pacts-qualify as a program, run in a child process: what it does when it is stopped by a signal
// (the report is still written, marked as interrupted, and the exit status says so), and when a
// second run is started on the folder of a run in progress (refused), or on the folder of an
// earlier run (whose files are moved aside), and when its report cannot be written whole.
#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "child_process.h"

#include <signal.h>
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#if !defined(PACTS_QUALIFY_EXE) || !defined(PACTS_TEST_OUT)
#error "the build defines pacts-qualify's path and the output folder"
#endif

namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::path(PACTS_TEST_OUT) / "qualify_cli" / name;
  fs::remove_all(dir);
  fs::create_directories(dir.parent_path());
  return dir;
}

using pacts::testing::read_text;
using pacts::testing::wait_for;

// Starts pacts-qualify with `args` (tests/support/child_process.h: spawn_logged).
pid_t spawn(const std::vector<std::string>& args, const fs::path& log, long max_file_bytes = -1) {
  return pacts::testing::spawn_logged(PACTS_QUALIFY_EXE, args, log, max_file_bytes);
}

int wait_exit(pid_t pid) { return pacts::testing::wait_exit(pid, 100); }

// A run far too long to end by itself (a million cases per property) stopped by `sig` once it
// is qualifying the host backend: the report is written, says the run was interrupted by that
// signal and is not qualified, and pacts-qualify exits with 128 + the signal.
void expect_signal_writes_an_interrupted_report(int sig, const std::string& name) {
  const fs::path out = fresh_dir(name);
  const fs::path log = out.parent_path() / (name + ".log");
  const pid_t pid = spawn({"--backend", "host", "--cases", "1000000", "--bench-sets", "none",
                           "--out", out.string()},
                          log);
  ASSERT_TRUE(wait_for(log, "qualifying host")) << read_text(log);
  ASSERT_EQ(kill(pid, sig), 0);
  ASSERT_EQ(wait_exit(pid), 128 + sig) << read_text(log);
  ASSERT_TRUE(fs::exists(out / "report.json")) << read_text(log);
  const nlohmann::json j = nlohmann::json::parse(read_text(out / "report.json"));
  EXPECT_FALSE(j["complete"].get<bool>());
  EXPECT_EQ(j["interrupted"], name);
  EXPECT_FALSE(j["qualified"].get<bool>());
  ASSERT_EQ(j["backends"].size(), 1u);
  // The property in progress was abandoned: no row claims a million cases.
  for (const auto& row : j["backends"][0]["results"])
    EXPECT_LT(row["generated"]["pass"].get<int64_t>(), 1000000) << row.dump();
  EXPECT_NE(read_text(out / "report.md").find("**Result: INTERRUPTED by " + name + ": not a complete run"),
            std::string::npos);
  EXPECT_NE(read_text(out / "report.junit.xml").find("type=\"Interrupted\""), std::string::npos);
  EXPECT_NE(read_text(log).find("INTERRUPTED by " + name), std::string::npos) << read_text(log);
}

TEST(QualifySignal, SigtermWritesAnInterruptedReport) {
  expect_signal_writes_an_interrupted_report(SIGTERM, "SIGTERM");
}

TEST(QualifySignal, SigintWritesAnInterruptedReport) {
  expect_signal_writes_an_interrupted_report(SIGINT, "SIGINT");
}

TEST(QualifySignal, SighupWritesAnInterruptedReport) {
  expect_signal_writes_an_interrupted_report(SIGHUP, "SIGHUP");
}

int run_to_end(const std::vector<std::string>& args, const fs::path& log, long max_file_bytes = -1) {
  const int rc = wait_exit(spawn(args, log, max_file_bytes));
  std::printf("exit %d; output:\n%s\n", rc, read_text(log).c_str());
  return rc;
}

// A second run on the --out of a run in progress is refused (exit 2) naming the folder, before it
// writes anything there; once the first has ended, the folder can be used again.
TEST(QualifyOutDir, ASecondRunOnTheSameFolderIsRefused) {
  const fs::path out = fresh_dir("locked");
  const fs::path log = out.parent_path() / "locked-first.log";
  const pid_t first = spawn({"--backend", "host", "--cases", "1000000", "--bench-sets", "none",
                             "--out", out.string()},
                            log);
  ASSERT_TRUE(wait_for(log, "qualifying host")) << read_text(log);
  const fs::path second_log = out.parent_path() / "locked-second.log";
  EXPECT_EQ(run_to_end({"--backend", "reference", "--property", "PACTS-ACC-1", "--cases", "2",
                        "--out", out.string()},
                       second_log),
            2);
  const std::string refusal = read_text(second_log);
  EXPECT_NE(refusal.find("--out '" + out.string() + "': another pacts run is writing into this folder (process " +
                         std::to_string(first) + ")"),
            std::string::npos)
      << refusal;
  ASSERT_EQ(kill(first, SIGTERM), 0);
  ASSERT_EQ(wait_exit(first), 128 + SIGTERM) << read_text(log);
  const nlohmann::json j = nlohmann::json::parse(read_text(out / "report.json"));
  EXPECT_EQ(j["interrupted"], "SIGTERM");  // the first run's report, not the refused one's
  EXPECT_EQ(run_to_end({"--backend", "reference", "--property", "PACTS-ACC-1", "--cases", "2",
                        "--bench-sets", "none", "--out", out.string()},
                       second_log),
            0);
}

// A seed above 2^64-1 (was clamped: another run than the one asked for) and an empty --out (the
// working directory was written): refused with exit 2 naming the option, the value and what is
// accepted, before anything runs.
TEST(QualifyOptions, RefusesValuesNamingTheOptionAndWhatIsAccepted) {
  const fs::path out = fresh_dir("options");
  const fs::path log = out.parent_path() / "options.log";
  const auto refused = [&](const std::vector<std::string>& args, const std::string& words) {
    EXPECT_EQ(run_to_end(args, log), 2) << words;
    EXPECT_NE(read_text(log).find(words), std::string::npos) << read_text(log);
    EXPECT_FALSE(fs::exists(out / "report.json")) << words;
  };
  refused({"--backend", "reference", "--seed", "18446744073709551616", "--out", out.string()},
          "--seed '18446744073709551616': above 2^64-1; accepted: a decimal integer from 0 to "
          "18446744073709551615");
  refused({"--backend", "reference", "--seed", "-1", "--out", out.string()},
          "--seed '-1': accepted: a decimal integer from 0 to 18446744073709551615");
  refused({"--backend", "reference", "--out", ""}, "--out '': accepted: the path of a folder");
  EXPECT_EQ(run_to_end({"--backend", "reference", "--property", "PACTS-ACC-1", "--cases", "2",
                        "--bench-sets", "none", "--seed", "18446744073709551615", "--out", out.string()},
                       log),
            0);
  EXPECT_EQ(nlohmann::json::parse(read_text(out / "report.json"))["seed"], "18446744073709551615");
}

// The folders previous-* that a run made in `out` for an earlier run's files.
std::vector<fs::path> previous_runs(const fs::path& out) {
  std::vector<fs::path> found;
  for (const auto& e : fs::directory_iterator(out))
    if (e.path().filename().string().rfind("previous-", 0) == 0) found.push_back(e.path());
  std::sort(found.begin(), found.end());
  return found;
}

// A reused --out: the earlier run's report and failing cases are moved, together, into
// previous-*/, so that the new report never stands beside failure files it did not find (a
// failing run, then a passing one, left the first run's case files beside "qualified").
TEST(QualifyOutDir, AnEarlierRunsReportAndFailuresAreMovedAside) {
  const fs::path out = fresh_dir("reused");
  const fs::path log = out.parent_path() / "reused.log";
  ASSERT_EQ(run_to_end({"--backend", "host+v_tail_leak", "--property", "PACTS-POISON-1", "--cases", "8",
                        "--bench-sets", "none", "--out", out.string()},
                       log),
            1);
  ASSERT_TRUE(fs::exists(out / "failures")) << read_text(log);
  ASSERT_FALSE(fs::is_empty(out / "failures"));
  ASSERT_EQ(run_to_end({"--backend", "reference", "--property", "PACTS-ACC-1", "--cases", "2",
                        "--bench-sets", "none", "--out", out.string()},
                       log),
            0);
  EXPECT_FALSE(fs::exists(out / "failures"));
  EXPECT_FALSE(nlohmann::json::parse(read_text(out / "report.json"))["mandatory_failure"].get<bool>());
  const std::vector<fs::path> previous = previous_runs(out);
  ASSERT_EQ(previous.size(), 1u);
  EXPECT_NE(read_text(log).find("were moved to " + previous[0].string()), std::string::npos) << read_text(log);
  EXPECT_TRUE(nlohmann::json::parse(read_text(previous[0] / "report.json"))["mandatory_failure"].get<bool>());
  EXPECT_TRUE(fs::exists(previous[0] / "report.md"));
  EXPECT_FALSE(fs::is_empty(previous[0] / "failures"));
}

// A report that cannot be written whole (here no file may pass 3,000 bytes: report.md fits,
// report.json does not) is written not at all: no report file cut short, no temporary file left,
// exit 2 naming the file; the earlier run's report is whole in previous-*/.
TEST(QualifyReportWrite, AFailedWriteLeavesNoReportCutShort) {
  const fs::path out = fresh_dir("full");
  const fs::path log = out.parent_path() / "full.log";
  const std::vector<std::string> args = {"--backend", "reference", "--property", "PACTS-ACC-1",
                                         "--cases", "2", "--bench-sets", "none", "--out", out.string()};
  ASSERT_EQ(run_to_end(args, log), 0);
  ASSERT_GT(fs::file_size(out / "report.json"), 3000u);  // else the limit below tests nothing
  ASSERT_LT(fs::file_size(out / "report.md"), 3000u);
  EXPECT_EQ(run_to_end(args, log, 3000), 2);
  EXPECT_NE(read_text(log).find("report.json: not written"), std::string::npos) << read_text(log);
  for (const char* name : {"report.md", "report.json", "report.junit.xml"})
    EXPECT_FALSE(fs::exists(out / name)) << name;
  for (const auto& e : fs::directory_iterator(out))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
  const std::vector<fs::path> previous = previous_runs(out);
  ASSERT_EQ(previous.size(), 1u);
  EXPECT_FALSE(nlohmann::json::parse(read_text(previous[0] / "report.json"))["mandatory_failure"].get<bool>());
}

}  // namespace

namespace {

// The attribute `key` of the first element that starts with `open` after `from`, "" if none.
std::string attribute_after(const std::string& xml, const std::string& open, const std::string& key,
                            size_t from = 0) {
  const size_t at = xml.find(open, from);
  if (at == std::string::npos) return "";
  const size_t end = xml.find('>', at);
  const size_t k = xml.find(" " + key + "=\"", at);
  if (k == std::string::npos || k > end) return "";
  const size_t v = k + key.size() + 3;
  return xml.substr(v, xml.find('"', v) - v);
}

// The same on a real full disk: --out on a small tmpfs, filled up after a first run. Skipped
// (with the reason) where the test cannot mount one.
TEST(QualifyReportWrite, AFullDiskLeavesNoReportCutShort) {
  const fs::path out = fresh_dir("tmpfs");
  fs::create_directories(out);
  if (mount("tmpfs", out.c_str(), "tmpfs", 0, "size=1m") != 0)
    GTEST_SKIP() << "no tmpfs could be mounted at " << out << ": " << std::strerror(errno);
  struct Unmount {
    fs::path at;
    ~Unmount() { umount2(at.c_str(), MNT_DETACH); }
  } unmount{out};
  const fs::path log = out.parent_path() / "tmpfs.log";
  const std::vector<std::string> args = {"--backend", "reference", "--property", "PACTS-ACC-1",
                                         "--cases", "2", "--bench-sets", "none", "--out", out.string()};
  ASSERT_EQ(run_to_end(args, log), 0) << read_text(log);
  ASSERT_FALSE(nlohmann::json::parse(read_text(out / "report.json"))["mandatory_failure"].get<bool>());
  {  // every byte the file system has left, taken
    std::FILE* fill = std::fopen((out / "filler").c_str(), "wb");
    ASSERT_NE(fill, nullptr);
    const std::vector<char> chunk(4096, 'x');
    while (std::fwrite(chunk.data(), 1, chunk.size(), fill) == chunk.size() && std::fflush(fill) == 0) {
    }
    std::fclose(fill);
  }
  EXPECT_EQ(run_to_end(args, log), 2);
  EXPECT_NE(read_text(log).find("not written"), std::string::npos) << read_text(log);
  for (const char* name : {"report.md", "report.json", "report.junit.xml"})
    EXPECT_FALSE(fs::exists(out / name)) << name << "\n" << read_text(log);
  for (const auto& e : fs::directory_iterator(out))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
  const std::vector<fs::path> previous = previous_runs(out);
  ASSERT_EQ(previous.size(), 1u);
  EXPECT_FALSE(nlohmann::json::parse(read_text(previous[0] / "report.json"))["mandatory_failure"].get<bool>());
  EXPECT_TRUE(fs::exists(previous[0] / "report.md"));
}

}  // namespace

// The host backend reports PACTS-DEV-2 (Mandatory) NotSupported: the JUnit skipped message and
// report.md give the backend's reason; every testsuite has time, timestamp and hostname; the
// testcase is pacts.qualify.host / PACTS-DEV-2.
TEST(QualifyReportJunit, NotSupportedSaysWhyAndSuitesSayWhenAndWhere) {
  const fs::path out = fresh_dir("notsupported");
  const fs::path log = out.parent_path() / "notsupported.log";
  ASSERT_EQ(run_to_end({"--backend", "host", "--property", "PACTS-DEV-2", "--cases", "2",
                        "--bench-sets", "none", "--out", out.string()},
                       log),
            0)
      << read_text(log);
  const std::string xml = read_text(out / "report.junit.xml");
  const size_t testcase = xml.find("<testcase classname=\"pacts.qualify.host\" name=\"PACTS-DEV-2\"");
  ASSERT_NE(testcase, std::string::npos) << xml;
  const std::string message = attribute_after(xml, "<skipped ", "message", testcase);
  const std::string prefix = "NotSupported (Mandatory) on host: ";
  ASSERT_EQ(message.rfind(prefix, 0), 0u) << xml;
  const std::string reason = message.substr(prefix.size());
  EXPECT_GT(reason.size(), 10u) << xml;
  EXPECT_EQ(reason.find("no reason"), std::string::npos) << xml;
  EXPECT_NE(read_text(out / "report.md").find("**PACTS-DEV-2** Mandatory, NotSupported: " + reason),
            std::string::npos)
      << read_text(out / "report.md");
  size_t suites = 0;
  for (size_t at = xml.find("<testsuite "); at != std::string::npos; at = xml.find("<testsuite ", at + 1)) {
    ++suites;
    EXPECT_FALSE(attribute_after(xml, "<testsuite ", "time", at).empty()) << xml;
    EXPECT_EQ(attribute_after(xml, "<testsuite ", "timestamp", at).size(), 20u) << xml;  // ...T..:..:..Z
    EXPECT_FALSE(attribute_after(xml, "<testsuite ", "hostname", at).empty()) << xml;
  }
  EXPECT_EQ(suites, 2u);  // host, the reference's self-checks
}
