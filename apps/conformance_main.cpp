// pacts-conformance: the catalogue as gtest tests, one per property per backend
// (suite = the property's test name, test = the backend), e.g.
//   PACTS_POISON_1_UnownedRowsDoNotLeak.reference
// Options (before or after gtest's own): --backend NAME (default reference), --seed N (fixed
// default, printed), --cases N (per property), --case-dir DIR (minimal failing cases),
// --backend-lib PATH (an external backend, pacts/backend_abi.h, instead of --backend; its tests
// are named after the name the plugin declares; it runs isolated in pacts-child, spec/process.md,
// so that a plugin that crashes or hangs fails a case instead of ending the run), --in-process
// (load the plugin into this process instead: for debuggers and sanitizers).
#include <pacts/backends/plugin.h>
#include <pacts/backends/process.h>
#include <pacts/backends/register.h>
#include <pacts/conformance/command_line.h>
#include <pacts/conformance/property.h>
#include <pacts/conformance/registry.h>
#include <pacts/conformance/runner.h>

#include "cli.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>

namespace pacts::conformance {
namespace {

struct Config {
  std::string backend = "reference";
  RunOptions run;
};

Config& config() {
  static Config c;
  return c;
}

class PropertyTest : public testing::Test {
 public:
  PropertyTest(const Property* property, Backend* backend, Backend* reference)
      : property_(property), backend_(backend), reference_(reference) {}

  void TestBody() override {
    const PropertyStats s = run_property(*property_, *backend_, *reference_, config().run);
    std::printf("%s on %s: %lld cases, %lld passed, %lld NotSupported, %lld NotApplicable, worst "
                "error/bound %.3g, %.2f s (seed %llu)\n",
                property_->id.c_str(), s.backend.c_str(), static_cast<long long>(s.cases),
                static_cast<long long>(s.passed), static_cast<long long>(s.not_supported),
                static_cast<long long>(s.not_applicable),
                s.worst_ratio, s.seconds, static_cast<unsigned long long>(config().run.seed));
    // What the backend ran, per KV format and per K/V layout pair (also in the JSON record below,
    // which tools/gpu/catalogue_summary.py adds up over shards and properties).
    const auto counts = [](const std::map<std::string, int64_t>& m) {
      std::string line;
      for (const auto& [name, n] : m) line += " " + name + ":" + std::to_string(n);
      return line;
    };
    std::printf("  ran per kv format:%s\n  ran per layout:%s\n", counts(s.ran_per_kv_format).c_str(),
                counts(s.ran_per_layout).c_str());
    // The test's record in --gtest_output=json:FILE (tools/gpu/catalogue_summary.py reads it).
    RecordProperty("id", s.id);
    RecordProperty("verdict", verdict_name(s.verdict));
    RecordProperty("cases", static_cast<int>(s.cases));
    RecordProperty("passed", static_cast<int>(s.passed));
    RecordProperty("ran_per_kv_format", counts(s.ran_per_kv_format));
    RecordProperty("ran_per_layout", counts(s.ran_per_layout));
    RecordProperty("not_supported", static_cast<int>(s.not_supported));
    RecordProperty("not_applicable", static_cast<int>(s.not_applicable));
    RecordProperty("worst_ratio", std::to_string(s.worst_ratio));
    const std::string where =
        s.case_file.empty() ? std::string(" (no case directory given)")
                            : "\n  case file: " + s.case_file + "\n  replay: " + s.replay;
    const std::string minimal = s.minimal ? "\n  minimal case: " + describe(*s.minimal) : "";
    switch (s.verdict) {
      case Verdict::kFail:
      case Verdict::kCrash:
      case Verdict::kTimeout:
        ADD_FAILURE() << property_->id << " " << (s.verdict == Verdict::kFail ? "failed" : verdict_name(s.verdict))
                      << " on " << s.backend << ": " << s.failure << minimal
                      << where;
        break;
      case Verdict::kQualityWarning:
        RecordProperty("quality_warning", s.failure);
        std::printf("QualityWarning %s: %s%s%s\n", property_->id.c_str(), s.failure.c_str(),
                    minimal.c_str(), where.c_str());
        break;
      case Verdict::kNotSupported:
        GTEST_SKIP() << property_->id << ": NotSupported on " << s.backend;
      case Verdict::kNotApplicable:
        GTEST_SKIP() << property_->id << ": NotApplicable on " << s.backend << ": "
                     << s.not_applicable_reason;
      case Verdict::kPass:
        break;
    }
  }

 private:
  const Property* property_;
  Backend* backend_;
  Backend* reference_;
};

// Removes "--name value" from argv; returns the value or `fallback`.
std::string take_option(int& argc, char** argv, const std::string& name, const std::string& fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (argv[i] != name) continue;
    std::string value = argv[i + 1];
    for (int j = i; j + 2 <= argc; ++j) argv[j] = argv[j + 2];
    argc -= 2;
    return value;
  }
  return fallback;
}

}  // namespace
}  // namespace pacts::conformance

int main(int argc, char** argv) {
  using namespace pacts::conformance;
  namespace pb = pacts::backends;
  pb::register_all();
  Config& cfg = config();
  cfg.backend = take_option(argc, argv, "--backend", cfg.backend);
  const std::string library = take_option(argc, argv, "--backend-lib", "");
  // --in-process: the plugin is loaded into this process (else it runs isolated in pacts-child).
  bool in_process = false;
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--in-process") {
      in_process = true;
      for (int j = i; j + 1 <= argc; ++j) argv[j] = argv[j + 1];
      --argc;
      break;
    }
  const std::string seed_text = take_option(argc, argv, "--seed", "20261129");
  const std::string cases_text = take_option(argc, argv, "--cases", "60");
  cfg.run.case_dir = take_option(argc, argv, "--case-dir", "pacts-failures");
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--version") {
      std::printf("%s\n", pacts::apps::version_line().c_str());
      return pacts::apps::kExitPass;
    }
  testing::InitGoogleTest(&argc, argv);  // takes gtest's own --gtest_* options out of argv
  // Anything left is an option nobody takes (a misspelt --backend would otherwise run the
  // catalogue on the default backend) or a value that is not one: refused before anything runs.
  if (argc > 1) {
    std::fprintf(stderr,
                 "pacts-conformance: unknown option or argument '%s'; accepted: --backend NAME, "
                 "--backend-lib PATH [--in-process], --seed N, --cases N, --case-dir DIR, "
                 "--version, and googletest's --gtest_* options\n",
                 argv[1]);
    return pacts::apps::kExitUsage;
  }
  const pacts::spec::Result<uint64_t> seed = parse_seed_option("--seed", seed_text);
  const pacts::spec::Result<uint64_t> cases = parse_seed_option("--cases", cases_text);
  if (!seed || !cases || cases.value() < 1 || cases.value() > 1000000) {
    std::fprintf(stderr, "pacts-conformance: %s\n",
                 !seed ? seed.status().message().c_str()
                       : ("--cases '" + cases_text + "': accepted: a whole number from 1 to 1000000")
                             .c_str());
    return pacts::apps::kExitUsage;
  }
  cfg.run.seed = seed.value();
  cfg.run.cases = static_cast<int32_t>(cases.value());

  static std::unique_ptr<Backend> backend;
  static std::unique_ptr<Backend> reference = make_reference_backend();
  if (library.empty()) {
    backend = make_backend(cfg.backend);
  } else {
    const std::string child = in_process ? std::string() : pb::find_child_program();
    if (!in_process && child.empty())
      std::fprintf(stderr, "pacts-conformance: no pacts-child found: %s runs in this process\n",
                   library.c_str());
    auto plugin = child.empty() ? pb::load_plugin_backend(library)
                                : pb::start_isolated_plugin(library, child);
    if (!plugin) {
      std::fprintf(stderr, "pacts-conformance: %s\n", plugin.status().to_string().c_str());
      return 2;
    }
    backend = std::move(plugin).value();
    if (const pb::PluginInfo* info = pb::plugin_info(*backend)) cfg.backend = info->declared;
    if (const pb::ProcessInfo* info = pb::process_info(*backend)) cfg.backend = info->declared;
  }
  if (!backend) {
    std::fprintf(stderr, "pacts-conformance: unknown backend '%s'; known:", cfg.backend.c_str());
    for (const std::string& n : backend_names()) std::fprintf(stderr, " %s", n.c_str());
    std::fprintf(stderr, "\n");
    return 2;
  }
  for (const Property& p : catalogue()) {
    const Property* prop = &p;
    testing::RegisterTest(p.test_name().c_str(), cfg.backend.c_str(), nullptr, nullptr, __FILE__,
                          __LINE__, [prop]() -> testing::Test* {
                            return new PropertyTest(prop, backend.get(), reference.get());
                          });
  }
  const int rc = RUN_ALL_TESTS();
  // Device backends free their memory here, while the GPU runtime is still up (a static
  // destructor runs after it shut down, and compute-sanitizer would report leaks).
  backend.reset();
  return rc;
}
