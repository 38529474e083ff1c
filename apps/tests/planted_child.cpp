// A child of the process protocol (spec/process.md) with a planted fault, for the tests of the
// process backend: the host backend served by backends' serve(), misbehaving on purpose.
//
//   pacts_planted_child --fault crash|hang|exit|garbage|wrong-id|deep|duplicate-key|nan|
//                               drop-sinks|bad-handshake|deep-handshake|write-past-out|
//                               write-before-lse|write-k|read-past-k|read-before-q|
//                               time-nan|time-garbage
//                       [--on N] [--backend host|host+<fault>]
//
// crash: abort() at request N; hang: sleep at request N; exit: exit(0) at request N; garbage /
// wrong-id: a reply that is not JSON / answers another request at N; deep: the reply at N carries
// an extra value nested 70,000 deep; duplicate-key: the reply at N says "status" twice, an
// error first and "ok" last (a reader that kept the last key would take the call as done);
// deep-handshake: the handshake carries a value nested 70,000 deep; nan: NaN bytes in every
// output from request N on; drop-sinks: declares the host's capabilities (sinks included) but
// runs every problem without its sinks (a lie about capabilities); bad-handshake: declares a page
// size the spec does not define. --backend host+output_gap_write (conformance/fault_backend.h)
// writes outside the output elements. Accesses outside the buffers, from request N on (what
// pacts-child's guard zones must catch, backends/src/guard_zones.h): write-past-out writes 8
// bytes past the end of out; write-before-lse 4 bytes before the start of lse; write-k one byte
// of the input k; read-past-k reads 64 KiB past the end of k; read-before-q 8 KiB before q.
// Timed calls (spec/process.md §6, declared with the host backend): time-nan writes NaN bytes
// as the output of every time_prepare; time-garbage answers every time request with a negative
// time.
#include <pacts/backends/process.h>
#include <pacts/backends/register.h>
#include <pacts/conformance/registry.h>

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace {

using pacts::conformance::Backend;

// Declares what the inner backend declares; runs every problem without its sinks.
class DropSinks final : public Backend {
 public:
  explicit DropSinks(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}
  std::string name() const override { return inner_->name() + "-drop-sinks"; }
  std::string device() const override { return inner_->device(); }
  const pacts::conformance::Capabilities& capabilities() const override { return inner_->capabilities(); }
  const pacts::spec::NumericsProfile& profile() const override { return inner_->profile(); }
  pacts::conformance::RunResult run(const pacts_problem& problem, const pacts_buffers& buffers,
                                    const pacts::conformance::PlanHint& hint) override {
    pacts_problem p = problem;
    pacts_buffers b = buffers;
    p.has_sinks = 0;
    b.sinks = pacts_view{nullptr, 0};
    return inner_->run(p, b, hint);
  }

 private:
  std::unique_ptr<Backend> inner_;
};

// Runs the inner backend, then accesses memory outside the views as `fault` says (from call
// `on` on): the bug classes of a kernel whose bounds are wrong.
class OutOfBounds final : public Backend {
 public:
  OutOfBounds(std::unique_ptr<Backend> inner, std::string fault, int64_t on)
      : inner_(std::move(inner)), fault_(std::move(fault)), on_(on) {}
  std::string name() const override { return inner_->name() + "-" + fault_; }
  std::string device() const override { return inner_->device(); }
  const pacts::conformance::Capabilities& capabilities() const override { return inner_->capabilities(); }
  const pacts::spec::NumericsProfile& profile() const override { return inner_->profile(); }
  pacts::conformance::RunResult run(const pacts_problem& problem, const pacts_buffers& b,
                                    const pacts::conformance::PlanHint& hint) override {
    pacts::conformance::RunResult r = inner_->run(problem, b, hint);
    if (++calls_ < on_ || !r.status.is_ok()) return r;
    auto* out = static_cast<uint8_t*>(b.out.data);
    auto* lse = static_cast<uint8_t*>(b.lse.data);
    const auto* k = static_cast<const volatile uint8_t*>(b.k.data);
    const auto* q = static_cast<const volatile uint8_t*>(b.q.data);
    if (fault_ == "write-past-out" && out != nullptr)
      std::memset(out + b.out.bytes, 0x42, 8);
    if (fault_ == "write-before-lse" && lse != nullptr) std::memset(lse - 4, 0x42, 4);
    if (fault_ == "write-k" && k != nullptr) static_cast<uint8_t*>(b.k.data)[b.k.bytes / 2] ^= 1u;
    if (fault_ == "read-past-k" && k != nullptr) sink_ = sink_ + k[b.k.bytes + 65536];
    if (fault_ == "read-before-q" && q != nullptr) sink_ = sink_ + q[-8192];
    return r;
  }

 private:
  std::unique_ptr<Backend> inner_;
  std::string fault_;
  int64_t on_ = 1, calls_ = 0;
  volatile uint32_t sink_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  pacts::backends::register_all();
  CLI::App app{"a process-protocol child with a planted fault (tests only)"};
  std::string fault, backend_name = "host";
  int64_t on = 1;
  app.add_option("--fault", fault)->required();
  app.add_option("--on", on, "the request the fault hits (counted from 1)");
  app.add_option("--backend", backend_name);
  CLI11_PARSE(app, argc, argv);
  std::unique_ptr<Backend> backend = pacts::conformance::make_backend(backend_name);
  if (!backend) return 1;
  if (fault == "drop-sinks") backend = std::make_unique<DropSinks>(std::move(backend));
  for (const char* f : {"write-past-out", "write-before-lse", "write-k", "read-past-k", "read-before-q"})
    if (fault == f) backend = std::make_unique<OutOfBounds>(std::move(backend), fault, on);
  pacts::backends::ChildIdentity id{"planted-" + fault, backend->device(), "", "", ""};
  id.timed_calls = backend_name == "host";  // spec/process.md §6, as pacts-child's host
  // An extra member, first in the object, nested 70,000 deep (140 KB: under the 1 MiB a line
  // may take).
  const auto with_deep_value = [](const std::string& line) {
    constexpr size_t kDepth = 70000;
    return "{\"planted\": " + std::string(kDepth, '[') + std::string(kDepth, ']') + ", " + line.substr(1);
  };
  if (fault == "deep-handshake") {
    const std::string line = with_deep_value(pacts::backends::handshake_line(*backend, id));
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::seconds(5));
    return 0;
  }
  if (fault == "bad-handshake") {
    std::string line = pacts::backends::handshake_line(*backend, id);
    const std::string key = "\"max_page_size\":256";
    line.replace(line.find(key), key.size(), "\"max_page_size\":48");
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::seconds(5));
    return 0;
  }
  pacts::backends::ServeHooks hooks;
  hooks.before_call = [&](int64_t call) {
    if (call != on) return;
    if (fault == "crash") std::abort();
    if (fault == "exit") std::exit(0);
    if (fault == "hang") std::this_thread::sleep_for(std::chrono::hours(1));
  };
  hooks.after_call = [&](int64_t call, std::vector<uint8_t>& out) {
    if (fault == "nan" && call >= on) std::fill(out.begin(), out.end(), uint8_t{0xFF});
  };
  hooks.after_time_prepare = [&](std::vector<uint8_t>& out) {
    if (fault == "time-nan") std::fill(out.begin(), out.end(), uint8_t{0xFF});
  };
  hooks.reply = [&](int64_t call, std::string reply) {
    const size_t times = reply.find("\"times_us\":[");
    if (fault == "time-garbage" && times != std::string::npos)
      return reply.substr(0, times) + "\"times_us\":[-1.0]}";
    if (call != on) return reply;
    if (fault == "garbage") return std::string("this is not JSON");
    if (fault == "wrong-id") return std::string("{\"id\": 999999, \"status\": \"ok\"}");
    if (fault == "deep") return with_deep_value(reply);
    if (fault == "duplicate-key") return "{\"status\": \"internal\", " + reply.substr(1);
    return reply;
  };
  return pacts::backends::serve(*backend, id, stdin, stdout, hooks);
}
