// The process backend (spec/process.md): a decode kernel served by a separate process that pacts
// starts (`--backend exec:'CMD ARGS'`), for kernels launched from Python and for plugins run in
// isolation (`exec:pacts-child --backend lib:PATH`). A child that crashes or hangs fails the case
// it was given; the next call starts it again.
//
// The serving side is here too: serve() speaks the protocol for any conformance::Backend, which is
// what pacts-child (apps/child_main.cpp) runs, and what a C++ child of one's own can call.
#pragma once

#include <pacts/conformance/backend.h>
#include <pacts/spec/status.h>

#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace pacts::backends {

// The prefix that makes a backend name a command: make_backend("exec:pacts-child --backend host").
inline constexpr const char* kProcessPrefix = "exec:";

// Starts `command` (/bin/sh -c), reads and checks its handshake. Refusals (InvalidArgument) name
// the command and, as applicable, the field, its value and what is accepted; a child that does
// not start or does not shake hands within the start timeout is refused with what happened. The
// backend's name() is kProcessPrefix + command.
spec::Result<std::unique_ptr<conformance::Backend>> start_process_backend(const std::string& command);

// A C ABI plugin run in a child (`pacts-child --backend lib:LIBRARY`, started from
// `child_program`), so that a plugin that crashes, hangs or exits fails the case it was given and
// the run goes on. Its name() stays "lib:" + the library's absolute path, so that reports and
// replay commands read as for a plugin loaded in process (a replay loads it in process).
spec::Result<std::unique_ptr<conformance::Backend>> start_isolated_plugin(
    const std::string& library, const std::string& child_program);

// pacts-child as the running program finds it: $PACTS_CHILD when set, else beside the running
// executable, else in ../tools/ of its folder (the build tree: build/conformance/ and
// build/tools/). "" when none exists.
std::string find_child_program();

// What a process backend's child declared in its handshake (nullptr for other backends).
struct ProcessInfo {
  std::string command;         // what was started
  std::string library;         // start_isolated_plugin's library (absolute), else ""
  std::string declared;        // the handshake's name
  std::string driver, runtime, kernel_version;
};
const ProcessInfo* process_info(const conformance::Backend& backend);

// ---- Timed calls (spec/process.md §6): a child timed beside pacts' kernels by pacts-bench ----

// What a child's time_prepare reported: the plan it prepared, how it times, the device error
// bits of its untimed first call.
struct ChildTimedCall {
  conformance::PlanUsed plan;
  std::string method;
  uint32_t device_error = 0;
};
// Whether `backend` is a process backend whose child declared timed calls.
bool child_timed_calls(const conformance::Backend& backend);
// The problem of `buffers` (host memory, as run() takes) prepared in the child with an L2 flush of
// `flush_bytes` before each timed call; its first, untimed call's results land in `buffers`' out
// and lse as run()'s do. A child that crashes, hangs or answers garbage gives run()'s failures.
spec::Result<ChildTimedCall> child_prepare_timed(conformance::Backend& backend,
                                                 const pacts_problem& problem,
                                                 const pacts_buffers& buffers, uint64_t flush_bytes);
// `reps` timed calls of the prepared call: each the time of the decode alone as the child
// measured it, in microseconds.
spec::Result<std::vector<double>> child_time(conformance::Backend& backend, int32_t reps);
// Releases the prepared call.
spec::Status child_end_timed(conformance::Backend& backend);

// Registers the prefix "exec:" in the conformance registry (a refusal is printed on stderr and
// makes no backend).
void register_process_backend();

// ---- The serving side ---------------------------------------------------------------------

// What a served backend says about itself in the handshake beyond its capabilities and profile.
struct ChildIdentity {
  std::string name;            // 1-64 characters of [A-Za-z0-9._-]
  std::string device;          // non-empty
  std::string driver, runtime, kernel_version;
  // Serve spec/process.md §6's timed calls, timed by the host clock around each run() (for a
  // backend that computes in host memory: pacts-child's host backend).
  bool timed_calls = false;
};

// The handshake line (spec/process.md §2, without the newline) that declares `backend`.
std::string handshake_line(const conformance::Backend& backend, const ChildIdentity& identity);

// Test hooks of a served backend (planted children: spec/process.md §4's failures on purpose).
struct ServeHooks {
  // Called with the request's id before it is served; may crash, hang or exit the process.
  std::function<void(int64_t id)> before_call;
  // The output allocation's bytes after a successful call, before they are written; may change
  // them.
  std::function<void(int64_t id, std::vector<uint8_t>& out)> after_call;
  // The output allocation's bytes after a time_prepare's untimed call (spec/process.md §6);
  // may change them.
  std::function<void(std::vector<uint8_t>& out)> after_time_prepare;
  // The reply line as it will be written; may return something else.
  std::function<std::string(int64_t id, std::string reply)> reply;
};

// Serves requests read from `in` with `backend` until `exit` or end of input, writing the
// handshake first and the replies to `out`. Returns the process exit status: 0 after `exit` or
// end of input, 2 after a request that is not one of the protocol's (named on stderr).
int serve(conformance::Backend& backend, const ChildIdentity& identity, std::FILE* in,
          std::FILE* out, const ServeHooks& hooks = {});

}  // namespace pacts::backends
