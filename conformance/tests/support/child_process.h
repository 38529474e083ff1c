// Tests that run a pacts program as a child process (pacts-qualify's and pacts-fuzz's command-line
// tests): start it with its output in a log file, wait for words in that log, wait for its exit
// with a guard that turns a hang into a failed test. Header-only, for tests (target
// pacts_test_support).
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace pacts::testing {

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Starts `exe` with `args`, its stdout and stderr going to `log`. The log is created here, empty,
// before the child starts: a waiter must never read an earlier run's log. With `max_file_bytes`,
// no file the child writes may grow beyond that many bytes (RLIMIT_FSIZE, SIGXFSZ ignored: a
// write past it fails with EFBIG, as on a full disk).
inline pid_t spawn_logged(const char* exe, const std::vector<std::string>& args,
                          const std::filesystem::path& log, long max_file_bytes = -1) {
  std::printf("spawn: %s", exe);
  for (const std::string& a : args) std::printf(" '%s'", a.c_str());
  std::printf("\n");
  std::fflush(stdout);
  std::ofstream{log, std::ios::trunc};
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    if (max_file_bytes >= 0) {
      signal(SIGXFSZ, SIG_IGN);
      const rlimit limit{static_cast<rlim_t>(max_file_bytes), static_cast<rlim_t>(max_file_bytes)};
      if (setrlimit(RLIMIT_FSIZE, &limit) != 0) _exit(126);
    }
    std::vector<char*> argv{const_cast<char*>(exe)};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(exe, argv.data());
    _exit(127);
  }
  return pid;
}

// The exit status of a child (128 + signal if a signal ended it). A child still running after
// `guard_seconds` is killed and reported as -1: a hang fails the test instead of hanging ctest.
inline int wait_exit(pid_t pid, int guard_seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(guard_seconds);
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Waits until `log` holds `words`; false after `guard_seconds` (a guard that keeps a broken
// binary from hanging the test, no timing assertion).
inline bool wait_for(const std::filesystem::path& log, const std::string& words,
                     int guard_seconds = 100) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(guard_seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (read_text(log).find(words) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

}  // namespace pacts::testing
