// The peers' figures on an H200 (docs/bench.md, "The peers"; measured 2026-11-29 with the same
// method: bf16, D 128, Hkv 8, L 1, graph replays, L2 flushed, medians): the best paged peer (XQA,
// FlashInfer CUDA-core decode or FlexAttention paged) per shape of the `peers` set, so pacts'
// rows sit beside them. Reference data, not expectations: nothing is asserted against it.
#include "internal.h"

namespace pacts::bench {
namespace {

struct PeerFigure {
  int32_t batch, context, group, page;
  double us, tbs;
};

constexpr PeerFigure kBestPagedPeerH200[] = {
    {1, 1024, 1, 16, 12.7, 0.33},
    {8, 1024, 1, 16, 20.8, 1.62},
    {32, 1024, 1, 16, 49.9, 2.69},
    {128, 1024, 1, 16, 143.3, 3.75},
    {1, 4096, 1, 16, 17.0, 0.99},
    {8, 4096, 1, 16, 51.3, 2.62},
    {32, 4096, 1, 16, 139.6, 3.85},
    {128, 4096, 1, 16, 509.5, 4.21},
    {1, 16384, 1, 16, 34.8, 1.93},
    {8, 16384, 1, 16, 139.7, 3.84},
    {32, 16384, 1, 16, 491.6, 4.37},
    {128, 16384, 1, 16, 1967.6, 4.37},
    {1, 1024, 1, 64, 12.0, 0.35},
    {8, 1024, 1, 64, 20.0, 1.68},
    {32, 1024, 1, 64, 48.7, 2.76},
    {128, 1024, 1, 64, 141.6, 3.79},
    {1, 4096, 1, 64, 16.8, 1.00},
    {8, 4096, 1, 64, 49.5, 2.71},
    {32, 4096, 1, 64, 139.6, 3.85},
    {128, 4096, 1, 64, 497.8, 4.31},
    {1, 16384, 1, 64, 33.9, 1.98},
    {8, 16384, 1, 64, 139.6, 3.85},
    {32, 16384, 1, 64, 494.2, 4.35},
    {128, 16384, 1, 64, 1905.0, 4.51},
    {1, 1024, 8, 16, 12.9, 0.33},
    {8, 1024, 8, 16, 21.3, 1.57},
    {32, 1024, 8, 16, 50.1, 2.68},
    {128, 1024, 8, 16, 160.8, 3.34},
    {1, 4096, 8, 16, 17.6, 0.95},
    {8, 4096, 8, 16, 51.5, 2.61},
    {32, 4096, 8, 16, 161.1, 3.33},
    {128, 4096, 8, 16, 591.5, 3.63},
    {1, 16384, 8, 16, 34.5, 1.95},
    {8, 16384, 8, 16, 167.0, 3.21},
    {32, 16384, 8, 16, 607.7, 3.53},
    {128, 16384, 8, 16, 2328.9, 3.69},
    {1, 1024, 8, 64, 14.6, 0.29},
    {8, 1024, 8, 64, 27.6, 1.22},
    {32, 1024, 8, 64, 58.8, 2.28},
    {128, 1024, 8, 64, 144.7, 3.71},
    {1, 4096, 8, 64, 18.8, 0.90},
    {8, 4096, 8, 64, 63.0, 2.13},
    {32, 4096, 8, 64, 184.4, 2.91},
    {128, 4096, 8, 64, 516.1, 4.16},
    {1, 16384, 8, 64, 40.5, 1.66},
    {8, 16384, 8, 64, 139.0, 3.86},
    {32, 16384, 8, 64, 499.5, 4.30},
    {128, 16384, 8, 64, 1906.3, 4.51},
};

}  // namespace

bool h200_best_peer(const Shape& s, double& us, double& tbs) {
  if (s.set != "peers") return false;
  for (const PeerFigure& f : kBestPagedPeerH200)
    if (f.batch == s.batch && f.context == s.context && f.group == s.group() &&
        f.page == s.page_size) {
      us = f.us;
      tbs = f.tbs;
      return true;
    }
  return false;
}

}  // namespace pacts::bench
