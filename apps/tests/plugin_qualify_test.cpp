// External backends (pacts/backend_abi.h), the mustpass set and the pacts-qualify report.
// The example plugin (kernels/plugins/host_plugin.cpp) must compute exactly what the
// host backend computes once its problems and buffers have crossed the C ABI; the loader must
// refuse broken plugins with messages that name the library, symbol, field and value; a plugin
// that computes wrongly must make pacts-qualify exit non-zero, naming the property and the case
// files; and the report must parse.
#include <pacts/backends/host.h>
#include <pacts/backends/plugin.h>
#include <pacts/backends/register.h>
#include <pacts/conformance/case_data.h>
#include <pacts/conformance/fault_backend.h>
#include <pacts/conformance/mustpass.h>
#include <pacts/conformance/property.h>
#include <pacts/conformance/provenance.h>
#include <pacts/conformance/registry.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sys/wait.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#if !defined(PACTS_QUALIFY_EXE) || !defined(PACTS_MUSTPASS_DIR) || !defined(PACTS_TEST_OUT) || \
    !defined(PACTS_PLUGIN_GOOD) || !defined(PACTS_PLUGIN_DROP_SINKS) ||                       \
    !defined(PACTS_PLUGIN_ABI99) || !defined(PACTS_PLUGIN_NO_ENTRY) ||                        \
    !defined(PACTS_PLUGIN_BAD_PAGE) || !defined(PACTS_PLUGIN_V1) ||                          \
    !defined(PACTS_PLUGIN_V2) || !defined(PACTS_PLUGIN_TIMED_NO_RELEASE) ||                   \
    !defined(PACTS_PLUGIN_CRASH)
#error "the build defines the paths of pacts-qualify, the mustpass set and the test plugins"
#endif

namespace pacts::conformance {
namespace {

namespace fs = std::filesystem;
using backends::kPluginPrefix;
using backends::load_plugin_backend;
using backends::make_host_backend;
using backends::plugin_info;
using backends::plugin_timed_calls;
using backends::PluginInfo;
using backends::prepare_timed_call;
using nlohmann::json;

// make_backend() knows the names the backends register: the test registers them as a program's
// main() does.
[[maybe_unused]] const bool registered = [] {
  backends::register_all();
  return true;
}();

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A fresh directory of this test's own under the build tree.
fs::path scratch(const std::string& name) {
  const fs::path dir = fs::path(PACTS_TEST_OUT) / "plugin_qualify_test" / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

struct Exit {
  int code = -1;
  std::string output;
};

// Runs pacts-qualify with `args`, stdout and stderr into DIR/log.txt.
Exit run_qualify(const std::string& args, const fs::path& dir) {
  const fs::path log = dir / "log.txt";
  const std::string command = std::string(PACTS_QUALIFY_EXE) + " " + args + " > " + log.string() + " 2>&1";
  const int status = std::system(command.c_str());
  Exit e;
  e.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  e.output = read_text(log);
  std::printf("$ %s\n  exit %d\n", command.c_str(), e.code);
  return e;
}

// ---- the loader ---------------------------------------------------------------------------

std::unique_ptr<Backend> load_or_fail(const std::string& path) {
  auto loaded = load_plugin_backend(path);
  EXPECT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  return loaded.is_ok() ? std::move(loaded).value() : nullptr;
}

TEST(PluginLoader, DeclaresWhatTheHostBackendDeclares) {
  auto plugin = load_or_fail(PACTS_PLUGIN_GOOD);
  ASSERT_NE(plugin, nullptr);
  const PluginInfo* info = plugin_info(*plugin);
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->declared, "host-plugin");
  EXPECT_EQ(info->abi_version, 3u);
  EXPECT_EQ(plugin->name(), std::string(kPluginPrefix) + info->path);
  EXPECT_EQ(plugin_info(*make_host_backend()), nullptr);

  const auto host = make_host_backend();
  const Capabilities& a = plugin->capabilities();
  const Capabilities& b = host->capabilities();
  EXPECT_EQ(a.q_formats, b.q_formats);
  EXPECT_EQ(a.kv_formats, b.kv_formats);
  EXPECT_EQ(a.out_formats, b.out_formats);
  EXPECT_EQ(a.scale_modes, b.scale_modes);
  EXPECT_EQ(a.head_dims, b.head_dims);
  EXPECT_EQ(a.min_page_size, b.min_page_size);
  EXPECT_EQ(a.max_page_size, b.max_page_size);
  EXPECT_EQ(a.max_q_len, b.max_q_len);
  EXPECT_EQ(a.max_group, b.max_group);
  EXPECT_EQ(a.chunked_layouts, b.chunked_layouts);
  EXPECT_EQ(a.sinks, b.sinks);
  EXPECT_EQ(a.window, b.window);
  EXPECT_EQ(a.softcap, b.softcap);
  EXPECT_EQ(a.lse, b.lse);
  EXPECT_EQ(a.deterministic, b.deterministic);
  EXPECT_EQ(a.split_plans, b.split_plans);
  EXPECT_EQ(a.batch_invariant, b.batch_invariant);  // version 2's extension
  EXPECT_EQ(a.plan_replay, b.plan_replay);
  EXPECT_EQ(a.large_buffers, b.large_buffers);
  EXPECT_EQ(a.requirements.vector_alignment_bytes, b.requirements.vector_alignment_bytes);
  EXPECT_EQ(a.requirements.max_element_offset, b.requirements.max_element_offset);
  const spec::NumericsProfile& p = plugin->profile();
  const spec::NumericsProfile& q = host->profile();
  EXPECT_EQ(p.name, "host-plugin");
  EXPECT_EQ(p.u_logit, q.u_logit);
  EXPECT_EQ(p.u_q, q.u_q);
  EXPECT_EQ(p.u_p, q.u_p);
  EXPECT_EQ(p.eta_p, q.eta_p);
  EXPECT_EQ(p.p_rounded_in_denominator, q.p_rounded_in_denominator);
  EXPECT_EQ(p.u_acc, q.u_acc);
  EXPECT_EQ(p.u_partial, q.u_partial);
  EXPECT_EQ(p.eps_exp, q.eps_exp);
  EXPECT_EQ(p.eps_tanh, q.eps_tanh);
  EXPECT_EQ(p.eps_log, q.eps_log);
  EXPECT_EQ(p.ftz, q.ftz);
  EXPECT_EQ(p.q_requant.kind, q.q_requant.kind);
  EXPECT_EQ(p.q_requant.kv_formats, q.q_requant.kv_formats);
}

// A version 1 plugin (built before the version 2 extension) still loads: the same capabilities
// and numerics but the extension's, which it cannot declare (no batch-invariant plan, no query
// requantisation), and the catalogue passes on it (ctest pacts_conformance_host_plugin_v1).
TEST(PluginLoader, VersionOnePluginsStillLoad) {
  auto plugin = load_or_fail(PACTS_PLUGIN_V1);
  ASSERT_NE(plugin, nullptr);
  const PluginInfo* info = plugin_info(*plugin);
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->declared, "host-plugin-v1");
  EXPECT_EQ(info->abi_version, 1u);
  EXPECT_FALSE(plugin->capabilities().batch_invariant);
  EXPECT_EQ(plugin->profile().q_requant.kind, spec::QueryRequant::kNone);
  const auto v2 = load_or_fail(PACTS_PLUGIN_GOOD);
  ASSERT_NE(v2, nullptr);
  EXPECT_TRUE(v2->capabilities().batch_invariant);
  EXPECT_EQ(plugin->capabilities().kv_formats, v2->capabilities().kv_formats);
  EXPECT_EQ(plugin->profile().u_acc, v2->profile().u_acc);
}

// A version 2 plugin (built before the timed calls) still loads, with its extension, and has no
// timed calls; the version 3 example has them, in host memory.
TEST(PluginLoader, VersionTwoPluginsStillLoad) {
  auto plugin = load_or_fail(PACTS_PLUGIN_V2);
  ASSERT_NE(plugin, nullptr);
  const PluginInfo* info = plugin_info(*plugin);
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->declared, "host-plugin-v2");
  EXPECT_EQ(info->abi_version, 2u);
  EXPECT_TRUE(plugin->capabilities().batch_invariant);
  EXPECT_FALSE(plugin_timed_calls(*plugin).has_value());
  pacts_problem p{};
  pacts_buffers b{};
  const auto refused = prepare_timed_call(*plugin, p, b, nullptr, nullptr);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().code(), spec::Code::kNotSupported);
  EXPECT_NE(refused.status().message().find("no timed calls"), std::string::npos);
  const auto v3 = load_or_fail(PACTS_PLUGIN_GOOD);
  ASSERT_NE(v3, nullptr);
  const auto timed = plugin_timed_calls(*v3);
  ASSERT_TRUE(timed.has_value());
  EXPECT_FALSE(timed->device_memory);
  EXPECT_FALSE(timed->graph_capturable);
  EXPECT_FALSE(plugin_timed_calls(*make_host_backend()).has_value());
}

// The timed calls compute what run() computes: a mustpass case prepared once and enqueued
// twice gives run()'s output bytes each time (the workspace poisoned in between by a run on
// another problem would be the plugin's business: here the prepared call is released by it).
TEST(PluginLoader, TimedCallsComputeWhatRunComputes) {
  auto plugin = load_or_fail(PACTS_PLUGIN_GOOD);
  ASSERT_NE(plugin, nullptr);
  auto m = load_mustpass(PACTS_MUSTPASS_DIR);
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  int compared = 0;
  for (const MustpassEntry& e : m.value().entries) {
    const CaseData c = e.file.spec.build();
    if (c.problem.batch == 0) continue;
    // run() first: the reference bytes of the same plugin.
    CaseData ran = c;
    std::fill(ran.out.begin(), ran.out.end(), uint8_t{0xA5});  // the gaps of out and lse too
    std::fill(ran.lse.begin(), ran.lse.end(), uint8_t{0xA5});
    pacts_buffers rb = ran.buffers();
    const RunResult r = plugin->run(ran.problem, rb, PlanHint::automatic());
    if (!r.status || r.device_error != 0) continue;  // refusals and invalid tables: not timed
    CaseData timed = c;
    pacts_buffers tb = timed.buffers();
    auto call = prepare_timed_call(*plugin, timed.problem, tb,
                                   static_cast<const int32_t*>(tb.block_table.data),
                                   static_cast<const int32_t*>(tb.context_lens.data));
    ASSERT_TRUE(call.is_ok()) << e.path << ": " << call.status().to_string();
    EXPECT_EQ(call.value().plan().variant, r.plan.variant);
    for (int round = 0; round < 2; ++round) {
      std::fill(timed.out.begin(), timed.out.end(), uint8_t{0xA5});
      std::fill(timed.lse.begin(), timed.lse.end(), uint8_t{0xA5});
      ASSERT_TRUE(call.value().enqueue(nullptr).is_ok());
      EXPECT_EQ(call.value().device_error(), 0u);
      EXPECT_EQ(timed.out, ran.out) << e.path << " round " << round;
      EXPECT_EQ(timed.lse, ran.lse) << e.path << " round " << round;
    }
    // Anything else run on the instance releases the prepared call first (backend_abi.h).
    CaseData again = c;
    pacts_buffers ab = again.buffers();
    ASSERT_TRUE(plugin->run(again.problem, ab, PlanHint::automatic()).status.is_ok());
    const spec::Status stale = call.value().enqueue(nullptr);
    EXPECT_FALSE(stale.is_ok());
    EXPECT_NE(stale.message().find("after its release"), std::string::npos);
    int dummy = 0;
    EXPECT_FALSE(call.value().enqueue(&dummy).is_ok());
    ++compared;
  }
  EXPECT_GE(compared, 10);
}

// The same kernels under the same plan: every output and LSE byte must be identical once the
// problem, buffers, hint and result have crossed the ABI (bitwise, spec/operator.md §11). Every
// mustpass case, with a split-plan hint too, and a replay with new context lengths.
// backend_abi.h: a refusal writes nothing. A replay with more lengths than the batch is refused
// before the plugin decodes anything, so out and lse keep their guard bytes.
TEST(PluginLoader, ARefusedReplayWritesNothing) {
  auto plugin = load_or_fail(PACTS_PLUGIN_GOOD);
  ASSERT_NE(plugin, nullptr);
  auto mustpass = load_mustpass(PACTS_MUSTPASS_DIR);
  ASSERT_TRUE(mustpass.is_ok()) << mustpass.status().to_string();
  int tried = 0;
  for (const MustpassEntry& e : mustpass.value().entries) {
    CaseData c = e.file.spec.build();
    if (c.problem.batch == 0) continue;
    std::fill(c.out.begin(), c.out.end(), uint8_t{0xA5});
    std::fill(c.lse.begin(), c.lse.end(), uint8_t{0xA5});
    const std::vector<uint8_t> out = c.out, lse = c.lse;
    const std::vector<int32_t> lens = c.context_lens;
    std::vector<int32_t> replay(c.context_lens.size() + 1, 1);
    const RunResult r = plugin->run_replayed(c.problem, c.buffers(), replay, PlanHint::automatic());
    SCOPED_TRACE(e.path);
    EXPECT_EQ(r.status.code(), spec::Code::kInvalidArgument) << r.status.to_string();
    EXPECT_NE(r.status.message().find("replayed_context_lens"), std::string::npos);
    EXPECT_EQ(c.out, out);
    EXPECT_EQ(c.lse, lse);
    EXPECT_EQ(c.context_lens, lens);
    ++tried;
  }
  EXPECT_GT(tried, 10);
}

TEST(PluginLoader, RoundTripIsBitwiseTheHostBackend) {
  auto plugin = load_or_fail(PACTS_PLUGIN_GOOD);
  ASSERT_NE(plugin, nullptr);
  const auto host = make_host_backend();
  auto mustpass = load_mustpass(PACTS_MUSTPASS_DIR);
  ASSERT_TRUE(mustpass.is_ok()) << mustpass.status().to_string();
  int compared = 0;
  for (const MustpassEntry& e : mustpass.value().entries)
    for (const PlanHint& hint : {PlanHint::automatic(), PlanHint::partitions(3)}) {
      CaseData mine = e.file.spec.build(), theirs = e.file.spec.build();
      const RunResult a = plugin->run(mine.problem, mine.buffers(), hint);
      const RunResult b = host->run(theirs.problem, theirs.buffers(), hint);
      SCOPED_TRACE(e.path);
      ASSERT_EQ(a.status.code(), b.status.code()) << a.status.to_string() << " vs " << b.status.to_string();
      EXPECT_EQ(a.status.message(), b.status.message());
      EXPECT_EQ(a.device_error, b.device_error);
      EXPECT_EQ(a.plan.variant, b.plan.variant);
      EXPECT_EQ(a.plan.partition_size, b.plan.partition_size);
      EXPECT_EQ(a.plan.max_partitions, b.plan.max_partitions);
      EXPECT_EQ(mine.out, theirs.out);
      EXPECT_EQ(mine.lse, theirs.lse);
      ++compared;

      std::vector<int32_t> replay(mine.context_lens.size());
      for (size_t i = 0; i < replay.size(); ++i) replay[i] = theirs.context_lens[i] / 2;
      CaseData again = e.file.spec.build(), host_again = e.file.spec.build();
      const RunResult c = plugin->run_replayed(again.problem, again.buffers(), replay, hint);
      const RunResult d = host->run_replayed(host_again.problem, host_again.buffers(), replay, hint);
      ASSERT_EQ(c.status.code(), d.status.code()) << c.status.to_string();
      EXPECT_EQ(again.context_lens, replay);
      EXPECT_EQ(again.out, host_again.out);
      EXPECT_EQ(again.lse, host_again.lse);
    }
  EXPECT_EQ(compared, 2 * static_cast<int>(mustpass.value().entries.size()));
}

struct Refusal {
  std::string label, path;
  std::vector<std::string> message_contains;
};

class PluginRefusal : public ::testing::TestWithParam<Refusal> {};

TEST_P(PluginRefusal, IsTypedAndNamesWhatIsWrong) {
  const Refusal& r = GetParam();
  auto loaded = load_plugin_backend(r.path);
  ASSERT_FALSE(loaded.is_ok()) << r.path << " was accepted";
  EXPECT_EQ(loaded.status().code(), spec::Code::kInvalidArgument) << loaded.status().to_string();
  const std::string m = loaded.status().message();
  EXPECT_NE(m.find(fs::path(r.path).filename().string()), std::string::npos) << m;
  for (const std::string& part : r.message_contains)
    EXPECT_NE(m.find(part), std::string::npos) << "'" << part << "' not in: " << m;
  // make_backend's "lib:PATH" takes the same road and refuses too.
  EXPECT_EQ(make_backend(std::string(kPluginPrefix) + r.path), nullptr);
}

std::string text_file() {
  const fs::path path = scratch("not_a_library") / "libtext.so";
  std::ofstream(path) << "not an ELF file\n";
  return path.string();
}

INSTANTIATE_TEST_SUITE_P(
    Loader, PluginRefusal,
    ::testing::Values(
        Refusal{"Missing", std::string(PACTS_TEST_OUT) + "/libpacts_no_such_plugin.so",
                {"no such file"}},
        Refusal{"NotALibrary", text_file(), {"not a loadable library"}},
        Refusal{"NoEntry", PACTS_PLUGIN_NO_ENTRY, {"symbol pacts_backend_entry not found"}},
        Refusal{"AbiVersion99", PACTS_PLUGIN_ABI99,
                {"abi_version 99", "implements backend ABI versions 1, 2 and 3"}},
        Refusal{"TimedCallsWithoutRelease", PACTS_PLUGIN_TIMED_NO_RELEASE,
                {"release is NULL with timed_calls = 1",
                 "the four timed calls set exactly when timed_calls is 1"}},
        Refusal{"PageSize48", PACTS_PLUGIN_BAD_PAGE,
                {"capabilities.max_page_size = 48", "a power of two from 8 to 256"}}),
    [](const ::testing::TestParamInfo<Refusal>& p) { return p.param.label; });

TEST(PluginLoader, LibNamesComposeWithFaults) {
  const std::string name = std::string(kPluginPrefix) + fs::path(PACTS_PLUGIN_GOOD).string();
  auto plugin = make_backend(name);
  ASSERT_NE(plugin, nullptr);
  EXPECT_EQ(plugin->name(), name);
  auto faulty = make_backend(name + "+lse_base2");
  ASSERT_NE(faulty, nullptr);
  EXPECT_EQ(faulty->name(), name + "+lse_base2");
}

// ---- the mustpass set ---------------------------------------------------------------------

// Every family of the catalogue judges mustpass cases. (A property added after a mustpass version
// was frozen joins the next version, spec/case_files.md §3.5; the report shows its 0 mustpass
// cases meanwhile.)
TEST(Mustpass, CoversEveryPropertyFamily) {
  auto m = load_mustpass(PACTS_MUSTPASS_DIR);
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  EXPECT_EQ(m.value().version, kMustpassVersion);
  EXPECT_GE(m.value().entries.size(), 25u);
  const auto family = [](const std::string& id) { return id.substr(0, id.rfind('-')); };
  std::set<std::string> judged;
  for (const MustpassEntry& e : m.value().entries)
    for (const std::string& id : e.properties) judged.insert(family(id));
  for (const Property& p : catalogue())
    EXPECT_TRUE(judged.count(family(p.id))) << family(p.id) << " judges no mustpass case";
}

// Every listed (case, property) pair passes on the host backend and on the reference; none is
// merely NotSupported on both.
TEST(Mustpass, AllPassOnTheHostBackendAndTheReference) {
  auto m = load_mustpass(PACTS_MUSTPASS_DIR);
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  auto host = make_host_backend();
  auto reference = make_reference_backend();
  int ran = 0;
  for (const MustpassEntry& e : m.value().entries)
    for (const std::string& id : e.properties) {
      const Property* p = find_property(id);
      ASSERT_NE(p, nullptr);
      for (Backend* b : {host.get(), reference.get()}) {
        const Outcome o = check_mustpass(e, *p, *b, *reference);
        EXPECT_TRUE(o.verdict == Verdict::kPass || o.verdict == Verdict::kNotSupported ||
                    o.verdict == Verdict::kNotApplicable)
            << e.path << " " << id << " on " << b->name() << ": " << verdict_name(o.verdict)
            << ": " << o.detail << "\n  replay: pacts case run " << e.path << " --backend " << b->name();
        ran += o.verdict == Verdict::kPass;
      }
    }
  EXPECT_GT(ran, 0);
}

// A mustpass case that names a fault exists to catch it: with that fault planted in the host
// backend, the case's own property fails.
TEST(Mustpass, EachCaseCatchesTheFaultItNames) {
  auto m = load_mustpass(PACTS_MUSTPASS_DIR);
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  auto reference = make_reference_backend();
  int with_fault = 0;
  for (const MustpassEntry& e : m.value().entries) {
    if (e.fault.empty()) continue;
    ++with_fault;
    auto faulty = make_fault_backend(make_host_backend(), *fault_from_name(e.fault));
    const std::string id = e.file.property.empty() ? "PACTS-ACC-1" : e.file.property;
    const Outcome o = check_mustpass(e, *find_property(id), *faulty, *reference);
    EXPECT_EQ(o.verdict, Verdict::kFail) << e.path << " does not catch " << e.fault << " with " << id;
  }
  EXPECT_GE(with_fault, 16);
}

TEST(Mustpass, RefusesAManifestThatDoesNotMatchItsFolder) {
  const fs::path dir = scratch("bad_manifest");
  fs::copy_file(fs::path(PACTS_MUSTPASS_DIR) / "empty_rows.json", dir / "empty_rows.json");
  const auto write = [&](const json& cases) {
    std::ofstream(dir / "manifest.json")
        << json{{"mustpass_version", 1}, {"spec_version", "pacts-spec-1"}, {"cases", cases}}.dump();
  };
  const json good = {{"file", "empty_rows.json"}, {"properties", {"PACTS-EDGE-1"}},
                     {"fault", ""}, {"guards", "empty rows"}};
  write(json::array({good}));
  EXPECT_TRUE(load_mustpass(dir.string()).is_ok());

  json unknown = good;
  unknown["properties"] = {"PACTS-EDGE-1", "PACTS-EDGE-99"};
  write(json::array({unknown}));
  auto r = load_mustpass(dir.string());
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("PACTS-EDGE-99 is not in this build's catalogue"), std::string::npos)
      << r.status().message();

  json not_own = good;
  not_own["properties"] = {"PACTS-ACC-1"};  // the file names PACTS-EDGE-1
  write(json::array({not_own}));
  r = load_mustpass(dir.string());
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("names PACTS-EDGE-1"), std::string::npos) << r.status().message();

  write(json::array({good}));
  fs::copy_file(fs::path(PACTS_MUSTPASS_DIR) / "causal_l4.json", dir / "causal_l4.json");
  r = load_mustpass(dir.string());
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("causal_l4.json is in"), std::string::npos) << r.status().message();
}

// ---- pacts-qualify and its report -----------------------------------------------------------

// XML well-formedness as far as the JUnit report uses XML: one declaration, properly nested
// elements, quoted attributes, and only the five predefined entities. Returns "" or the fault.
std::string xml_fault(const std::string& x) {
  const std::string decl = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>";
  if (x.rfind(decl, 0) != 0) return "no XML declaration";
  std::vector<std::string> open;
  int roots = 0;
  size_t i = decl.size();
  const auto entity_ok = [&](size_t at) {
    for (const char* e : {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"})
      if (x.compare(at, std::char_traits<char>::length(e), e) == 0) return true;
    return false;
  };
  for (size_t at = x.find('&'); at != std::string::npos; at = x.find('&', at + 1))
    if (!entity_ok(at)) return "bad entity at " + std::to_string(at);
  while (i < x.size()) {
    if (x[i] != '<') {
      if (open.empty() && !std::isspace(static_cast<unsigned char>(x[i])))
        return "text outside the root at " + std::to_string(i);
      ++i;
      continue;
    }
    const size_t end = x.find('>', i);
    if (end == std::string::npos) return "unterminated tag at " + std::to_string(i);
    std::string tag = x.substr(i + 1, end - i - 1);
    i = end + 1;
    if (!tag.empty() && tag[0] == '/') {
      if (open.empty() || open.back() != tag.substr(1)) return "mismatched </" + tag.substr(1) + ">";
      open.pop_back();
      continue;
    }
    const bool empty = !tag.empty() && tag.back() == '/';
    if (empty) tag.pop_back();
    const std::string name = tag.substr(0, tag.find_first_of(" \t\n"));
    if (name.empty()) return "empty tag name";
    // Attributes: name="value" pairs, values without '<' (the '>' search above stops at the
    // first '>', so an escaped value keeps the tag intact).
    size_t quotes = 0;
    for (char ch : tag) quotes += ch == '"';
    if (quotes % 2 != 0) return "unbalanced quotes in <" + name + ">";
    if (open.empty()) ++roots;
    if (!empty) open.push_back(name);
  }
  if (!open.empty()) return "unclosed <" + open.back() + ">";
  if (roots != 1) return std::to_string(roots) + " root elements";
  return "";
}

TEST(QualifyReport, XmlCheckerBites) {
  EXPECT_EQ(xml_fault("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<a x=\"1\"><b/>t &amp; u</a>\n"), "");
  EXPECT_NE(xml_fault("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<a><b></a></b>\n"), "");
  EXPECT_NE(xml_fault("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<a>x & y</a>\n"), "");
  EXPECT_NE(xml_fault("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<a x=\"1></a>\n"), "");
}

int64_t mustpass_pairs() {
  auto m = load_mustpass(PACTS_MUSTPASS_DIR);
  int64_t n = 0;
  for (const MustpassEntry& e : m.value().entries) n += static_cast<int64_t>(e.properties.size());
  return n;
}

// The host backend and the example plugin qualify; the report's three files exist and parse, and
// every mustpass (case, property) pair ran on both.
TEST(QualifyReport, PassingRunWritesAParsableReport) {
  const fs::path dir = scratch("passing");
  const Exit e = run_qualify("--backend host --backend-lib " + std::string(PACTS_PLUGIN_GOOD) +
                                 " --cases 3 --seed 20261129 --out " + (dir / "report").string() +
                                 " --json " + (dir / "copy.json").string(),
                             dir);
  ASSERT_EQ(e.code, 0) << e.output;
  EXPECT_NE(e.output.find("seed 20261129"), std::string::npos);

  const json j = json::parse(read_text(dir / "report" / "report.json"));
  EXPECT_EQ(j, json::parse(read_text(dir / "copy.json")));
  // No Mandatory failure, but 3 cases per property is not a qualification run: not "qualified",
  // and the report says why; the provenance names this program and the plugin with their hashes.
  EXPECT_EQ(j["mandatory_failure"], false);
  EXPECT_EQ(j["qualified"], false);
  EXPECT_EQ(j["qualification_run"], false);
  // (A build from a tree with uncommitted changes adds a reason of its own.)
  ASSERT_GE(j["not_a_qualification_run"].size(), 1u) << j["not_a_qualification_run"].dump();
  EXPECT_EQ(j["not_a_qualification_run"][0], "3 generated cases per property, fewer than 40");
  EXPECT_EQ(j["command_line"][1], "--backend");
  bool plugin_hashed = false;
  for (const json& f : j["provenance"]["files"]) {
    EXPECT_EQ(f["sha256"].get<std::string>().size(), 64u) << f.dump();
    plugin_hashed |= f["path"] == std::filesystem::absolute(PACTS_PLUGIN_GOOD).string() &&
                     f["sha256"] == sha256_file(PACTS_PLUGIN_GOOD).value_or("");
  }
  EXPECT_TRUE(plugin_hashed) << j["provenance"].dump();
  EXPECT_EQ(j["provenance"]["mustpass_sha256"].get<std::string>().size(), 64u);
  EXPECT_GT(j["provenance"]["machine"]["memory_bytes"].get<int64_t>(), 0);
  EXPECT_FALSE(j["suite_version"].get<std::string>().empty());
  EXPECT_FALSE(j["compiler"].get<std::string>().empty());
  EXPECT_EQ(j["seed"], "20261129");
  EXPECT_EQ(j["mustpass"]["version"], kMustpassVersion);
  // What this build compile-checked for AMD, and nothing else (none without -DPACTS_CHECK_AMD=ON).
  const std::string amd = PACTS_AMD_CHECKED_ARCHS;
  const json checked = amd.empty() ? json::array() : json({"AMD gfx942", "AMD gfx950"});
  ASSERT_TRUE(amd.empty() || amd == "gfx942,gfx950") << amd;
  EXPECT_EQ(j["compile_checked_only"], checked);
  ASSERT_EQ(j["backends"].size(), 2u);
  EXPECT_EQ(j["backends"][0]["name"], "host");
  EXPECT_EQ(j["backends"][1]["plugin"]["name"], "host-plugin");
  for (const json& b : j["backends"]) {
    EXPECT_TRUE(b["capabilities"]["kv_formats"].is_array());
    EXPECT_GT(b["numerics_profile"]["u_acc"].get<double>(), 0.0);
    ASSERT_EQ(b["results"].size(), catalogue().size());
    int64_t mustpass_cases = 0;
    for (const json& r : b["results"]) {
      EXPECT_NE(r["verdict"], "Fail") << r.dump();
      EXPECT_EQ(r["mustpass"]["fail"], 0) << r.dump();
      for (const char* k : {"pass", "fail", "not_supported", "quality_warning", "not_applicable"})
        mustpass_cases += r["mustpass"][k].get<int64_t>();
      EXPECT_GT(r["generated"]["pass"].get<int64_t>() + r["generated"]["not_supported"].get<int64_t>() +
                    r["generated"]["not_applicable"].get<int64_t>(),
                0);
    }
    EXPECT_EQ(mustpass_cases, mustpass_pairs()) << b["name"];
  }

  const std::string junit = read_text(dir / "report" / "report.junit.xml");
  EXPECT_EQ(xml_fault(junit), "");
  size_t testcases = 0;
  for (size_t at = junit.find("<testcase "); at != std::string::npos; at = junit.find("<testcase ", at + 1))
    ++testcases;
  EXPECT_EQ(testcases, 2 * catalogue().size() + j["self_checks"].size());
  EXPECT_EQ(junit.find("<failure"), std::string::npos);

  const std::string md = read_text(dir / "report" / "report.md");
  EXPECT_NE(md.find("no Mandatory failure, but not a qualification run:** 3 generated cases per "
                    "property, fewer than 40"),
            std::string::npos)
      << md.substr(0, 400);
  EXPECT_EQ(md.find("compile-checked only: no kernel ran") != std::string::npos, !amd.empty());
  EXPECT_NE(md.find("| PACTS-POISON-1 | UnownedRowsDoNotLeak | Mandatory | Pass |"), std::string::npos);
}

// A plugin that ignores the sinks computes wrongly: qualify exits 1 and names PACTS-ACC-1 and
// the case files that show it (mustpass files with sinks, and the shrunk generated case).
TEST(QualifyReport, FailingPluginExitsNonZeroNamingPropertyAndCaseFiles) {
  const fs::path dir = scratch("failing");
  const Exit e = run_qualify("--backend host --backend-lib " + std::string(PACTS_PLUGIN_DROP_SINKS) +
                                 " --property PACTS-ACC-1 --cases 20 --seed 20261129 --out " +
                                 (dir / "report").string(),
                             dir);
  ASSERT_EQ(e.code, 1) << e.output;
  EXPECT_NE(e.output.find("NOT QUALIFIED"), std::string::npos) << e.output;
  const std::string sinks_case = std::string(PACTS_MUSTPASS_DIR) + "/fp8_per_token_window_sinks.json";
  EXPECT_NE(e.output.find("case file: " + sinks_case), std::string::npos) << e.output;
  EXPECT_NE(e.output.find("replay: pacts case run " + sinks_case + " --backend lib:"), std::string::npos)
      << e.output;

  const json j = json::parse(read_text(dir / "report" / "report.json"));
  EXPECT_EQ(j["qualified"], false);
  ASSERT_EQ(j["backends"].size(), 2u);
  EXPECT_EQ(j["backends"][0]["results"][0]["verdict"], "Pass");  // the host backend is fine
  const json& r = j["backends"][1]["results"][0];
  EXPECT_EQ(r["id"], "PACTS-ACC-1");
  EXPECT_EQ(r["verdict"], "Fail");
  EXPECT_GT(r["worst_error_bound_ratio"].get<double>(), 1.0);
  const auto files = r["failing_case_files"].get<std::vector<std::string>>();
  EXPECT_NE(std::find(files.begin(), files.end(),
                      std::string(PACTS_MUSTPASS_DIR) + "/fp8_per_token_window_sinks.json"),
            files.end()) << r.dump(2);
  EXPECT_TRUE(fs::exists(files.back())) << files.back();  // the shrunk case, saved
  EXPECT_NE(r["replay"].get<std::string>().find("--backend lib:"), std::string::npos);

  const std::string junit = read_text(dir / "report" / "report.junit.xml");
  EXPECT_EQ(xml_fault(junit), "");
  EXPECT_NE(junit.find("<failure message="), std::string::npos);
  EXPECT_NE(read_text(dir / "report" / "report.md").find("**PACTS-ACC-1** Fail"), std::string::npos);
}

// A plugin that aborts at its 5th run, isolated in pacts-child (the default): the case of that
// run fails naming the crash, the child is started again (and this time computes) and the run
// goes on to the next property, which passes, and writes its report; the report says where the
// plugin ran.
TEST(QualifyReport, ACrashingPluginFailsACaseAndTheReportIsWritten) {
  const fs::path dir = scratch("crashing");
  const fs::path mark = dir / "crashed-once";
  fs::remove(mark);
  setenv("PACTS_PLUGIN_CRASH_MARK", mark.c_str(), 1);  // the first child crashes, not its restart
  const Exit e = run_qualify("--backend none --backend-lib " + std::string(PACTS_PLUGIN_CRASH) +
                                 " --property PACTS-ACC-1 --property PACTS-META-2 --cases 10"
                                 " --bench-sets none --seed 20261129 --out " +
                                 (dir / "report").string(),
                             dir);
  unsetenv("PACTS_PLUGIN_CRASH_MARK");
  ASSERT_EQ(e.code, 1) << e.output;
  EXPECT_TRUE(fs::exists(mark));
  const json j = json::parse(read_text(dir / "report" / "report.json"));
  ASSERT_EQ(j["backends"].size(), 1u);
  const json& b = j["backends"][0];
  EXPECT_NE(b["plugin"]["ran"].get<std::string>().find("isolated in a child process"),
            std::string::npos) << b.dump(2);
  ASSERT_EQ(b["results"].size(), 2u);
  EXPECT_EQ(b["results"][0]["verdict"], "Crash");
  EXPECT_NE(b["results"][0].dump().find("crashed"), std::string::npos) << b["results"][0].dump(2);
  EXPECT_NE(read_text(dir / "report" / "report.md").find("**Crash**"), std::string::npos);
  EXPECT_NE(read_text(dir / "report" / "report.junit.xml").find("type=\"Crash\""), std::string::npos);
  EXPECT_EQ(b["results"][1]["id"], "PACTS-META-2");
  EXPECT_EQ(b["results"][1]["verdict"], "Pass") << b["results"][1].dump(2);
}

// Plugins that hang, are slow (3 s a call against a 1 s limit), call exit(0), overflow their own
// heap, write past out or read past k, isolated in pacts-child (the default): each gets its
// verdict (Timeout, Crash, Fail or Crash naming the buffer), the run completes and the report is
// written, not qualified.
TEST(QualifyReport, MisbehavingPluginsGetTheirVerdictAndTheReportIsWritten) {
  struct Planted {
    const char* name;
    const char* library;
    std::vector<std::string> verdicts;  // either
    const char* words;
    const char* call_limit_s;  // PACTS_EXEC_TIMEOUT_S
  };
  // The hang and the slow plugin under a 1 s limit a call: every call of their cases times out.
  // The others under 60 s, so that a loaded machine's slow call (a case's pools take up to
  // 256 MiB) is never taken for what is tested: their crash or their wrong answer.
  for (const Planted& p :
       {Planted{"hang", PACTS_PLUGIN_HANG, {"Timeout"}, "timed out", "1"},
        Planted{"slow", PACTS_PLUGIN_SLOW, {"Timeout"}, "timed out", "1"},
        Planted{"heap-overflow", PACTS_PLUGIN_HEAP_OVERFLOW, {"Crash"}, "crashed", "60"},
        Planted{"exit", PACTS_PLUGIN_EXIT, {"Crash"}, "crashed: exit status 0", "60"},
        Planted{"write-past-out", PACTS_PLUGIN_WRITE_PAST_OUT, {"Fail", "Crash"}, "out: ", "60"},
        Planted{"read-past-k", PACTS_PLUGIN_READ_PAST_K, {"Crash"},
                "k: an access 65536 bytes past its end", "60"}}) {
    setenv("PACTS_EXEC_TIMEOUT_S", p.call_limit_s, 1);
    const fs::path dir = scratch(std::string("planted-") + p.name);
    const Exit e = run_qualify("--backend none --backend-lib " + std::string(p.library) +
                                   " --property PACTS-ACC-1 --cases 2 --bench-sets none --seed 20261129"
                                   " --out " + (dir / "report").string(),
                               dir);
    EXPECT_EQ(e.code, 1) << p.name << ": " << e.output;
    ASSERT_TRUE(fs::exists(dir / "report" / "report.json")) << p.name << ": " << e.output;
    const json j = json::parse(read_text(dir / "report" / "report.json"));
    EXPECT_FALSE(j["qualified"].get<bool>()) << p.name;
    ASSERT_EQ(j["backends"].size(), 1u) << p.name;
    const json& r = j["backends"][0]["results"][0];
    const std::string verdict = r["verdict"].get<std::string>();
    EXPECT_NE(std::find(p.verdicts.begin(), p.verdicts.end(), verdict), p.verdicts.end())
        << p.name << ": " << r.dump(2);
    EXPECT_NE(r.dump().find(p.words), std::string::npos) << p.name << ": " << r.dump(2);
  }
  unsetenv("PACTS_EXEC_TIMEOUT_S");
}

// The run's time limit (spec/process.md §5): a slow plugin (3 s a call) under a 4 s limit gets
// Timeout verdicts naming the limit once it is spent, and pacts-qualify finishes its report in
// seconds instead of waiting on every call.
TEST(QualifyReport, ASlowPluginIsStoppedByTheRunsTimeLimit) {
  setenv("PACTS_EXEC_TIMEOUT_S", "30", 1);
  setenv("PACTS_EXEC_RUN_LIMIT_S", "4", 1);
  const fs::path dir = scratch("planted-slow-run-limit");
  const auto t0 = std::chrono::steady_clock::now();
  const Exit e = run_qualify("--backend none --backend-lib " + std::string(PACTS_PLUGIN_SLOW) +
                                 " --property PACTS-ACC-1 --property PACTS-META-2 --cases 3"
                                 " --bench-sets none --seed 20261129 --out " + (dir / "report").string(),
                             dir);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  unsetenv("PACTS_EXEC_RUN_LIMIT_S");
  unsetenv("PACTS_EXEC_TIMEOUT_S");
  EXPECT_EQ(e.code, 1) << e.output;
  EXPECT_LT(seconds, 25.0) << e.output;  // without the limit: 3 s for each of the many calls
  ASSERT_TRUE(fs::exists(dir / "report" / "report.json")) << e.output;
  const json j = json::parse(read_text(dir / "report" / "report.json"));
  EXPECT_FALSE(j["qualified"].get<bool>());
  int limited = 0;
  for (const json& r : j["backends"][0]["results"])
    if (r["verdict"] == "Timeout" && r.dump().find("PACTS_EXEC_RUN_LIMIT_S") != std::string::npos) ++limited;
  EXPECT_EQ(limited, 2) << j["backends"][0]["results"].dump(2);
}

TEST(QualifyReport, RefusedPluginIsAUsageError) {
  const fs::path dir = scratch("refused");
  const Exit e = run_qualify("--backend-lib " + std::string(PACTS_PLUGIN_ABI99) + " --out " +
                                 (dir / "report").string(),
                             dir);
  EXPECT_EQ(e.code, 2) << e.output;
  EXPECT_NE(e.output.find("abi_version 99"), std::string::npos) << e.output;
  EXPECT_FALSE(fs::exists(dir / "report" / "report.json"));
}

}  // namespace
}  // namespace pacts::conformance
