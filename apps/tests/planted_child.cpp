// A child of the process protocol (spec/process.md) with a planted fault, for the tests of the
// process backend: the host backend served by backends' serve(), misbehaving on purpose.
//
//   pacts_planted_child --fault crash|hang|exit|garbage|wrong-id|deep|duplicate-key|nan|
//                               drop-sinks|bad-handshake|deep-handshake
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
// writes outside the output elements.
#include <pacts/backends/process.h>
#include <pacts/backends/register.h>
#include <pacts/conformance/registry.h>

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
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
  pacts::backends::ChildIdentity id{"planted-" + fault, backend->device(), "", "", ""};
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
  hooks.reply = [&](int64_t call, std::string reply) {
    if (call != on) return reply;
    if (fault == "garbage") return std::string("this is not JSON");
    if (fault == "wrong-id") return std::string("{\"id\": 999999, \"status\": \"ok\"}");
    if (fault == "deep") return with_deep_value(reply);
    if (fault == "duplicate-key") return "{\"status\": \"internal\", " + reply.substr(1);
    return reply;
  };
  return pacts::backends::serve(*backend, id, stdin, stdout, hooks);
}
