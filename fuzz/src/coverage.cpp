#include "coverage.h"

#include <pacts/spec/formats.h>

namespace pacts::fuzz {
namespace {

const char* layout_name(conformance::PoolLayout l) {
  switch (l) {
    case conformance::PoolLayout::kNHD: return "nhd";
    case conformance::PoolLayout::kHND: return "hnd";
    case conformance::PoolLayout::kXPackedK: return "x_packed_k";
    case conformance::PoolLayout::kDimMajorV: return "dim_major_v";
    case conformance::PoolLayout::kPadded: return "padded";
  }
  return "?";
}

// L is bucketed as the generator draws it (generators.cpp: 1, 2..4, 5..16).
std::string l_bucket(int32_t q_len) {
  if (q_len <= 1) return "1";
  if (q_len <= 4) return "2-4";
  return "5-16";
}

std::string options(const conformance::CaseShape& s) {
  std::string o;
  const auto add = [&](const char* x) { o += (o.empty() ? "" : "+") + std::string(x); };
  if (s.window > 0) add("window");
  if (s.sinks) add("sinks");
  if (s.softcap > 0) add("softcap");
  return o.empty() ? "none" : o;
}

}  // namespace

std::string CellValues::key() const {
  std::string k;
  for (size_t i = 0; i < kAxes.size(); ++i)
    k += (i ? " " : "") + std::string(kAxes[i]) + "=" + values[i];
  return k;
}

CellValues cell_of(const conformance::CaseShape& s) {
  CellValues c;
  c.values[0] = spec::format_name(s.kv_format);
  c.values[1] = std::string(layout_name(s.k_layout)) + "/" + layout_name(s.v_layout);
  c.values[2] = std::to_string(s.page_size);
  c.values[3] = std::to_string(s.head_dim);
  c.values[4] = std::to_string(s.num_q_heads / std::max(s.num_kv_heads, 1));
  c.values[5] = l_bucket(s.q_len);
  c.values[6] = options(s);
  return c;
}

void Coverage::add(const conformance::CaseShape& shape, int64_t n) {
  cells_[cell_of(shape).key()] += n;
}

void Coverage::add_cell(const std::string& key, int64_t n) { cells_[key] += n; }

void Coverage::merge(const Coverage& other) {
  for (const auto& [k, n] : other.cells_) cells_[k] += n;
}

int64_t Coverage::cases() const {
  int64_t n = 0;
  for (const auto& [k, c] : cells_) n += c;
  return n;
}

nlohmann::json Coverage::to_json() const {
  nlohmann::json axes = nlohmann::json::object();
  for (const char* a : kAxes) axes[a] = nlohmann::json::object();
  for (const auto& [key, n] : cells_) {
    // The key is "axis=value" pairs separated by single spaces; values contain no spaces.
    size_t at = 0;
    while (at < key.size()) {
      const size_t end = std::min(key.find(' ', at), key.size());
      const std::string pair = key.substr(at, end - at);
      const size_t eq = pair.find('=');
      if (eq != std::string::npos) {
        nlohmann::json& axis = axes[pair.substr(0, eq)];
        const std::string value = pair.substr(eq + 1);
        axis[value] = axis.value(value, int64_t{0}) + n;
      }
      at = end + 1;
    }
  }
  nlohmann::json table = nlohmann::json::object();
  for (const auto& [k, n] : cells_) table[k] = n;
  return {{"cells_covered", cells()}, {"cases", cases()}, {"axes", axes}, {"cells", table}};
}

}  // namespace pacts::fuzz
