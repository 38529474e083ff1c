// Private to conformance/src: what the case-file and exchange readers share (spec/case_files.md).
// Strict JSON field access with messages that name the key and the value, the names under which
// enums appear in files, and atomic file writes.
#pragma once

#include <pacts/conformance/backend.h>
#include <pacts/conformance/random_case.h>
#include <pacts/problem.h>
#include <pacts/spec/status.h>

#include <pacts/spec/version.h>

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <exception>
#include <initializer_list>
#include <new>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace pacts::conformance::io {

using Json = nlohmann::ordered_json;

// spec/case_files.md §2: the version this build writes and reads, and the spec it implements.
inline constexpr int kCaseFileVersion = 1;
inline constexpr int kExchangeVersion = 1;
inline constexpr const char* kSpecVersion = spec::kSpecVersion;  // <pacts/spec/version.h>

// Thrown inside the readers only, and turned into a spec::Status at their boundary.
struct FieldError {
  std::string message;
  spec::Code code = spec::Code::kInvalidArgument;
};

// A reader's boundary: runs `body` and turns whatever it throws into the typed refusal, so that
// nothing a user feeds a reader escapes it as an exception. A FieldError keeps its code; running
// out of memory is OutOfRange; any other exception of a library (a filesystem_error, a JSON
// library's error, a length_error) is InvalidArgument. Each names `where`.
template <class F>
auto refuse_on_throw(const std::string& where, F&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const FieldError& e) {
    return spec::Status(e.code, e.message);
  } catch (const std::bad_alloc&) {
    return spec::out_of_range(where + ": out of memory while reading it; accepted: what this "
                              "machine's memory holds (spec/case_files.md §7)");
  } catch (const std::exception& e) {
    return spec::invalid_argument(where + ": cannot be read: " + e.what());
  }
}

// Names of enum values as they appear in files: a table of (value, name).
template <class E, size_t N>
using NameTable = std::array<std::pair<E, const char*>, N>;

inline constexpr NameTable<pacts_scale_mode, 4> kScaleModeNames = {{
    {PACTS_SCALE_NONE, "none"},
    {PACTS_SCALE_PER_TENSOR, "per_tensor"},
    {PACTS_SCALE_PER_TOKEN, "per_token"},
    {PACTS_SCALE_MX_BLOCK, "mx_block"},
}};
inline constexpr NameTable<pacts_nibble_order, 2> kNibbleOrderNames = {{
    {PACTS_NIBBLE_LOW_FIRST, "low_first"},
    {PACTS_NIBBLE_HIGH_FIRST, "high_first"},
}};
inline constexpr NameTable<PoolLayout, 5> kPoolLayoutNames = {{
    {PoolLayout::kNHD, "nhd"},
    {PoolLayout::kHND, "hnd"},
    {PoolLayout::kXPackedK, "x_packed_k"},
    {PoolLayout::kDimMajorV, "dim_major_v"},
    {PoolLayout::kPadded, "padded"},
}};
// Row orders of the query and output (CaseShape::q_head_major / out_head_major).
inline constexpr NameTable<bool, 2> kRowOrderNames = {{{false, "token_major"}, {true, "head_major"}}};
inline constexpr NameTable<Override::Tensor, 6> kTensorNames = {{
    {Override::Tensor::kQ, "q"},
    {Override::Tensor::kK, "k"},
    {Override::Tensor::kV, "v"},
    {Override::Tensor::kKScale, "k_scale"},
    {Override::Tensor::kVScale, "v_scale"},
    {Override::Tensor::kSink, "sink"},
}};
inline constexpr NameTable<PlanHint::Kind, 4> kPlanHintNames = {{
    {PlanHint::Kind::kAutomatic, "automatic"},
    {PlanHint::Kind::kPartitionSize, "partition_size"},
    {PlanHint::Kind::kPartitions, "partitions"},
    {PlanHint::Kind::kBatchInvariant, "batch_invariant"},
}};
// Every storage format, named as spec::format_name names it.
inline constexpr NameTable<pacts_format, 9> kFormatNames = {{
    {PACTS_FORMAT_BF16, "bf16"},
    {PACTS_FORMAT_FP16, "fp16"},
    {PACTS_FORMAT_FP32, "fp32"},
    {PACTS_FORMAT_E4M3FN, "e4m3fn"},
    {PACTS_FORMAT_E4M3FNUZ, "e4m3fnuz"},
    {PACTS_FORMAT_E5M2, "e5m2"},
    {PACTS_FORMAT_E5M2FNUZ, "e5m2fnuz"},
    {PACTS_FORMAT_E2M1, "e2m1"},
    {PACTS_FORMAT_E8M0, "e8m0"},
}};

template <class E, size_t N>
const char* name_of(const NameTable<E, N>& table, E value) {
  for (const auto& [v, name] : table)
    if (v == value) return name;
  return "invalid";
}

template <class E, size_t N>
std::string accepted_names(const NameTable<E, N>& table) {
  std::string s;
  for (const auto& entry : table) s += (s.empty() ? "" : ", ") + std::string(entry.second);
  return s;
}

// "0x7fc00000": raw codes are written in hexadecimal (they are bit patterns).
std::string hex_code(uint32_t code);

// Reads the members of one JSON object. Every accessor marks its key as used and throws
// FieldError naming `where`, the key's path and the value on a missing key or a wrong value;
// finish() throws on keys nobody asked for (a misspelt key must not be silently ignored).
class Fields {
 public:
  // `where`: "case file", "problem.json"; `path`: the object's own path ("" for the root).
  Fields(const Json& object, std::string where, std::string path);

  const Json& get(const char* key);
  bool has(const char* key) const { return object_.contains(key); }
  int64_t integer(const char* key, int64_t lo, int64_t hi);
  int32_t int32(const char* key, int32_t lo = INT32_MIN, int32_t hi = INT32_MAX) {
    return static_cast<int32_t>(integer(key, lo, hi));
  }
  bool boolean(const char* key);
  std::string string(const char* key);
  // A finite number rounded to the nearest binary32 (its range is checked first).
  float binary32(const char* key);
  // A 64-bit unsigned integer written as a decimal string (JSON doubles cannot hold it).
  uint64_t decimal_u64(const char* key);
  // A 32-bit code written as "0x" and 1 to 8 hexadecimal digits.
  uint32_t hex_u32(const char* key);

  template <class E, size_t N>
  E name(const char* key, const NameTable<E, N>& table) {
    const Json& v = get(key);
    if (!v.is_string()) fail(key, v, "expected a string, one of " + accepted_names(table));
    const std::string s = v.get<std::string>();
    for (const auto& [value, n] : table)
      if (s == n) return value;
    fail(key, v, "unknown name; accepted: " + accepted_names(table));
  }

  void finish() const;
  [[noreturn]] void fail(const char* key, const Json& value, const std::string& why) const;
  std::string path_of(const char* key) const;
  const std::string& where() const { return where_; }

 private:
  const Json& object_;
  std::string where_, path_;
  std::set<std::string> used_;
};

// A short rendering of a JSON value for messages ("\"x\"", 12, [1,2,...]).
std::string brief(const Json& value);

// Writes the concatenation of `parts` to `path` atomically: a temporary file in the same
// directory, fsync, rename. Creates the parent directories. Errors name the path and the system's
// reason.
spec::Status write_file_atomically(const std::string& path,
                                   std::initializer_list<std::span<const uint8_t>> parts);
spec::Status write_text_atomically(const std::string& path, const std::string& text);
// The whole file, or InvalidArgument naming the path and the reason.
spec::Result<std::string> read_text(const std::string& path);

// Whether `path` names a file to read, without throwing: false when it does not exist; an
// io::FieldError naming the path when it exists but is no regular file (a FIFO would block the
// read, a device never end it) or cannot be examined (a loop of symbolic links).
bool readable_file_or_throw(const std::string& path);

}  // namespace pacts::conformance::io
