// pacts::kernels::plan: the plan is a function of the shape and the device's multiprocessor
// count only; partitions are whole tiles covering the key range; the workspace size; hints.
#include <pacts/decode.h>
#include <pacts/host.h>
#include <pacts/spec/validate.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

namespace pacts::kernels {
namespace {

pacts_problem shape(int32_t batch, int32_t q_len, int32_t hq, int32_t hkv, int32_t d, int32_t page,
                    int32_t max_pages) {
  return spec::make_problem(batch, q_len, hq, hkv, d, page, batch * max_pages + 1, max_pages);
}

DeviceInfo workers(int32_t n) { return host::device(n); }

// The invariants every plan keeps (pacts/decode.h).
void expect_well_formed(const pacts_problem& p, const Plan& plan) {
  const int64_t keys = int64_t{p.max_pages_per_seq} * p.page_size;
  const int64_t rows = int64_t{p.q_len} * (p.num_q_heads / p.num_kv_heads);
  EXPECT_GT(plan.tile_keys, 0);
  EXPECT_EQ(plan.partition_size % plan.tile_keys, 0);
  EXPECT_GE(plan.num_partitions, 1);
  EXPECT_GE(int64_t{plan.partition_size} * plan.num_partitions, keys);
  if (plan.num_partitions > 1) {
    EXPECT_LT(int64_t{plan.partition_size} * (plan.num_partitions - 1), keys)
        << "a partition that no context can reach";
    EXPECT_EQ(plan.workspace_bytes, uint64_t(p.batch) * p.num_kv_heads * plan.num_partitions *
                                        rows * (p.head_dim + 2) * 4);
  } else {
    EXPECT_EQ(plan.workspace_bytes, 0u);
    EXPECT_GE(plan.partition_size, keys);
    if (!plan.variant.ends_with("/invariant")) {  // its partition size is the fixed one
      EXPECT_LT(plan.partition_size - std::max<int64_t>(keys, 1), plan.tile_keys);  // >= 1 tile
    }
  }
  EXPECT_EQ(workspace_size(plan), plan.workspace_bytes);
  EXPECT_EQ(plan.rows_per_item, std::min<int64_t>(rows, 16));
  EXPECT_FALSE(plan.variant.empty());
}

TEST(Plan, WellFormedOverManyShapes) {
  for (int32_t b : {0, 1, 3, 64})
    for (int32_t l : {1, 4, 16})
      for (int32_t hkv : {1, 8})
        for (int32_t g : {1, 7, 64})
          for (int32_t page : {8, 256})
            for (int32_t m : {0, 1, 5, 300})
              for (int32_t n : {1, 2, 16}) {
                const pacts_problem p = shape(b, l, hkv * g, hkv, 128, page, m);
                auto plan_or = plan(p, workers(n));
                ASSERT_TRUE(plan_or.is_ok()) << plan_or.status().to_string();
                expect_well_formed(p, plan_or.value());
              }
}

// The plan sees no buffer and no context length; formats, layouts, scales and options do not
// change the split either: only the shape and the device.
TEST(Plan, DependsOnShapeAndDeviceOnly) {
  pacts_problem a = shape(2, 1, 32, 8, 128, 16, 512);
  pacts_problem b = a;
  b.kv_format = PACTS_FORMAT_E4M3FN;
  b.k_scale_mode = PACTS_SCALE_PER_TOKEN;
  b.k_scale_layout = {8 * 16, 16, 1, 0};
  b.q_format = PACTS_FORMAT_FP16;
  b.out_format = PACTS_FORMAT_FP32;
  b.window = 100;
  b.softcap = 30;
  b.has_sinks = 1;
  const pacts_pool_layout nhd = a.k_layout;
  b.k_layout = {nhd.s_page, nhd.s_head, nhd.s_tok, nhd.s_chunk, nhd.chunk, 0};
  ASSERT_TRUE(spec::validate_problem(b).is_ok()) << spec::validate_problem(b).to_string();
  const Plan pa = plan(a, workers(4)).value(), pb = plan(b, workers(4)).value();
  EXPECT_EQ(pa.partition_size, pb.partition_size);
  EXPECT_EQ(pa.num_partitions, pb.num_partitions);
  EXPECT_EQ(pa.rows_per_item, pb.rows_per_item);
  EXPECT_EQ(pa.workspace_bytes, pb.workspace_bytes);
  // Same inputs, same plan.
  const Plan again = plan(a, workers(4)).value();
  EXPECT_EQ(pa.partition_size, again.partition_size);
  EXPECT_EQ(pa.variant, again.variant);
}

// Short key ranges run unsplit; a long key range with few (sequence, KV head, row tile) units is
// split so that every worker gets several items; many units run unsplit.
TEST(Plan, AutomaticSplit) {
  EXPECT_EQ(plan(shape(1, 1, 8, 1, 128, 16, 16), workers(16)).value().num_partitions, 1);  // 256 keys
  const pacts_problem long_few = shape(1, 1, 8, 1, 128, 16, 512);                        // 8192 keys
  const Plan split = plan(long_few, workers(16)).value();
  EXPECT_EQ(split.num_partitions, 32);  // 4 per worker would be 64: capped by 256-key partitions
  EXPECT_EQ(split.partition_size, 256);
  EXPECT_EQ(plan(long_few, workers(4)).value().num_partitions, 16);  // 4 items per worker
  EXPECT_EQ(plan(long_few, workers(1)).value().num_partitions, 4);
  EXPECT_EQ(plan(shape(64, 1, 32, 8, 128, 16, 512), workers(16)).value().num_partitions, 1);
  EXPECT_LE(plan(shape(1, 1, 8, 1, 128, 256, 8000), workers(1000)).value().num_partitions, 64);
}

TEST(Plan, Hints) {
  const pacts_problem p = shape(2, 2, 8, 2, 64, 16, 10);  // 160 keys
  Plan a = plan(p, workers(2), 20).value();               // rounded up to whole tiles
  EXPECT_EQ(a.partition_size, 32);
  EXPECT_EQ(a.num_partitions, 5);
  a = plan(p, workers(2), 16).value();
  EXPECT_EQ(a.partition_size, 16);
  EXPECT_EQ(a.num_partitions, 10);
  a = plan(p, workers(2), 1000).value();  // beyond the key range: unsplit
  EXPECT_EQ(a.num_partitions, 1);
  EXPECT_EQ(a.workspace_bytes, 0u);
  a = plan(p, workers(2), 0, 3).value();
  EXPECT_EQ(a.partition_size, 64);
  EXPECT_EQ(a.num_partitions, 3);
  a = plan(p, workers(2), 0, 100).value();  // more partitions than tiles: one tile each
  EXPECT_EQ(a.partition_size, 16);
  EXPECT_EQ(a.num_partitions, 10);
  a = plan(p, workers(2), 0, 1).value();
  EXPECT_EQ(a.num_partitions, 1);
  for (const Plan& x : {plan(p, workers(2), 20).value(), plan(p, workers(2), 0, 3).value()})
    expect_well_formed(p, x);
  EXPECT_EQ(plan(p, workers(2), 16, 2).status().code(), spec::Code::kInvalidArgument);
  EXPECT_EQ(plan(p, workers(2), -1).status().code(), spec::Code::kInvalidArgument);
  EXPECT_EQ(plan(p, workers(2), 0, -4).status().code(), spec::Code::kInvalidArgument);
}

// The batch-invariant plan (spec/operator.md §11.1): 1024-key partitions or the caller's size,
// as many as the key range needs (one where it fits: the unsplit output is bitwise the merge of
// its one partial), the same partitioning of a sequence's keys whatever the batch, the block
// table's width and the device; not with a partition count.
TEST(Plan, BatchInvariant) {
  for (int32_t b : {1, 3, 64})
    for (int32_t m : {0, 1, 5, 64, 65, 300})
      for (int32_t n : {1, 2, 16}) {
        const pacts_problem p = shape(b, 1, 32, 8, 128, 16, m);
        const Plan a = plan(p, workers(n), 0, 0, true).value();
        expect_well_formed(p, a);
        const int64_t keys = int64_t{m} * 16;
        EXPECT_EQ(a.partition_size, 1024);
        EXPECT_EQ(a.num_partitions, std::max<int64_t>((keys + 1023) / 1024, 1));
        const Plan c = plan(p, workers(n), 1000, 0, true).value();  // a size of the caller's
        expect_well_formed(p, c);
        EXPECT_EQ(c.partition_size, 1008);
        EXPECT_EQ(c.num_partitions, std::max<int64_t>((keys + 1007) / 1008, 1));
        EXPECT_TRUE(a.variant.ends_with(a.num_partitions > 1 ? "/split/invariant" : "/direct/invariant"))
            << a.variant;
      }
  // The automatic plan of the same problems depends on the batch and the device.
  const pacts_problem one = shape(1, 1, 8, 1, 128, 16, 512), many = shape(64, 1, 8, 1, 128, 16, 512);
  EXPECT_NE(plan(one, workers(16)).value().num_partitions, plan(many, workers(16)).value().num_partitions);
  EXPECT_EQ(plan(one, workers(16), 0, 0, true).value().partition_size,
            plan(many, workers(1), 0, 0, true).value().partition_size);
  EXPECT_EQ(plan(one, workers(2), 0, 2, true).status().code(), spec::Code::kInvalidArgument);
  EXPECT_EQ(plan(one, workers(2), -16, 0, true).status().code(), spec::Code::kInvalidArgument);
}

TEST(Plan, RefusesWhatValidateRefuses) {
  pacts_problem p = shape(1, 1, 8, 1, 96, 16, 4);
  auto r = plan(p, workers(1));
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), spec::validate_problem(p).code());
  p = shape(1, 17, 8, 1, 64, 16, 4);
  EXPECT_EQ(plan(p, workers(1)).status().code(), spec::Code::kOutOfRange);
  DeviceInfo gpu;
  gpu.is_host = false;
  gpu.name = "gpu";
  EXPECT_EQ(plan(shape(1, 1, 8, 1, 64, 16, 4), gpu).status().code(), spec::Code::kNotSupported);
}

}  // namespace
}  // namespace pacts::kernels

// A GPU's UUID in the form nvidia-smi prints (reports record it, pacts::kernels::DeviceInfo).
TEST(DeviceInfo, GpuUuidTakesNvidiaSmisForm) {
  const unsigned char bytes[16] = {0x5a, 0x1b, 0x00, 0xff, 0x10, 0x20, 0x30, 0x40,
                                   0x50, 0x60, 0x70, 0x80, 0x90, 0xa0, 0xb0, 0x0c};
  EXPECT_EQ(pacts::kernels::format_gpu_uuid(bytes), "GPU-5a1b00ff-1020-3040-5060-708090a0b00c");
}
