// What every reader checks before it builds anything (spec/case_files.md §7).
#include <pacts/conformance/input_limits.h>
#include <pacts/spec/validate.h>

#include "case_io.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <limits>
#include <new>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

namespace pacts::conformance {
namespace {

// A message quotes at most this much of a key path (a key may be megabytes long).
constexpr size_t kMaxQuoted = 200;

std::string shortened(const std::string& s) {
  return s.size() <= kMaxQuoted ? s : s.substr(0, kMaxQuoted) + "...";
}

// Walks the text with the library's SAX parser, which keeps its own stack on the heap (never
// recursion), and stops at the first value nested too deep or the first repeated key. Nothing is
// built, so neither can exhaust the stack.
class TextCheck : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit TextCheck(const std::string& where) : where_(where) {}
  const std::string& error() const { return error_; }

  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool start_object(std::size_t) override { return open(false); }
  bool start_array(std::size_t) override { return open(true); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    Frame& f = frames_.back();
    f.key = k;
    if (!f.keys.insert(k).second)
      return fail(shortened(path_of(f)) + ": duplicate key; accepted: each key once in an object");
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    // Syntax, and numbers beyond binary64 (1e999).
    return fail(std::string("not JSON: ") + e.what());
  }

 private:
  struct Frame {
    bool array = false;
    size_t next_index = 0;      // arrays: the index of the next element
    std::string key;            // objects: the key of the value being read
    std::set<std::string> keys;  // objects: every key so far
    std::string path;           // the container's own path ("" for the document)
  };

  bool fail(const std::string& why) {
    error_ = where_ + ": " + why;
    return false;
  }
  // The path of the value about to be read in frame `f`.
  static std::string path_of(const Frame& f) {
    if (f.array) return f.path + "[" + std::to_string(f.next_index) + "]";
    return f.path.empty() ? f.key : f.path + "." + f.key;
  }
  std::string path_of_next() const { return frames_.empty() ? "" : path_of(frames_.back()); }
  bool value() {
    if (!frames_.empty() && frames_.back().array) ++frames_.back().next_index;
    return true;
  }
  bool open(bool array) {
    std::string path = path_of_next();
    if (frames_.size() >= static_cast<size_t>(kMaxJsonDepth)) {
      // Named by the member of the document that holds it ("run"), not by 64 levels of path.
      const bool member = !frames_.front().array;
      return fail((member ? shortened(frames_[1].path) : std::string("the document")) +
                  ": arrays and objects nested deeper than " + std::to_string(kMaxJsonDepth) +
                  " levels; accepted: at most " + std::to_string(kMaxJsonDepth));
    }
    value();
    frames_.push_back(Frame{array, 0, {}, {}, std::move(path)});
    return true;
  }
  bool close() {
    frames_.pop_back();
    return true;
  }

  const std::string& where_;
  std::string error_;
  std::vector<Frame> frames_;
};

// "8G" -> 8 * 2^30; nullopt unless digits and at most one suffix K, M, G or T.
std::optional<uint64_t> parse_bytes(const std::string& s) {
  size_t digits = 0;
  while (digits < s.size() && s[digits] >= '0' && s[digits] <= '9') ++digits;
  if (digits == 0 || s.size() > digits + 1) return std::nullopt;
  int shift = 0;
  if (s.size() == digits + 1) {
    const std::string suffixes = "KMGT";
    const size_t at =
        suffixes.find(static_cast<char>(std::toupper(static_cast<unsigned char>(s.back()))));
    if (at == std::string::npos) return std::nullopt;
    shift = 10 * static_cast<int>(at + 1);
  }
  uint64_t x = 0;
  for (size_t i = 0; i < digits; ++i) {
    const uint64_t d = static_cast<uint64_t>(s[i] - '0');
    if (x > (std::numeric_limits<uint64_t>::max() - d) / 10) return std::nullopt;
    x = x * 10 + d;
  }
  if (x > (std::numeric_limits<uint64_t>::max() >> shift)) return std::nullopt;
  return x << shift;
}

// The memory limit of this process's control group, when one is set (v2, then v1).
std::optional<uint64_t> cgroup_limit() {
  for (const char* file :
       {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream in(file);
    std::string text;
    if (in >> text)
      if (auto bytes = parse_bytes(text)) return bytes;  // "max" (no limit) is not a number
  }
  return std::nullopt;
}

std::string gib(uint64_t bytes) {
  return std::to_string(bytes >> 30) + " GiB";
}

}  // namespace

spec::Status check_json_text(const std::string& text, const std::string& where) {
  TextCheck check(where);
  try {
    if (!nlohmann::json::sax_parse(text, &check) || !check.error().empty())
      return spec::invalid_argument(check.error().empty() ? where + ": not JSON" : check.error());
  } catch (const std::bad_alloc&) {
    return spec::invalid_argument(where + ": out of memory while checking the JSON text");
  } catch (const std::exception& e) {
    return spec::invalid_argument(where + ": not JSON: " + e.what());
  }
  return spec::Status::ok();
}

spec::Result<std::string> read_json_file(const std::string& path) {
  auto text = io::read_text(path);
  if (!text) return text.status();
  if (auto s = check_json_text(text.value(), path); !s) return s;
  return text;
}

spec::Result<MemoryBudget> case_memory_budget() {
  if (const char* env = std::getenv(kMemoryBudgetVariable)) {
    const auto bytes = parse_bytes(env);
    if (!bytes)
      return spec::invalid_argument(std::string(kMemoryBudgetVariable) + " \"" + shortened(env) +
                                    "\": expected a byte count, or a number with the suffix K, "
                                    "M, G or T (powers of 1024), such as 8G");
    return MemoryBudget{*bytes, std::string(kMemoryBudgetVariable) + "=" + shortened(env)};
  }
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  uint64_t memory = uint64_t{16} << 30;  // unknown: assume 16 GiB
  if (pages > 0 && page > 0) memory = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
  std::string what = gib(memory) + " of physical memory";
  if (const auto limit = cgroup_limit(); limit && *limit < memory) {
    memory = *limit;
    what = gib(memory) + " memory limit of this control group";
  }
  return MemoryBudget{memory / 4, "a quarter of the " + what + "; " +
                                      kMemoryBudgetVariable + "=BYTES sets another"};
}

uint64_t case_buffer_bytes(const pacts_problem& p) {
  const spec::RequiredExtents e = spec::required_extents(p);
  return e.q + e.k + e.v + e.k_scale + e.v_scale + e.block_table + e.context_lens + e.sinks +
         e.out + e.lse;
}

spec::Status check_case_memory(const pacts_problem& p, const std::string& where) {
  auto budget = case_memory_budget();
  if (!budget)
    return spec::Status(budget.status().code(), where + ": " + budget.status().message());
  const uint64_t total = case_buffer_bytes(p);
  if (total <= budget.value().bytes) return spec::Status::ok();
  // The largest buffer and the fields that size it, so the message says what to change.
  const spec::RequiredExtents e = spec::required_extents(p);
  const std::array<std::pair<uint64_t, const char*>, 10> buffers = {{
      {e.q, "query (batch, q_len, num_q_heads, head_dim, q_layout)"},
      {e.k, "k_pages (num_pages, num_kv_heads, page_size, head_dim, k_layout)"},
      {e.v, "v_pages (num_pages, num_kv_heads, page_size, head_dim, v_layout)"},
      {e.k_scale, "k_scale (num_pages, num_kv_heads, page_size, k_scale_layout)"},
      {e.v_scale, "v_scale (num_pages, num_kv_heads, page_size, v_scale_layout)"},
      {e.block_table, "block_table (batch, block_table_stride, max_pages_per_seq)"},
      {e.context_lens, "context_lens (batch)"},
      {e.sinks, "sinks (num_q_heads)"},
      {e.out, "out (batch, q_len, num_q_heads, head_dim, out_layout)"},
      {e.lse, "lse (batch, q_len, num_q_heads, lse_layout)"},
  }};
  const auto largest = *std::max_element(
      buffers.begin(), buffers.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return spec::out_of_range(where + ": the case's buffers take " + std::to_string(total) +
                            " bytes, the largest " + largest.second + " " +
                            std::to_string(largest.first) + " bytes; accepted: at most the memory "
                            "budget of " + std::to_string(budget.value().bytes) + " bytes (" +
                            budget.value().source + ")");
}

}  // namespace pacts::conformance
