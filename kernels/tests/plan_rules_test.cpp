// The one plan() (kernels/src/plan_rules.h) against tests/data/plans.txt: the plans the host and
// GPU rules made over pacts-bench's peers, models, grid and formats sets when the two backends'
// plan() became one. A different split changes output bits that no kernel hash can show, so a
// change of planning policy must change that file on purpose. The GPU rules are the NVIDIA
// kernels' (their slots: config::nvidia_blocks_per_sm); they are host code and need no GPU.
#include <pacts/decode.h>
#include <pacts/host.h>
#include <pacts/spec/validate.h>

#include "src/plan_rules.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace pacts::kernels {
namespace {

struct Row {
  int32_t batch, q_len, hq, hkv, d, page, max_pages, format, invariant, workers;
  int32_t host[3], gpu[3];  // partition size, partitions, rows per item
  std::string text;
};

std::vector<Row> rows() {
  std::ifstream in(PACTS_PLANS_FILE);
  std::vector<Row> out;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream w(line);
    Row r{};
    w >> r.batch >> r.q_len >> r.hq >> r.hkv >> r.d >> r.page >> r.max_pages >> r.format >>
        r.invariant >> r.workers >> r.host[0] >> r.host[1] >> r.host[2] >> r.gpu[0] >> r.gpu[1] >>
        r.gpu[2];
    EXPECT_FALSE(w.fail()) << line;
    r.text = line;
    out.push_back(r);
  }
  return out;
}

// The row's shape as a bf16 problem: neither rule reads the KV format, but the GPU's slots
// depend on whether the format takes the bf16 kernel or a split kernel (split_slots).
pacts_problem problem_of(const Row& r) {
  return spec::make_problem(r.batch, r.q_len, r.hq, r.hkv, r.d, r.page, r.batch * r.max_pages + 1,
                            r.max_pages);
}
bool split_kernel(const Row& r) { return r.format != PACTS_FORMAT_BF16; }

// The GPU plan as decode_hip.cpp makes it on NVIDIA, without the device.
spec::Result<Plan> gpu_plan(const pacts_problem& p, bool split, int32_t sms, bool invariant) {
  DeviceInfo dev;
  dev.is_host = false;
  dev.multiprocessors = sms;
  config::PlanRules rules;
  rules.variant = "hip-mma";
  rules.kernels = "the HIP kernels";
  rules.tile_keys = 16;
  rules.max_rows_per_item = 16;
  rules.automatic = [&](int64_t row_tiles, int64_t max_keys) {
    const int64_t slots = config::nvidia_blocks_per_sm(split, p.head_dim);
    return config::gpu_automatic_partitions(p, sms, slots, row_tiles, max_keys);
  };
  rules.workspace = [&](int64_t partitions, int64_t, uint64_t* bytes) {
    return config::workspace_bytes_for(p, partitions, bytes);
  };
  rules.items_below_2_31 = true;
  return config::make_plan(p, dev, 0, 0, invariant, rules);
}

TEST(PlanRules, TheFileCoversTheSets) {
  const std::vector<Row> all = rows();
  ASSERT_GE(all.size(), 4000u) << PACTS_PLANS_FILE;
  int split = 0, gpu_split = 0;
  for (const Row& r : all) split += r.host[1] > 1, gpu_split += r.gpu[1] > 1;
  EXPECT_GT(split, 500);  // both rules split many shapes and leave many unsplit
  EXPECT_GT(gpu_split, 500);
  EXPECT_LT(gpu_split, static_cast<int>(all.size()) - 500);
}

TEST(PlanRules, HostPlansAreThoseOfTheFile) {
  for (const Row& r : rows()) {
    const auto plan = kernels::plan(problem_of(r), host::device(r.workers), 0, 0, r.invariant != 0);
    ASSERT_TRUE(plan) << r.text << ": " << plan.status().message();
    EXPECT_EQ(plan.value().partition_size, r.host[0]) << r.text;
    EXPECT_EQ(plan.value().num_partitions, r.host[1]) << r.text;
    EXPECT_EQ(plan.value().rows_per_item, r.host[2]) << r.text;
  }
}

TEST(PlanRules, GpuPlansAreThoseOfTheFile) {
  for (const Row& r : rows()) {
    const auto plan = gpu_plan(problem_of(r), split_kernel(r), r.workers, r.invariant != 0);
    ASSERT_TRUE(plan) << r.text << ": " << plan.status().message();
    EXPECT_EQ(plan.value().partition_size, r.gpu[0]) << r.text;
    EXPECT_EQ(plan.value().num_partitions, r.gpu[1]) << r.text;
    EXPECT_EQ(plan.value().rows_per_item, r.gpu[2]) << r.text;
  }
}

// A change of planning policy, on purpose: PACTS_PLANS_WRITE=FILE writes the file's rows with the
// plans of today's rules (the comment lines kept), for review with git diff.
TEST(PlanRules, WriteTheFileOnRequest) {
  const char* path = std::getenv("PACTS_PLANS_WRITE");
  if (path == nullptr) GTEST_SKIP() << "PACTS_PLANS_WRITE not set";
  std::ifstream in(PACTS_PLANS_FILE);
  std::ostringstream out;
  for (std::string line; std::getline(in, line);)
    if (line.empty() || line[0] == '#') out << line << "\n";
  for (const Row& r : rows()) {
    const auto host = kernels::plan(problem_of(r), host::device(r.workers), 0, 0, r.invariant != 0);
    const auto gpu = gpu_plan(problem_of(r), split_kernel(r), r.workers, r.invariant != 0);
    ASSERT_TRUE(host && gpu) << r.text;
    out << r.batch << ' ' << r.q_len << ' ' << r.hq << ' ' << r.hkv << ' ' << r.d << ' ' << r.page << ' '
        << r.max_pages << ' ' << r.format << ' ' << r.invariant << ' ' << r.workers << ' '
        << host.value().partition_size << ' ' << host.value().num_partitions << ' '
        << host.value().rows_per_item << ' ' << gpu.value().partition_size << ' '
        << gpu.value().num_partitions << ' ' << gpu.value().rows_per_item << "\n";
  }
  std::ofstream(path) << out.str();
}

// Planted: the GPU rule's 90 % wave fill read as 80 % changes plans the file holds (the test
// above would fail on such a change).
TEST(PlanRules, AChangedRuleIsSeen) {
  int changed = 0;
  for (const Row& r : rows()) {
    if (r.invariant) continue;
    const pacts_problem p = problem_of(r);
    const int64_t rows = int64_t{p.q_len} * (p.num_q_heads / p.num_kv_heads);
    const int64_t units = int64_t{p.batch} * p.num_kv_heads * ((rows + 15) / 16);
    const int64_t keys = int64_t{p.max_pages_per_seq} * p.page_size;
    const int64_t slots =
        config::nvidia_blocks_per_sm(split_kernel(r), p.head_dim) * r.workers;
    int64_t parts = 1;  // the same rule at 80 %, without the batch-1 and busy corrections
    if (units < slots && keys > 64) {
      const int64_t limit = std::min<int64_t>((keys + 63) / 64, 64);
      for (parts = 1; parts < limit; ++parts)
        if (units * parts * 10 >= (units * parts + slots - 1) / slots * slots * 8) break;
    }
    changed += config::size_for(keys, parts, 16) != r.gpu[0];
  }
  EXPECT_GT(changed, 100);
}

}  // namespace
}  // namespace pacts::kernels
