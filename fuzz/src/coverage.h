// Coverage of the feature space: cells of format x layout x page size x D x G x L x
// option, with the cases each got. A cell key is readable on its own, e.g.
// "kv=e4m3fn layout=nhd/hnd page=16 D=128 G=8 L=1 opt=window+sinks".
#pragma once

#include <pacts/conformance/generators.h>

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <map>
#include <string>

namespace pacts::fuzz {

// The axes, in key order.
inline constexpr std::array<const char*, 7> kAxes = {"kv", "layout", "page", "D", "G", "L", "opt"};

struct CellValues {
  std::array<std::string, kAxes.size()> values;
  std::string key() const;  // "kv=... layout=... ..."
};
CellValues cell_of(const conformance::CaseShape& shape);

// Cases per cell; per-axis marginals are derived from it.
class Coverage {
 public:
  void add(const conformance::CaseShape& shape, int64_t n = 1);
  void add_cell(const std::string& key, int64_t n);  // for merge: the key as written
  void merge(const Coverage& other);
  int64_t cells() const { return static_cast<int64_t>(cells_.size()); }
  int64_t cases() const;
  const std::map<std::string, int64_t>& table() const { return cells_; }
  // {"cells_covered": n, "cases": n, "axes": {axis: {value: cases}}, "cells": {key: cases}}
  nlohmann::json to_json() const;

 private:
  std::map<std::string, int64_t> cells_;
};

}  // namespace pacts::fuzz
