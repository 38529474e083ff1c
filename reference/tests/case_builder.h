// Test problems for the reference tests: a descriptor plus host buffers sized to exactly the
// extents the layouts reach, and writers that place values by (page, head, token, d) with the
// layout formulas of spec/operator.md §3. Anything a test does not write keeps the allocation's
// fill: zeros (a clean run) or the format's NaN codes (a poisoned run, spec/contract.md §1).
#pragma once

#include <pacts/problem.h>
#include <pacts/reference/decode.h>
#include <pacts/spec/formats.h>
#include <pacts/spec/validate.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <vector>

namespace pacts::reference::testing {

enum class Pool { kK, kV };
enum class Fill { kZero, kPoison };

// A code whose value is NaN where the format has one (e2m1 has none: its largest magnitude, -6,
// which still changes any output it reaches).
inline uint32_t poison_code(pacts_format f) {
  switch (f) {
    case PACTS_FORMAT_BF16: return 0xFFFF;
    case PACTS_FORMAT_FP16: return 0xFFFF;
    case PACTS_FORMAT_E4M3FN: return 0xFF;
    case PACTS_FORMAT_E4M3FNUZ: return 0x80;
    case PACTS_FORMAT_E5M2: return 0xFF;
    case PACTS_FORMAT_E5M2FNUZ: return 0x80;
    case PACTS_FORMAT_E2M1: return 0xFF;  // both nibbles -6
    default: return 0xFF;
  }
}

// The bytes [offset, offset + n) of `data`; throws (failing the test) when they are not all
// inside it, so a writer bug never scribbles past an exactly sized allocation.
inline void check_bytes(const std::vector<uint8_t>& data, int64_t offset, size_t n) {
  if (offset < 0 || static_cast<size_t>(offset) + n > data.size())
    throw std::out_of_range("case_builder: access outside the buffer");
}
inline uint8_t* bytes_at(std::vector<uint8_t>& data, int64_t offset, size_t n) {
  check_bytes(data, offset, n);
  return data.data() + offset;
}
inline const uint8_t* bytes_at(const std::vector<uint8_t>& data, int64_t offset, size_t n) {
  check_bytes(data, offset, n);
  return data.data() + offset;
}

class Case {
 public:
  explicit Case(const pacts_problem& p) : problem(p) {}

  pacts_problem problem;
  std::vector<uint8_t> q, k, v, k_scale, v_scale, block_table, context_lens, sinks, out, lse;

  // Sizes every buffer to spec::required_extents. kPoison fills pools and Q with NaN codes,
  // per-token scales with NaN, e8m0 bytes with 0xFF (NaN) and the block table with -1.
  void allocate(Fill fill) {
    const spec::RequiredExtents e = spec::required_extents(problem);
    const bool poison = fill == Fill::kPoison;
    fill_codes(q, e.q, problem.q_format, poison);
    fill_codes(k, e.k, problem.kv_format, poison);
    fill_codes(v, e.v, problem.kv_format, poison);
    fill_scales(k_scale, e.k_scale, problem.k_scale_mode, poison);
    fill_scales(v_scale, e.v_scale, problem.v_scale_mode, poison);
    block_table.assign(e.block_table, poison ? 0xFF : 0x00);
    context_lens.assign(e.context_lens, 0);
    sinks.assign(e.sinks, 0);
    out.assign(e.out, 0);
    lse.assign(e.lse, 0);
  }

  pacts_buffers buffers() {
    return {view(q), view(k), view(v), view(k_scale), view(v_scale), view(block_table),
            view(context_lens), view(sinks), view(out), view(lse)};
  }

  spec::Result<Output> run() { return decode(problem, buffers()); }

  // --- Q ---------------------------------------------------------------------------------
  void set_q_code(int64_t b, int64_t i, int64_t h, int64_t d, uint32_t code) {
    const pacts_row_layout& l = problem.q_layout;
    put_code(q, problem.q_format, b * l.s_batch + i * l.s_tok + h * l.s_head + d, code);
  }
  void set_q(int64_t b, int64_t i, int64_t h, int64_t d, double x) {
    set_q_code(b, i, h, d, spec::encode(problem.q_format, x, spec::Overflow::kSaturate));
  }

  // --- K and V pools ---------------------------------------------------------------------
  void set_kv_code(Pool pool, int64_t page, int64_t head, int64_t tok, int64_t d, uint32_t code) {
    const pacts_pool_layout& l = pool == Pool::kK ? problem.k_layout : problem.v_layout;
    std::vector<uint8_t>& data = pool == Pool::kK ? k : v;
    const int64_t row = page * l.s_page + head * l.s_head + tok * l.s_tok;
    if (problem.kv_format != PACTS_FORMAT_E2M1) {
      put_code(data, problem.kv_format, row + (d / l.chunk) * l.s_chunk + d % l.chunk, code);
      return;
    }
    const int64_t byte_index = d / 2;
    uint8_t& byte = data.at(static_cast<size_t>(row + (byte_index / l.chunk) * l.s_chunk +
                                                 byte_index % l.chunk));
    const bool even_low = problem.nibble_order == PACTS_NIBBLE_LOW_FIRST;
    const bool low = (d % 2 == 0) == even_low;
    byte = low ? static_cast<uint8_t>((byte & 0xF0u) | (code & 0xFu))
               : static_cast<uint8_t>((byte & 0x0Fu) | ((code & 0xFu) << 4));
  }
  void set_kv(Pool pool, int64_t page, int64_t head, int64_t tok, int64_t d, double x) {
    set_kv_code(pool, page, head, tok, d,
                spec::encode(problem.kv_format, x, spec::Overflow::kSaturate));
  }
  void set_token_scale(Pool pool, int64_t page, int64_t head, int64_t tok, float scale) {
    const pacts_scale_layout& l = pool == Pool::kK ? problem.k_scale_layout : problem.v_scale_layout;
    std::vector<uint8_t>& data = pool == Pool::kK ? k_scale : v_scale;
    const int64_t index = page * l.s_page + head * l.s_head + tok * l.s_tok;
    std::memcpy(bytes_at(data, index * 4, sizeof scale), &scale, sizeof scale);
  }
  void set_block_scale(Pool pool, int64_t page, int64_t head, int64_t tok, int64_t block,
                       uint8_t e8m0) {
    const pacts_scale_layout& l = pool == Pool::kK ? problem.k_scale_layout : problem.v_scale_layout;
    std::vector<uint8_t>& data = pool == Pool::kK ? k_scale : v_scale;
    data.at(static_cast<size_t>(page * l.s_page + head * l.s_head + tok * l.s_tok +
                                block * l.s_block)) = e8m0;
  }

  // --- per-sequence data -----------------------------------------------------------------
  void set_page(int64_t b, int64_t column, int32_t page) {
    put_i32(block_table, b * problem.block_table_stride + column, page);
  }
  int32_t page_of(int64_t b, int64_t column) const {
    int32_t page = 0;
    const int64_t index = b * problem.block_table_stride + column;
    std::memcpy(&page, bytes_at(block_table, 4 * index, sizeof page), sizeof page);
    return page;
  }
  void set_context(int64_t b, int32_t ctx) { put_i32(context_lens, b, ctx); }
  void set_sink(int64_t h, float sink) {
    std::memcpy(bytes_at(sinks, 4 * h, sizeof sink), &sink, sizeof sink);
  }

  // Logical token j of sequence b, through the block table already written.
  void set_key(Pool pool, int64_t b, int64_t j, int64_t head, int64_t d, double x) {
    set_kv(pool, page_of(b, j / problem.page_size), head, j % problem.page_size, d, x);
  }

 private:
  // The bytes [offset, offset + n) of `data`; throws (failing the test) when they are not all
  // inside it, so a writer bug never scribbles past an exactly sized allocation.

  static pacts_view view(std::vector<uint8_t>& bytes) {
    if (bytes.empty()) return {nullptr, 0};
    return {bytes.data(), bytes.size()};
  }

  static void put_code(std::vector<uint8_t>& data, pacts_format f, int64_t index, uint32_t code) {
    const int bytes = spec::element_bytes(f);
    if (bytes == 1) {
      data.at(static_cast<size_t>(index)) = static_cast<uint8_t>(code);
      return;
    }
    const auto c = static_cast<uint16_t>(code);
    std::memcpy(bytes_at(data, index * 2, sizeof c), &c, sizeof c);
  }

  static void put_i32(std::vector<uint8_t>& data, int64_t index, int32_t x) {
    std::memcpy(bytes_at(data, 4 * index, sizeof x), &x, sizeof x);
  }

  static void fill_codes(std::vector<uint8_t>& data, uint64_t bytes, pacts_format f, bool poison) {
    data.assign(bytes, 0);
    if (!poison) return;
    const uint32_t code = poison_code(f);
    if (spec::element_bytes(f) == 2) {
      for (uint64_t i = 0; i + 1 < bytes; i += 2) put_code(data, f, static_cast<int64_t>(i / 2), code);
    } else {
      std::fill(data.begin(), data.end(), static_cast<uint8_t>(code));
    }
  }

  static void fill_scales(std::vector<uint8_t>& data, uint64_t bytes, pacts_scale_mode mode,
                          bool poison) {
    data.assign(bytes, 0);
    if (!poison) return;
    if (mode == PACTS_SCALE_MX_BLOCK) {
      std::fill(data.begin(), data.end(), uint8_t{0xFF});
      return;
    }
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (uint64_t i = 0; i + 3 < bytes; i += 4) std::memcpy(&data[i], &nan, sizeof nan);
  }
};

}  // namespace pacts::reference::testing
