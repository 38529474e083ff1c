// pacts-fuzz (ctest label `fuzz`): what a campaign must get right for its results to be trusted.
// Campaign budgets are cases, never seconds; seeds are fixed and printed. The binary is spawned
// where its process matters (exit status, replay, merge, a signal mid-campaign).
#include "campaign.h"
#include "case_stream.h"
#include "summary.h"

#include <pacts/backends/register.h>
#include <pacts/conformance/case_file.h>
#include <pacts/conformance/out_dir.h>
#include <pacts/conformance/property.h>

#include <gtest/gtest.h>

#include "child_process.h"
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

namespace pf = pacts::fuzz;
namespace pc = pacts::conformance;
namespace fs = std::filesystem;

namespace {

constexpr uint64_t kSeed = 20261129;

// The in-process campaigns make backends by name as pacts-fuzz does: registered as its main() does.
[[maybe_unused]] const bool registered = [] {
  pacts::backends::register_all();
  return true;
}();

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::path(PACTS_FUZZ_TEST_DIR) / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p);
  EXPECT_TRUE(in.good()) << p;
  return nlohmann::json::parse(in);
}

using pacts::testing::read_text;

// Starts pacts-fuzz with `args` (tests/support/child_process.h: spawn_logged).
pid_t spawn(const std::vector<std::string>& args, const fs::path& log) {
  return pacts::testing::spawn_logged(PACTS_FUZZ_BINARY, args, log);
}

// A guard against a hung child, not a time limit on the campaign: a campaign of 8 cases with its
// shrinking took more than 50 s on CI's two cores while ctest ran another test beside it.
int wait_exit(pid_t pid) { return pacts::testing::wait_exit(pid, 240); }

int run_binary(const std::vector<std::string>& args, const fs::path& log) {
  const int rc = wait_exit(spawn(args, log));
  std::printf("exit %d; output:\n%s\n", rc, read_text(log).c_str());
  return rc;
}

// Every count of a summary adds up: per property, over properties, against the campaigns and
// against the coverage table (which counts the cases the backend ran, NotSupported and
// NotApplicable excluded).
void expect_counts_add_up(const nlohmann::json& s) {
  int64_t cases = 0, not_supported = 0, failed = 0;
  for (const auto& p : s["properties"]) {
    const int64_t n = p["cases"];
    EXPECT_EQ(n, p["passed"].get<int64_t>() + p["not_supported"].get<int64_t>() +
                     p["failed"].get<int64_t>() + p["quality_warnings"].get<int64_t>() +
                     p["not_applicable"].get<int64_t>())
        << p.dump();
    cases += n;
    not_supported += p["not_supported"].get<int64_t>() + p["not_applicable"].get<int64_t>();
    failed += p["failed"].get<int64_t>();
  }
  EXPECT_EQ(s["totals"]["cases"].get<int64_t>(), cases);
  EXPECT_EQ(s["totals"]["failed"].get<int64_t>(), failed);
  int64_t campaign_cases = 0;
  for (const auto& c : s["campaigns"]) campaign_cases += c["cases"].get<int64_t>();
  EXPECT_EQ(campaign_cases, cases);
  EXPECT_EQ(s["coverage"]["cases"].get<int64_t>(), cases - not_supported);
  int64_t in_cells = 0;
  for (const auto& [k, n] : s["coverage"]["cells"].items()) in_cells += n.get<int64_t>();
  EXPECT_EQ(in_cells, cases - not_supported);
  for (const auto& [axis, values] : s["coverage"]["axes"].items()) {
    int64_t sum = 0;
    for (const auto& [v, n] : values.items()) sum += n.get<int64_t>();
    EXPECT_EQ(sum, cases - not_supported) << axis;
  }
}

std::string case_text(const pc::CaseSpec& spec) {
  pc::CaseFile f;
  f.spec = spec;
  return pc::to_json_text(f);
}

}  // namespace

TEST(FuzzShard, ParsesAndRefuses) {
  auto ok = pf::parse_shard("3/8");
  ASSERT_TRUE(ok.is_ok());
  EXPECT_EQ(ok.value().index, 3);
  EXPECT_EQ(ok.value().count, 8);
  for (const char* bad : {"8/8", "-1/2", "1", "1/0", "a/2", "1/2x", ""}) {
    auto r = pf::parse_shard(bad);
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_NE(r.status().message().find(std::string("'") + bad + "'"), std::string::npos)
        << r.status().message();
  }
}

// Shards of one campaign never run the same case, and a case is regenerated from
// (seed, shard, index) alone: the whole case (structure, overrides and data seed) is compared.
TEST(FuzzStream, ShardsAreDisjointAndCasesReproducible) {
  std::printf("seed %llu\n", static_cast<unsigned long long>(kSeed));
  const pc::Property* p = pc::find_property("PACTS-ACC-1");
  ASSERT_NE(p, nullptr);
  const rc::Gen<pc::CaseSpec> gen = pc::gen_case(p->limits);
  std::map<std::string, std::string> seen;  // case -> "shard/index" that made it
  std::set<uint64_t> data_seeds;
  int repeats = 0;
  std::string first_repeat;
  const int64_t shards = 3, per_shard = 150;
  for (int64_t k = 0; k < shards; ++k)
    for (int64_t i = 0; i < per_shard; ++i) {
      const pf::CaseId id{kSeed, {k, shards}, i};
      const pf::Generated g = *pf::generate(gen, id);
      const std::string where = std::to_string(k) + "/" + std::to_string(shards) + " #" + std::to_string(i);
      const auto [it, fresh] = seen.emplace(case_text(g.spec), where);
      if (!fresh && repeats++ == 0)
        first_repeat = where + " repeats the case of " + it->second + ": " + pc::describe(g.spec);
      data_seeds.insert(g.spec.seed);
      if (i % 50 == 0) {
        EXPECT_EQ(case_text(pf::generate(gen, id)->spec), case_text(g.spec)) << where;
      }
    }
  EXPECT_EQ(repeats, 0) << first_repeat;
  EXPECT_EQ(data_seeds.size(), static_cast<size_t>(shards * per_shard));
  // The sizes are spread over 0..100 (the small cases shrinking would reach, and the nominal).
  int small = 0, large = 0;
  for (int64_t i = 0; i < 300; ++i) {
    const int s = pf::draw_of({kSeed, {0, 1}, i}).size;
    EXPECT_GE(s, 0);
    EXPECT_LE(s, 100);
    small += s < 20;
    large += s > 80;
  }
  EXPECT_GT(small, 0);
  EXPECT_GT(large, 0);
}

// Shrinking keeps the failure and walks to a local minimum of it: with a planted "bug" that needs
// a batch of 3 or more and a head dim of 128 or more, the minimal case sits on that boundary.
TEST(FuzzShrink, GreedyShrinkEndsAtTheFailuresBoundary) {
  std::printf("seed %llu\n", static_cast<unsigned long long>(kSeed));
  const pc::Property* p = pc::find_property("PACTS-ACC-1");
  ASSERT_NE(p, nullptr);
  const rc::Gen<pc::CaseSpec> gen = pc::gen_case(p->limits);
  const pf::CheckFn bug = [](const pc::CaseSpec& c) {
    return c.shape.batch >= 3 && c.shape.head_dim >= 128 ? pc::Outcome::fail("planted")
                                                          : pc::Outcome::pass();
  };
  int shrunk = 0;
  const std::atomic<bool> no_stop{false};
  for (int64_t i = 0; i < 400 && shrunk < 5; ++i) {
    const pf::Generated g = *pf::generate(gen, {kSeed, {0, 1}, i});
    const pc::Outcome first = bug(g.spec);
    if (!first.failed() || (g.spec.shape.batch == 3 && g.spec.shape.head_dim == 128)) continue;
    ++shrunk;
    const pf::ShrinkResult r = pf::shrink(g, first, g.spec.seed, bug, {}, no_stop);
    EXPECT_TRUE(bug(r.minimal).failed()) << pc::describe(r.minimal);
    EXPECT_TRUE(r.outcome.failed());
    // 3 exactly: RapidCheck alone cannot leave the generator's batch-of-5-or-more branch
    // (generators.cpp draws the branch first), the structural reductions drop sequences.
    EXPECT_EQ(r.minimal.shape.batch, 3) << pc::describe(g.spec) << " -> " << pc::describe(r.minimal);
    EXPECT_EQ(r.minimal.shape.head_dim, 128) << pc::describe(r.minimal);
    // 1-minimal: no structural reduction of the minimal case still fails, and everything the
    // planted bug does not need is gone.
    const std::vector<pc::CaseSpec> smaller = pf::reductions(r.minimal);
    EXPECT_FALSE(smaller.empty());
    for (const pc::CaseSpec& c : smaller)
      EXPECT_FALSE(bug(c).failed()) << pc::describe(r.minimal) << " -> " << pc::describe(c);
    EXPECT_EQ(r.minimal.shape.q_len, 1) << pc::describe(r.minimal);
    EXPECT_EQ(r.minimal.shape.num_kv_heads, 1) << pc::describe(r.minimal);
    EXPECT_EQ(r.minimal.shape.num_q_heads, 1) << pc::describe(r.minimal);
    EXPECT_TRUE(r.minimal.overrides.empty()) << pc::describe(r.minimal);
    for (int32_t ctx : r.minimal.shape.contexts) EXPECT_LE(ctx, 1) << pc::describe(r.minimal);
    EXPECT_EQ(r.minimal.seed, g.spec.seed);  // the bytes' seed is the case's, never shrunk
    EXPECT_GT(r.steps, 0);
    EXPECT_FALSE(r.stopped);
    // The bound on accepted steps holds.
    const pf::ShrinkResult one = pf::shrink(g, first, g.spec.seed, bug, {1, 2000}, no_stop);
    EXPECT_EQ(one.steps, 1);
    EXPECT_TRUE(one.stopped);
    EXPECT_TRUE(bug(one.minimal).failed());
  }
  EXPECT_EQ(shrunk, 5);
}

// The 2^16 low pages (CaseShape::low_pages, pools of up to 128 MiB): a failure that does not need
// them shrinks without them, every candidate after the first check included; one that needs them
// keeps them.
TEST(FuzzShrink, TheLowPagesStayOnlyWhereTheFailureNeedsThem) {
  const pc::Property* p = pc::find_property("PACTS-ACC-1");
  ASSERT_NE(p, nullptr);
  const rc::Gen<pc::CaseSpec> gen = pc::gen_case(p->limits);
  const std::atomic<bool> no_stop{false};
  int with_low_pages = 0;
  for (int64_t i = 0; i < 400 && with_low_pages < 3; ++i) {
    const pf::Generated g = *pf::generate(gen, {kSeed, {0, 1}, i});
    if (g.spec.shape.low_pages == 0) continue;
    ++with_low_pages;
    int64_t checks = 0, checks_with_low_pages = 0;
    const pf::CheckFn any = [&](const pc::CaseSpec& c) {
      ++checks;
      checks_with_low_pages += c.shape.low_pages != 0;
      return pc::Outcome::fail("every case");
    };
    const pf::ShrinkResult r = pf::shrink(g, any(g.spec), g.spec.seed, any, {}, no_stop);
    EXPECT_EQ(r.minimal.shape.low_pages, 0) << pc::describe(r.minimal);
    EXPECT_GT(checks, 2);
    EXPECT_EQ(checks_with_low_pages, 1);  // the failing case's own first check only
    const pf::CheckFn needs = [](const pc::CaseSpec& c) {
      return c.shape.low_pages != 0 ? pc::Outcome::fail("a page id past 16 bits") : pc::Outcome::pass();
    };
    const pf::ShrinkResult k = pf::shrink(g, needs(g.spec), g.spec.seed, needs, {}, no_stop);
    EXPECT_EQ(k.minimal.shape.low_pages, pc::kLowPages) << pc::describe(k.minimal);
    EXPECT_TRUE(needs(k.minimal).failed());
  }
  EXPECT_EQ(with_low_pages, 3);
}

// A case the generator cannot produce is reported (and the campaign counts it as discarded), as
// RapidCheck's own loop discards it; it never ends the campaign.
TEST(FuzzStream, GenerationFailureIsADiscardNotACrash) {
  const rc::Gen<pc::CaseSpec> impossible = rc::gen::exec([]() -> pc::CaseSpec {
    return pc::CaseSpec{{}, *rc::gen::inRange<uint64_t>(5, 5), {}};  // an empty range
  });
  std::string why;
  EXPECT_FALSE(pf::generate(impossible, {kSeed, {0, 1}, 0}, &why).has_value());
  EXPECT_NE(why.find("[5, 5)"), std::string::npos) << why;
}

// Identical minimal failures are one record: the signature ignores the data seed (which never
// shrinks) and nothing else.
TEST(FuzzDedupe, SignatureIsThePropertyBackendAndShrunkShape) {
  pc::CaseSpec a;
  a.shape.contexts = {5, 17};
  a.seed = 1;
  const std::string sig = pf::failure_signature("PACTS-POISON-1", "host", a);
  // What minimal cases of one bug still differ in: one record.
  pc::CaseSpec same = a;
  same.seed = 99;
  same.overrides.push_back({});
  same.shape.k_layout = pc::PoolLayout::kHND;
  same.shape.q_gap = 3;
  same.shape.extra_pages = 7;
  EXPECT_EQ(sig, pf::failure_signature("PACTS-POISON-1", "host", same));
  // Another property, backend, shape or decode path: another failure.
  EXPECT_NE(sig, pf::failure_signature("PACTS-POISON-2", "host", a));
  EXPECT_NE(sig, pf::failure_signature("PACTS-POISON-1", "hip", a));
  pc::CaseSpec c = a;
  c.shape.contexts[1] = 16;
  EXPECT_NE(sig, pf::failure_signature("PACTS-POISON-1", "host", c));
  pc::CaseSpec d = a;
  d.shape.kv_format = PACTS_FORMAT_E4M3FN;
  EXPECT_NE(sig, pf::failure_signature("PACTS-POISON-1", "host", d));
  pc::CaseSpec e = a;
  e.shape.q_len = 2;
  EXPECT_NE(sig, pf::failure_signature("PACTS-POISON-1", "host", e));
}

// A short campaign on the host backend ends with a summary whose counts add up, written both as
// summary.json (which reads back) and as JUnit XML with one testcase per property.
TEST(FuzzCampaign, HostCampaignSummaryAddsUp) {
  const fs::path out = fresh_dir("host_campaign");
  pf::CampaignOptions o;
  o.seed = kSeed;
  o.cases = 2 * static_cast<int64_t>(pc::catalogue().size());  // two cases of every property
  o.workers.backend = "host";
  o.suite_version = "0.1.0 (git test)";
  o.workers.jobs = 2;
  o.out_dir = out.string();
  std::printf("seed %llu, %lld cases\n", static_cast<unsigned long long>(o.seed),
              static_cast<long long>(o.cases));
  const pf::CampaignOutcome r = pf::run_campaign(o, stdout);
  ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
  // Every index of the budget ran, was skipped as a costly property's (PACTS-DEV-2) turn, or was
  // discarded because the generator could not produce it.
  int64_t skipped = 0;
  for (const pf::PropertyCounts& c : r.summary.properties) skipped += c.skipped + c.discarded;
  EXPECT_EQ(r.summary.cases() + skipped, o.cases);
  EXPECT_EQ(r.summary.failed(), 0);

  const nlohmann::json s = read_json(out / "summary.json");
  expect_counts_add_up(s);
  EXPECT_TRUE(s["complete"].get<bool>());
  EXPECT_EQ(s["campaigns"][0]["seed"], std::to_string(kSeed));
  EXPECT_EQ(s["campaigns"][0]["stop_reason"], "cases");
  EXPECT_EQ(s["campaigns"][0]["suite_version"], "0.1.0 (git test)");
  EXPECT_EQ(s["campaigns"][0]["workers"].size(), 2u);
  EXPECT_EQ(s["properties"].size(), pc::catalogue().size());
  EXPECT_GT(s["coverage"]["cells_covered"].get<int64_t>(), 0);
  auto back = pf::summary_from_json(s);
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(back.value().to_json(), s);

  const std::string junit = read_text(out / "junit.xml");
  size_t testcases = 0;
  for (size_t at = junit.find("<testcase "); at != std::string::npos; at = junit.find("<testcase ", at + 1))
    ++testcases;
  EXPECT_EQ(testcases, pc::catalogue().size());
  EXPECT_NE(junit.find("PACTS_POISON_1_UnownedRowsDoNotLeak"), std::string::npos);
  EXPECT_EQ(junit.find("<failure"), std::string::npos);
}

// The self-test's fault (#7092's V tail leak) is found, shrunk, saved as a case file, replayed
// as a failure on the faulty backend, and passes on the plain host backend.
TEST(FuzzCampaign, FindsShrinksSavesAndReplaysAPlantedFault) {
  const fs::path out = fresh_dir("fault_campaign");
  const int rc = run_binary({"run", "--backend", "host+v_tail_leak", "--properties", "POISON-1",
                             "--cases", "8", "--jobs", "2", "--seed", std::to_string(kSeed),
                             "--out", out.string()},
                            out / "log.txt");
  EXPECT_EQ(rc, 1);  // failures found
  const nlohmann::json s = read_json(out / "summary.json");
  expect_counts_add_up(s);
  ASSERT_GE(s["failures"].size(), 1u);
  int64_t occurrences = 0;
  int shrunk = 0;
  for (const auto& f : s["failures"]) {
    occurrences += f["occurrences"].get<int64_t>();
    EXPECT_EQ(f["property"], "PACTS-POISON-1");
    EXPECT_EQ(f["backend"], "host+v_tail_leak");
    shrunk += f["shrink_steps"].get<int>() > 0 && f["original"] != f["minimal"];
    const fs::path file = out / f["case_file"].get<std::string>();
    auto cf = pc::read_case_file(file.string());
    ASSERT_TRUE(cf.is_ok()) << cf.status().to_string();
    EXPECT_EQ(cf.value().property, "PACTS-POISON-1");
    EXPECT_EQ(cf.value().backend, "host+v_tail_leak");
    EXPECT_EQ(cf.value().run_seed, kSeed);
    EXPECT_EQ(pc::describe(cf.value().spec), f["minimal"].get<std::string>());
  }
  EXPECT_GT(shrunk, 0);  // generated cases are rarely minimal: shrinking must have run
  // Deduplication loses no failing case: every failure is one occurrence of a record.
  EXPECT_EQ(occurrences, s["totals"]["failed"].get<int64_t>());
  // One planted bug, one record: every failing case shrinks to the one smallest case that shows
  // the leak (a sequence of one key on a page of 8, its 7 unowned rows poisoned).
  EXPECT_EQ(s["failures"].size(), 1u) << s["failures"].dump(1);
  for (const auto& f : s["failures"])
    EXPECT_EQ(f["minimal"].get<std::string>().rfind("B1 L1 Hq1 Hkv1 D64 page8 kv bf16 q bf16 out bf16 ctx [1]", 0), 0u)
        << f["minimal"];

  const std::string first = (out / s["failures"][0]["case_file"].get<std::string>()).string();
  EXPECT_EQ(run_binary({"replay", first}, out / "replay_fault.txt"), 1);
  EXPECT_EQ(run_binary({"replay", first, "--backend", "host"}, out / "replay_host.txt"), 0);
  EXPECT_EQ(run_binary({"replay", out.string()}, out / "replay_dir.txt"), 1);
}

// Shard summaries merge into one whose counts, coverage and failures add up, with every failure's
// case file next to it (so the merged directory replays).
TEST(FuzzMerge, ShardSummariesAddUp) {
  const fs::path root = fresh_dir("merge");
  std::vector<nlohmann::json> parts;
  for (int k = 0; k < 2; ++k) {
    const fs::path out = root / ("shard" + std::to_string(k));
    const int rc = run_binary({"run", "--backend", "host+v_tail_leak", "--properties",
                               "POISON-1,ACC-1", "--cases", "6", "--jobs", "2", "--shard",
                               std::to_string(k) + "/2", "--seed", std::to_string(kSeed),
                               "--shrink-steps", "3", "--out", out.string()},
                              out.string() + ".log");
    EXPECT_TRUE(rc == 0 || rc == 1) << rc;
    parts.push_back(read_json(out / "summary.json"));
  }
  const fs::path merged_dir = root / "merged";
  ASSERT_EQ(run_binary({"merge", merged_dir.string(), (root / "shard0").string(),
                        (root / "shard1" / "summary.json").string()},
                       root / "merge.log"),
            0);
  const nlohmann::json m = read_json(merged_dir / "summary.json");
  expect_counts_add_up(m);
  EXPECT_EQ(m["campaigns"].size(), 2u);
  EXPECT_EQ(m["totals"]["cases"].get<int64_t>(),
            parts[0]["totals"]["cases"].get<int64_t>() + parts[1]["totals"]["cases"].get<int64_t>());
  for (const auto& p : m["properties"]) {
    int64_t sum = 0;
    for (const auto& part : parts)
      for (const auto& q : part["properties"])
        if (q["id"] == p["id"]) sum += q["cases"].get<int64_t>();
    EXPECT_EQ(p["cases"].get<int64_t>(), sum) << p["id"];
  }
  int64_t occurrences = 0, part_occurrences = 0;
  std::set<std::string> signatures;
  for (const auto& f : m["failures"]) {
    occurrences += f["occurrences"].get<int64_t>();
    EXPECT_TRUE(signatures.insert(f["signature"].get<std::string>()).second);
    EXPECT_TRUE(fs::exists(merged_dir / f["case_file"].get<std::string>())) << f["case_file"];
  }
  for (const auto& part : parts)
    for (const auto& f : part["failures"]) part_occurrences += f["occurrences"].get<int64_t>();
  EXPECT_EQ(occurrences, part_occurrences);
  EXPECT_EQ(occurrences, m["totals"]["failed"].get<int64_t>());
  ASSERT_FALSE(m["failures"].empty());  // the fault is found in both shards (fixed seed)
  EXPECT_EQ(run_binary({"replay", merged_dir.string()}, root / "replay.log"), 1);
}

// A summary that does not add up, or has a value of the wrong type, is refused by name.
TEST(FuzzMerge, RefusesABadSummaryNamingTheKey) {
  pf::Summary s;
  pf::PropertyCounts p;
  p.id = "PACTS-ACC-1";
  p.cases = 3;
  p.passed = 3;
  s.properties.push_back(p);
  s.campaigns.push_back({});
  nlohmann::json j = s.to_json();
  ASSERT_TRUE(pf::summary_from_json(j).is_ok());
  j["properties"][0]["passed"] = 2;
  auto r = pf::summary_from_json(j);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("properties[0].cases"), std::string::npos)
      << r.status().message();
  j["properties"][0]["passed"] = "3";
  r = pf::summary_from_json(j);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("properties[0].passed \"3\""), std::string::npos)
      << r.status().message();
}

// A summary nested 200,000 deep (at the root or under a key) or with a key written twice is
// refused naming the file, exit 2: never a stack overflow, never the last key winning.
TEST(FuzzMerge, RefusesDeepNestingAndRepeatedKeys) {
  const fs::path root = fresh_dir("merge_hostile");
  pf::Summary s;
  s.campaigns.push_back({});
  const std::string good = s.to_json().dump();
  ASSERT_EQ(good.front(), '{');
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  const std::vector<std::pair<std::string, std::string>> summaries = {
      {deep, "the document: arrays and objects nested deeper than 64 levels"},
      {"{\"pacts_fuzz_summary_version\": " + deep + ", " + good.substr(1),
       "pacts_fuzz_summary_version: arrays and objects nested deeper than 64 levels"},
      {"{\"complete\": false, " + good.substr(1), "complete: duplicate key"},
  };
  for (size_t i = 0; i < summaries.size(); ++i) {
    const fs::path file = root / ("summary" + std::to_string(i) + ".json");
    std::ofstream(file) << summaries[i].first;
    const fs::path log = root / ("merge" + std::to_string(i) + ".log");
    EXPECT_EQ(run_binary({"merge", (root / "merged").string(), file.string()}, log), 2);
    EXPECT_NE(read_text(log).find(file.string() + ": " + summaries[i].second), std::string::npos)
        << summaries[i].second;
  }
}

// An input that cannot be examined (a loop of symbolic links) is refused naming it, exit 2 (it
// was an uncaught filesystem_error); a failure whose case file lies outside its summary's folder
// is refused (merge would copy it from and to anywhere).
TEST(FuzzMerge, RefusesUnreadableInputsAndForeignCaseFiles) {
  const fs::path root = fresh_dir("merge_unreadable");
  fs::create_symlink("loop", root / "loop");
  const fs::path log = root / "merge.log";
  EXPECT_EQ(run_binary({"merge", (root / "merged").string(), (root / "loop").string()}, log), 2);
  EXPECT_NE(read_text(log).find((root / "loop").string() + ": cannot examine"), std::string::npos);
  EXPECT_EQ(run_binary({"replay", (root / "loop").string()}, log), 2);

  pf::Summary s;
  s.campaigns.push_back({});
  pf::FailureRecord f;
  f.case_file = "failures/x.json";
  s.failures.push_back(f);
  nlohmann::json j = s.to_json();
  for (const char* foreign : {"../outside.json", "failures/../../outside.json", "/tmp/x.json",
                              "failures/x.txt"}) {
    j["failures"][0]["case_file"] = foreign;
    auto r = pf::summary_from_json(j);
    ASSERT_FALSE(r.is_ok()) << foreign;
    EXPECT_NE(r.status().message().find("failures[0].case_file"), std::string::npos)
        << r.status().message();
  }
}

// A signal mid-campaign (SIGINT: Ctrl-C; SIGTERM: a batch system's timeout; SIGHUP: a closed
// terminal): the campaign stops cleanly, writes a complete summary that says it was interrupted,
// and exits with 128 + the signal.
void expect_signal_writes_the_summary(int sig, const std::string& name) {
  const fs::path out = fresh_dir(name);
  const fs::path log = out.parent_path() / (name + ".log");
  const pid_t pid = spawn({"run", "--backend", "host", "--jobs", "1", "--seed",
                           std::to_string(kSeed), "--progress", "--out", out.string()},
                          log);
  // Mid-campaign: wait for a progress line that counts a finished case (a guard, not a timing
  // assertion: the deadline only keeps a broken binary from hanging the test).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(50);
  bool running = false;
  while (!running && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const std::string text = read_text(log);
    for (size_t at = text.find("] cases "); at != std::string::npos; at = text.find("] cases ", at + 1))
      running = running || (text[at + 8] >= '1' && text[at + 8] <= '9');
  }
  ASSERT_TRUE(running) << read_text(log);
  ASSERT_EQ(kill(pid, sig), 0);
  EXPECT_EQ(wait_exit(pid), 128 + sig) << read_text(log);
  const nlohmann::json s = read_json(out / "summary.json");
  expect_counts_add_up(s);
  EXPECT_TRUE(s["complete"].get<bool>());
  EXPECT_TRUE(s["campaigns"][0]["interrupted"].get<bool>());
  EXPECT_EQ(s["campaigns"][0]["stop_reason"], name);
  EXPECT_GE(s["totals"]["cases"].get<int64_t>(), 1);
  EXPECT_TRUE(fs::exists(out / "junit.xml"));
}

// Values that started campaigns without end (a negative --case-index was taken as "none", NaN
// seconds never compare) or another campaign than the one asked for (a seed above 2^64-1 was
// clamped), and an empty --out (the working directory was written): each refused with exit 2, a
// message naming the option, the value and what is accepted, and nothing written.
TEST(FuzzOptions, RefusesValuesNamingTheOptionAndWhatIsAccepted) {
  const fs::path out = fresh_dir("options");
  fs::remove_all(out);
  const fs::path log = out.parent_path() / "options.log";
  const auto refused = [&](std::vector<std::string> args, const std::string& words) {
    args.insert(args.begin(), {"run", "--backend", "host", "--jobs", "1", "--cases", "2"});
    if (std::find(args.begin(), args.end(), "--out") == args.end()) args.insert(args.end(), {"--out", out.string()});
    EXPECT_EQ(run_binary(args, log), 2) << words;
    EXPECT_NE(read_text(log).find(words), std::string::npos) << read_text(log);
    EXPECT_FALSE(fs::exists(out)) << words;
  };
  refused({"--case-index", "-5"}, "--case-index -5: accepted: an integer >= 0");
  refused({"--seconds", "nan"}, "--seconds nan: accepted: a finite number of seconds >= 0");
  refused({"--seconds", "inf"}, "--seconds inf: accepted: a finite number of seconds >= 0");
  refused({"--seconds", "-1"}, "--seconds -1: accepted: a finite number of seconds >= 0");
  refused({"--progress-interval", "nan"}, "--progress-interval nan: accepted: a finite number of seconds >= 1");
  refused({"--seed", "18446744073709551616"},
          "--seed '18446744073709551616': above 2^64-1; accepted: a decimal integer from 0 to 18446744073709551615");
  refused({"--seed", "-1"}, "--seed '-1': accepted: a decimal integer from 0 to 18446744073709551615");
  refused({"--seed", "12abc"}, "--seed '12abc': accepted: a decimal integer");
  refused({"--out", ""}, "--out '': accepted: the path of a folder");
  // The largest seed is a seed.
  EXPECT_EQ(run_binary({"run", "--backend", "host", "--jobs", "1", "--cases", "2", "--seed",
                        "18446744073709551615", "--out", out.string()},
                       log),
            0);
  EXPECT_EQ(read_json(out / "summary.json")["campaigns"][0]["seed"], "18446744073709551615");
}

// A second campaign on the --out of a campaign in progress is refused (exit 2) naming the folder;
// the first one's summary is its own. Once it has ended, a new campaign there moves its files
// aside.
TEST(FuzzOutDir, ASecondCampaignOnTheSameFolderIsRefused) {
  const fs::path out = fresh_dir("locked");
  const fs::path log = out.parent_path() / "locked-first.log";
  const pid_t first = spawn({"run", "--backend", "host", "--jobs", "1", "--seed", std::to_string(kSeed),
                             "--progress", "--out", out.string()},
                            log);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(50);
  while (read_text(log).find("] cases ") == std::string::npos && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const fs::path second_log = out.parent_path() / "locked-second.log";
  EXPECT_EQ(run_binary({"run", "--backend", "host", "--jobs", "1", "--cases", "3", "--out", out.string()},
                       second_log),
            2);
  EXPECT_NE(read_text(second_log).find("--out '" + out.string() + "': another pacts run is writing into this folder"),
            std::string::npos);
  ASSERT_EQ(kill(first, SIGINT), 0);
  EXPECT_EQ(wait_exit(first), 128 + SIGINT) << read_text(log);
  const nlohmann::json s = read_json(out / "summary.json");
  EXPECT_EQ(s["campaigns"][0]["stop_reason"], "SIGINT");
  EXPECT_EQ(run_binary({"run", "--backend", "host", "--jobs", "1", "--cases", "3", "--out", out.string()},
                       second_log),
            0);
  // The folder reused once the first campaign ended: its files were moved into previous-*/, the
  // summary in the folder is the new campaign's.
  EXPECT_EQ(read_json(out / "summary.json")["campaigns"][0]["stop_reason"], "cases");
  std::vector<fs::path> previous;
  for (const auto& e : fs::directory_iterator(out))
    if (e.path().filename().string().rfind("previous-", 0) == 0) previous.push_back(e.path());
  ASSERT_EQ(previous.size(), 1u);
  EXPECT_EQ(read_json(previous[0] / "summary.json")["campaigns"][0]["stop_reason"], "SIGINT");
  EXPECT_TRUE(fs::exists(previous[0] / "failures"));
  EXPECT_NE(read_text(second_log).find("were moved to " + previous[0].string()), std::string::npos);
}

TEST(FuzzSignal, SigintMidCampaignWritesTheSummary) { expect_signal_writes_the_summary(SIGINT, "SIGINT"); }

TEST(FuzzSignal, SighupMidCampaignWritesTheSummary) { expect_signal_writes_the_summary(SIGHUP, "SIGHUP"); }

// Merging shards that did not end cleanly (fuzz/README.md, "Sharding across machines, and
// merging"): nothing a shard saved is dropped, and a merge that could not add everything up
// says so (exit 3, "complete": false, one "incomplete" line per shard).
namespace {

// A shard of a campaign that finds the planted fault: exit 1, failures/ holds its case files.
void run_faulty_shard(const fs::path& out, int cases = 4) {
  ASSERT_EQ(run_binary({"run", "--backend", "host+v_tail_leak", "--properties", "POISON-1",
                        "--cases", std::to_string(cases), "--jobs", "1", "--seed",
                        std::to_string(kSeed), "--shrink-steps", "2", "--out", out.string()},
                       out.string() + ".log"),
            1);
}

// A shard that finds nothing: exit 0, a complete summary with no failures.
void run_clean_shard(const fs::path& out, const std::string& shard = "0/1") {
  ASSERT_EQ(run_binary({"run", "--backend", "host", "--properties", "ACC-1", "--cases", "2",
                        "--jobs", "1", "--seed", std::to_string(kSeed), "--shard", shard, "--out",
                        out.string()},
                       out.string() + ".log"),
            0);
}

std::vector<std::string> case_files_in(const fs::path& folder) {
  std::vector<std::string> names;
  if (!fs::is_directory(folder / "failures")) return names;
  for (const auto& e : fs::directory_iterator(folder / "failures"))
    if (e.path().extension() == ".json") names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// The merged failures: every case file of `names` is one of them and lies in merged/failures.
void expect_listed(const nlohmann::json& m, const fs::path& merged, const std::vector<std::string>& names) {
  for (const std::string& n : names) {
    bool found = false;
    for (const auto& f : m["failures"]) found = found || f["case_file"] == "failures/" + n;
    EXPECT_TRUE(found) << n << " not in " << m["failures"].dump();
    EXPECT_TRUE(fs::exists(merged / "failures" / n)) << n;
  }
}

}  // namespace

// A failure found on a full disk: its case file cannot be written, and the log says so ("not
// saved" and why) instead of printing a "saved:" path and a replay command for a file that does
// not exist. --out on a small tmpfs filled before the campaign; skipped (with the reason) where
// the test cannot mount one.
TEST(FuzzCampaign, AFullDiskSaysTheCaseFileIsNotSaved) {
  const fs::path out = fresh_dir("full_disk");
  fs::create_directories(out);
  if (mount("tmpfs", out.c_str(), "tmpfs", 0, "size=256k") != 0)
    GTEST_SKIP() << "no tmpfs could be mounted at " << out << ": " << std::strerror(errno);
  struct Unmount {
    fs::path at;
    ~Unmount() { umount2(at.c_str(), MNT_DETACH); }
  } unmount{out};
  {  // every byte the file system has left, taken
    std::FILE* fill = std::fopen((out / "filler").c_str(), "wb");
    ASSERT_NE(fill, nullptr);
    const std::vector<char> chunk(4096, 'x');
    while (std::fwrite(chunk.data(), 1, chunk.size(), fill) == chunk.size() && std::fflush(fill) == 0) {
    }
    std::fclose(fill);
  }
  const fs::path log = out.parent_path() / "full_disk.log";
  // No checkpoint summary (--checkpoint-interval 0): the first write is the failure's case file.
  const int code = run_binary({"run", "--backend", "host+v_tail_leak", "--properties", "POISON-1",
                               "--cases", "2", "--jobs", "1", "--seed", std::to_string(kSeed),
                               "--shrink-steps", "2", "--checkpoint-interval", "0", "--out",
                               out.string()},
                              log.string());
  const std::string text = read_text(log);
  EXPECT_NE(code, 0) << text;
  EXPECT_NE(text.find("not saved:"), std::string::npos) << text;
  EXPECT_EQ(text.find("saved:   "), std::string::npos) << text;
  EXPECT_TRUE(case_files_in(out).empty()) << text;
}

// A shard killed with SIGKILL before any summary (--checkpoint-interval 0), and the same shard's
// folder with a stale checkpoint summary (naming none of its case files) or a partial one: merge
// reports it incomplete (exit 3) and still counts and lists every case file it saved, never
// "0 failures"; the merged folder replays them.
TEST(FuzzMerge, KilledShardIsIncompleteAndKeepsItsCaseFiles) {
  const fs::path root = fresh_dir("merge_killed");
  const fs::path killed = root / "killed";
  const fs::path log = root / "killed.log";
  const pid_t pid = spawn({"run", "--backend", "host+v_tail_leak", "--properties", "POISON-1",
                           "--jobs", "1", "--seed", std::to_string(kSeed), "--shrink-steps", "2",
                           "--checkpoint-interval", "0", "--out", killed.string()},
                          log);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(50);
  while (read_text(log).find("saved:") == std::string::npos && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  EXPECT_EQ(wait_exit(pid), 128 + SIGKILL);
  ASSERT_FALSE(fs::exists(killed / "summary.json"));
  // A case file being written at the kill may be cut short: only whole ones are expected back.
  std::vector<std::string> names;
  for (const std::string& n : case_files_in(killed))
    if (pc::read_case_file((killed / "failures" / n).string()).is_ok()) names.push_back(n);
    else fs::remove(killed / "failures" / n);
  ASSERT_GE(names.size(), 1u) << read_text(log);

  // A summary from another run stands in for a stale checkpoint and, cut in half, a partial one.
  run_clean_shard(root / "clean");
  nlohmann::json checkpoint = read_json(root / "clean" / "summary.json");
  checkpoint["complete"] = false;
  const std::string stale_text = checkpoint.dump(2);
  const std::vector<std::pair<std::string, std::string>> variants = {
      {"none", ""}, {"stale", stale_text}, {"partial", stale_text.substr(0, stale_text.size() / 2)}};
  for (const auto& [name, summary] : variants) {
    const fs::path shard = root / ("shard-" + name), merged = root / ("merged-" + name);
    fs::copy(killed, shard, fs::copy_options::recursive);
    if (!summary.empty()) std::ofstream(shard / "summary.json") << summary;
    const fs::path merge_log = root / ("merge-" + name + ".log");
    EXPECT_EQ(run_binary({"merge", merged.string(), shard.string()}, merge_log), 3) << name;
    const std::string text = read_text(merge_log);
    EXPECT_NE(text.find(shard.string() + ": incomplete: "), std::string::npos) << name;
    for (const std::string& n : names) EXPECT_NE(text.find(n), std::string::npos) << name << " " << n;
    const nlohmann::json m = read_json(merged / "summary.json");
    EXPECT_FALSE(m["complete"].get<bool>()) << name;
    EXPECT_FALSE(m["incomplete"].empty()) << name;
    EXPECT_EQ(m["totals"]["distinct_failures"].get<size_t>(), names.size()) << name;
    EXPECT_EQ(m["totals"]["unsummarised_failures"].get<size_t>(), names.size()) << name;
    expect_listed(m, merged, names);
    EXPECT_NE(read_text(merged / "junit.xml").find("<failure"), std::string::npos) << name;
    for (const auto& f : m["failures"]) {
      EXPECT_FALSE(f["summarised"].get<bool>()) << name;
      EXPECT_EQ(f["shard"], "0/1");
      EXPECT_EQ(f["campaign_seed"], std::to_string(kSeed));
    }
    EXPECT_EQ(run_binary({"replay", merged.string()}, root / ("replay-" + name + ".log")), 1) << name;
  }
}

// A retried shard that wrote into the same folder: its summary (a run that found nothing) is new,
// the first run's case files stayed. Merge lists every case file present, says which ones the
// summary does not name, and exits 3: never fewer failures than replay finds.
TEST(FuzzMerge, RetriedShardListsTheCaseFilesItsSummaryDoesNotName) {
  const fs::path root = fresh_dir("merge_retried");
  const fs::path shard = root / "shard";
  run_faulty_shard(shard);
  const std::vector<std::string> names = case_files_in(shard);
  ASSERT_GE(names.size(), 1u);
  run_clean_shard(root / "retry");
  fs::copy_file(root / "retry" / "summary.json", shard / "summary.json",
                fs::copy_options::overwrite_existing);
  const fs::path merged = root / "merged", log = root / "merge.log";
  EXPECT_EQ(run_binary({"merge", merged.string(), shard.string()}, log), 3);
  const std::string text = read_text(log);
  EXPECT_NE(text.find(std::to_string(names.size()) + " case files in " + (shard / "failures").string() +
                      " that no summary names"),
            std::string::npos);
  for (const std::string& n : names) EXPECT_NE(text.find(n), std::string::npos) << n;
  const nlohmann::json m = read_json(merged / "summary.json");
  EXPECT_FALSE(m["complete"].get<bool>());
  EXPECT_EQ(m["totals"]["failed"].get<int64_t>(), 0);  // the counts are the summary's
  EXPECT_EQ(m["totals"]["unsummarised_failures"].get<size_t>(), names.size());
  expect_listed(m, merged, names);
  EXPECT_EQ(run_binary({"replay", merged.string()}, root / "replay.log"), 1);
}

// The same summary given twice (the same argument twice, the folder and its summary.json, another
// spelling of the folder, a copy of the folder): counted once, each repeat named; exit 0.
TEST(FuzzMerge, TheSameSummaryTwiceIsCountedOnce) {
  const fs::path root = fresh_dir("merge_twice");
  const fs::path a = root / "a";
  run_faulty_shard(a);
  fs::copy(a, root / "copy", fs::copy_options::recursive);
  const nlohmann::json one = read_json(a / "summary.json");
  const fs::path merged = root / "merged", log = root / "merge.log";
  EXPECT_EQ(run_binary({"merge", merged.string(), a.string(), a.string(), (a / "summary.json").string(),
                        (root / "." / "a" / "").string(), (root / "copy").string()},
                       log),
            0);
  const nlohmann::json m = read_json(merged / "summary.json");
  EXPECT_EQ(m["campaigns"].size(), 1u);
  EXPECT_EQ(m["totals"], one["totals"]);
  EXPECT_EQ(m["properties"], one["properties"]);
  const std::string text = read_text(log);
  size_t repeats = 0;
  for (size_t at = text.find("counted once"); at != std::string::npos; at = text.find("counted once", at + 1))
    ++repeats;
  EXPECT_EQ(repeats, 4u) << text;
  EXPECT_NE(text.find((root / "copy").string() + ": the same campaign as " + a.string()), std::string::npos);
}

// A shard folder with no summary (never ran, or an empty folder) and a path that does not exist do
// not abort the merge: each is reported, the other shards are merged, exit 3.
TEST(FuzzMerge, AShardWithoutASummaryIsReportedAndTheOthersMerged) {
  const fs::path root = fresh_dir("merge_missing");
  run_clean_shard(root / "s0", "0/3");
  run_clean_shard(root / "s2", "2/3");
  fs::create_directories(root / "s1");
  const fs::path merged = root / "merged", log = root / "merge.log";
  EXPECT_EQ(run_binary({"merge", merged.string(), (root / "s0").string(), (root / "s1").string(),
                        (root / "s2").string(), (root / "s3").string()},
                       log),
            3);
  const std::string text = read_text(log);
  EXPECT_NE(text.find((root / "s1").string() + ": incomplete: no summary"), std::string::npos) << text;
  EXPECT_NE(text.find((root / "s3").string() + ": incomplete: no summary"), std::string::npos) << text;
  const nlohmann::json m = read_json(merged / "summary.json");
  EXPECT_FALSE(m["complete"].get<bool>());
  EXPECT_EQ(m["incomplete"].size(), 2u);
  EXPECT_EQ(m["campaigns"].size(), 2u);
  EXPECT_EQ(m["totals"]["cases"].get<int64_t>(),
            read_json(root / "s0" / "summary.json")["totals"]["cases"].get<int64_t>() +
                read_json(root / "s2" / "summary.json")["totals"]["cases"].get<int64_t>());
}

// Merge's own output folder is claimed as a campaign's --out: refused (exit 2, naming it) while
// another run holds it, and never one of the inputs.
TEST(FuzzMerge, TheOutputFolderIsLockedAndNeverAnInput) {
  const fs::path root = fresh_dir("merge_locked");
  run_clean_shard(root / "s0");
  const fs::path merged = root / "merged", log = root / "merge.log";
  {
    auto held = pc::claim_out_dir(merged.string(), "--out", {});
    ASSERT_TRUE(held.is_ok()) << held.status().to_string();
    EXPECT_EQ(run_binary({"merge", merged.string(), (root / "s0").string()}, log), 2);
    EXPECT_NE(read_text(log).find("'" + merged.string() + "': another pacts run is writing into this folder"),
              std::string::npos);
    EXPECT_FALSE(fs::exists(merged / "summary.json"));
  }
  EXPECT_EQ(run_binary({"merge", merged.string(), (root / "s0").string()}, log), 0);
  EXPECT_EQ(run_binary({"merge", (root / "s0").string(), (root / "s0").string()}, log), 2);
  EXPECT_NE(read_text(log).find("is also the folder of the input"), std::string::npos);
  EXPECT_TRUE(fs::exists(root / "s0" / "summary.json"));
}

// A shard retried on its own folder by this pacts-fuzz: the first run's files were moved into
// previous-*/, so the merge is of the retry alone (complete, exit 0), and it names the earlier
// run's folder and its case files count, so that they are not lost from sight.
TEST(FuzzMerge, ARetriedShardsEarlierRunIsNamed) {
  const fs::path root = fresh_dir("merge_previous");
  const fs::path shard = root / "shard";
  run_faulty_shard(shard);
  const size_t first = case_files_in(shard).size();
  ASSERT_GE(first, 1u);
  run_clean_shard(shard);
  const fs::path log = root / "merge.log";
  EXPECT_EQ(run_binary({"merge", (root / "merged").string(), shard.string()}, log), 0);
  EXPECT_NE(read_text(log).find("earlier runs in this folder were moved aside and are not merged"),
            std::string::npos);
  EXPECT_NE(read_text(log).find("(" + std::to_string(first) + " case files)"), std::string::npos);
}

// A merged summary given with one of its own shards: the shard after the merged summary is the
// same campaign, counted once (exit 0); the merged summary after the shard would count the shard's
// cases twice, so it is not added and the merge is incomplete (exit 3), naming both.
TEST(FuzzMerge, AMergedSummaryOverlappingAShardIsNotCountedTwice) {
  const fs::path root = fresh_dir("merge_overlap");
  run_clean_shard(root / "s0", "0/2");
  run_clean_shard(root / "s1", "1/2");
  const fs::path log = root / "merge.log";
  ASSERT_EQ(run_binary({"merge", (root / "m01").string(), (root / "s0").string(), (root / "s1").string()}, log), 0);
  const nlohmann::json m01 = read_json(root / "m01" / "summary.json");
  EXPECT_EQ(run_binary({"merge", (root / "a").string(), (root / "m01").string(), (root / "s0").string()}, log), 0);
  EXPECT_NE(read_text(log).find((root / "s0").string() + ": the same campaign as " + (root / "m01").string()),
            std::string::npos);
  EXPECT_EQ(read_json(root / "a" / "summary.json")["totals"], m01["totals"]);
  EXPECT_EQ(run_binary({"merge", (root / "b").string(), (root / "s0").string(), (root / "m01").string()}, log), 3);
  EXPECT_NE(read_text(log).find((root / "m01").string() + ": incomplete: not added: some of its campaigns were merged "
                                "already from " + (root / "s0").string()),
            std::string::npos);
  const nlohmann::json b = read_json(root / "b" / "summary.json");
  EXPECT_EQ(b["totals"]["cases"], read_json(root / "s0" / "summary.json")["totals"]["cases"]);
  EXPECT_FALSE(b["complete"].get<bool>());
}
