// Case files (spec/case_files.md §1-§3): JSON that regenerates a case's exact bytes.
#include <pacts/conformance/case_file.h>
#include <pacts/conformance/input_limits.h>
#include <pacts/spec/validate.h>

#include "case_io.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cfloat>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <unistd.h>

namespace pacts::conformance {
namespace io {

std::string hex_code(uint32_t code) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%" PRIx32, code);
  return text;
}

std::string brief(const Json& value) {
  std::string s = value.dump();
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

Fields::Fields(const Json& object, std::string where, std::string path)
    : object_(object), where_(std::move(where)), path_(std::move(path)) {
  if (!object_.is_object())
    throw FieldError{where_ + ": " + (path_.empty() ? "the document" : path_) + " " +
                     brief(object_) + ": expected an object"};
}

std::string Fields::path_of(const char* key) const {
  return path_.empty() ? std::string(key) : path_ + "." + key;
}

void Fields::fail(const char* key, const Json& value, const std::string& why) const {
  throw FieldError{where_ + ": " + path_of(key) + " " + brief(value) + ": " + why};
}

const Json& Fields::get(const char* key) {
  const auto it = object_.find(key);
  if (it == object_.end()) throw FieldError{where_ + ": " + path_of(key) + ": missing"};
  used_.insert(key);
  return *it;
}

int64_t Fields::integer(const char* key, int64_t lo, int64_t hi) {
  const Json& v = get(key);
  const std::string range = "expected an integer from " + std::to_string(lo) + " to " +
                            std::to_string(hi);
  if (!v.is_number_integer()) fail(key, v, range);
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX) || static_cast<int64_t>(u) > hi ||
        static_cast<int64_t>(u) < lo)
      fail(key, v, range);
    return static_cast<int64_t>(u);
  }
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) fail(key, v, range);
  return x;
}

bool Fields::boolean(const char* key) {
  const Json& v = get(key);
  if (!v.is_boolean()) fail(key, v, "expected true or false");
  return v.get<bool>();
}

std::string Fields::string(const char* key) {
  const Json& v = get(key);
  if (!v.is_string()) fail(key, v, "expected a string");
  return v.get<std::string>();
}

float Fields::binary32(const char* key) {
  const Json& v = get(key);
  if (!v.is_number()) fail(key, v, "expected a number");
  const double x = v.get<double>();
  // Beyond FLT_MAX the conversion to float is undefined behaviour, not infinity.
  if (!std::isfinite(x) || std::fabs(x) > FLT_MAX) fail(key, v, "expected a finite binary32 number");
  return static_cast<float>(x);
}

uint64_t Fields::decimal_u64(const char* key) {
  const Json& v = get(key);
  const char* why = "expected a decimal string of a 64-bit unsigned integer (a JSON number "
                    "cannot hold every 64-bit value exactly)";
  if (!v.is_string()) fail(key, v, why);
  const std::string s = v.get<std::string>();
  if (s.empty() || s.size() > 20 || !std::all_of(s.begin(), s.end(), [](char ch) {
        return ch >= '0' && ch <= '9';
      }))
    fail(key, v, why);
  uint64_t x = 0;
  for (char ch : s) {
    const uint64_t digit = static_cast<uint64_t>(ch - '0');
    if (x > (UINT64_MAX - digit) / 10) fail(key, v, "exceeds 2^64 - 1");
    x = x * 10 + digit;
  }
  return x;
}

uint32_t Fields::hex_u32(const char* key) {
  const Json& v = get(key);
  const char* why = "expected a string \"0x\" followed by 1 to 8 hexadecimal digits";
  if (!v.is_string()) fail(key, v, why);
  const std::string s = v.get<std::string>();
  if (s.size() < 3 || s.size() > 10 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X')) fail(key, v, why);
  uint32_t x = 0;
  for (size_t i = 2; i < s.size(); ++i) {
    const char ch = s[i];
    uint32_t digit = 0;
    if (ch >= '0' && ch <= '9') digit = static_cast<uint32_t>(ch - '0');
    else if (ch >= 'a' && ch <= 'f') digit = static_cast<uint32_t>(ch - 'a' + 10);
    else if (ch >= 'A' && ch <= 'F') digit = static_cast<uint32_t>(ch - 'A' + 10);
    else fail(key, v, why);
    x = x << 4 | digit;
  }
  return x;
}

void Fields::finish() const {
  for (const auto& item : object_.items())
    if (!used_.count(item.key()))
      throw FieldError{where_ + ": " + path_of(item.key().c_str()) + ": unknown key"};
}

namespace {

std::string system_error(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

}  // namespace

spec::Status write_file_atomically(const std::string& path,
                                   std::initializer_list<std::span<const uint8_t>> parts) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  std::error_code ec;
  if (target.has_parent_path()) {
    fs::create_directories(target.parent_path(), ec);
    if (ec)
      return spec::invalid_argument("cannot create directory " + target.parent_path().string() +
                                    ": " + ec.message());
  }
  // Unique per process and call: concurrent writers of the same path never share a temporary.
  static std::atomic<uint64_t> counter{0};
  const std::string temp = path + ".tmp." + std::to_string(::getpid()) + "." +
                           std::to_string(counter.fetch_add(1));
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return spec::invalid_argument(system_error("cannot create", temp));
  for (const std::span<const uint8_t> bytes : parts) {
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const spec::Status s = spec::invalid_argument(system_error("cannot write", temp));
        ::close(fd);
        ::unlink(temp.c_str());
        return s;
      }
      done += static_cast<size_t>(n);
    }
  }
  // fsync before rename: after a crash the path holds the old file or the whole new one.
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const spec::Status s = spec::invalid_argument(system_error("cannot write", temp));
    ::unlink(temp.c_str());
    return s;
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const spec::Status s = spec::invalid_argument(system_error("cannot rename onto", path));
    ::unlink(temp.c_str());
    return s;
  }
  return spec::Status::ok();
}

spec::Status write_text_atomically(const std::string& path, const std::string& text) {
  return write_file_atomically(
      path, {std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size())});
}

bool readable_file_or_throw(const std::string& path) {
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(path, ec);
  if (st.type() == std::filesystem::file_type::not_found) return false;
  if (ec) throw FieldError{path + ": cannot examine: " + ec.message()};
  if (st.type() != std::filesystem::file_type::regular)
    throw FieldError{path + ": not a regular file (a directory, FIFO, socket or device): "
                            "accepted: a regular file"};
  return true;
}

spec::Result<std::string> read_text(const std::string& path) {
  try {
    readable_file_or_throw(path);  // a missing file: the open below names the system's reason
  } catch (const FieldError& e) {
    return spec::invalid_argument(e.message);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return spec::invalid_argument(system_error("cannot open", path));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return spec::invalid_argument(system_error("cannot read", path));
  return text.str();
}

}  // namespace io

namespace {

using io::Json;

Json shape_to_json(const CaseShape& s) {
  Json j;
  j["batch"] = s.batch;
  j["q_len"] = s.q_len;
  j["num_q_heads"] = s.num_q_heads;
  j["num_kv_heads"] = s.num_kv_heads;
  j["head_dim"] = s.head_dim;
  j["page_size"] = s.page_size;
  j["q_format"] = io::name_of(io::kFormatNames, s.q_format);
  j["kv_format"] = io::name_of(io::kFormatNames, s.kv_format);
  j["out_format"] = io::name_of(io::kFormatNames, s.out_format);
  j["k_scale_mode"] = io::name_of(io::kScaleModeNames, s.k_scale_mode);
  j["v_scale_mode"] = io::name_of(io::kScaleModeNames, s.v_scale_mode);
  j["nibble_order"] = io::name_of(io::kNibbleOrderNames, s.nibble_order);
  j["k_layout"] = io::name_of(io::kPoolLayoutNames, s.k_layout);
  j["v_layout"] = io::name_of(io::kPoolLayoutNames, s.v_layout);
  j["softcap"] = static_cast<double>(s.softcap);  // exact: every binary32 is a binary64
  j["window"] = s.window;
  j["sinks"] = s.sinks;
  j["lse"] = s.lse;
  j["max_context"] = s.max_context;
  j["contexts"] = s.contexts;
  j["extra_pages"] = s.extra_pages;
  j["q_gap"] = s.q_gap;
  j["out_gap"] = s.out_gap;
  // Written only when head-major: a token-major shape's file stays as it was before the keys
  // existed (spec/case_files.md §2.3).
  if (s.q_head_major) j["q_order"] = io::name_of(io::kRowOrderNames, s.q_head_major);
  if (s.out_head_major) j["out_order"] = io::name_of(io::kRowOrderNames, s.out_head_major);
  j["bt_extra_cols"] = s.bt_extra_cols;
  j["share_pages"] = s.share_pages;
  // Written only when set, like q_order: other shapes' files stay as they were.
  if (s.low_pages != 0) j["low_pages"] = s.low_pages;
  j["k_e8m0_lo"] = s.k_e8m0_lo;
  j["k_e8m0_hi"] = s.k_e8m0_hi;
  j["v_e8m0_lo"] = s.v_e8m0_lo;
  j["v_e8m0_hi"] = s.v_e8m0_hi;
  j["q_exponent"] = s.q_exponent;
  return j;
}

Json override_to_json(const Override& o) {
  Json j;
  j["tensor"] = io::name_of(io::kTensorNames, o.tensor);
  j["seq"] = o.seq;
  j["pos"] = o.pos;
  j["head"] = o.head;
  j["dim"] = o.dim;
  j["code"] = io::hex_code(o.code);
  return j;
}

// The problem fields a shape sets directly, checked by the spec's own validator (one copy of the
// rules): a case file must describe a problem that make_case can build (CaseData::allocate's
// precondition), never a refusal.
void check_shape_problem(const CaseShape& s, const std::string& where) {
  // The page counts make_case forms (an upper bound when contexts are drawn) must fit their
  // int32 fields.
  const int64_t P = s.page_size;
  int64_t pages = int64_t{s.extra_pages} + s.low_pages, longest = 0;
  if (s.contexts.empty()) {
    pages += int64_t{s.batch} * ((int64_t{s.max_context} + P - 1) / P);
    longest = s.max_context;
  }
  for (int32_t c : s.contexts) {
    pages += (c + P - 1) / P;
    longest = std::max<int64_t>(longest, c);
  }
  const int64_t columns = std::max<int64_t>((longest + P - 1) / P + s.bt_extra_cols, 1);
  if (pages > INT32_MAX)
    throw io::FieldError{where + ": shape: " + std::to_string(pages) +
                         " pages (contexts, extra_pages and low_pages) exceed num_pages' int32 range"};
  if (columns > INT32_MAX)
    throw io::FieldError{where + ": shape.bt_extra_cols " + std::to_string(s.bt_extra_cols) +
                         ": block-table columns exceed max_pages_per_seq's int32 range"};
  // The descriptor multiplies these int32 fields in int64: a shape whose products could overflow
  // is refused before it is built (the validator then bounds every span far below).
  const double row = static_cast<double>(s.head_dim) + std::max(s.q_gap, s.out_gap) + 32;
  const double pool_row = static_cast<double>(s.head_dim) + 96;  // padded rows and pages
  if (static_cast<double>(s.q_len) * s.num_q_heads * row * std::max(s.batch, 1) > 0x1p60 ||
      static_cast<double>(s.page_size) * s.num_kv_heads * pool_row * std::max<double>(pages, 1) >
          0x1p60)
    throw io::FieldError{where + ": shape: the query, output or pools span more than 2^60 "
                                 "elements; accepted: spans below 2^56 (spec/refusals.md)"};
  // The descriptor make_case builds (an upper bound when contexts are drawn), so that only the
  // shape's own fields can be refused, and the memory its buffers take is known before
  // make_case allocates them (spec/case_files.md §7).
  const pacts_problem p =
      shape_problem(s, static_cast<int32_t>(pages), static_cast<int32_t>(columns));
  const spec::Status status = spec::validate_problem(p);
  if (!status.is_ok())
    throw io::FieldError{where + ": shape describes a problem the spec refuses: " +
                         status.message()};
  if (const spec::Status s_mem = check_case_memory(p, where + ": shape"); !s_mem)
    throw io::FieldError{s_mem.message(), s_mem.code()};
}

CaseShape shape_from_json(const Json& j, const std::string& where) {
  io::Fields f(j, where, "shape");
  CaseShape s;
  s.batch = f.int32("batch", 0);
  s.q_len = f.int32("q_len", 1);
  s.num_q_heads = f.int32("num_q_heads", 1);
  s.num_kv_heads = f.int32("num_kv_heads", 1);
  s.head_dim = f.int32("head_dim", 1);
  s.page_size = f.int32("page_size", 1);
  s.q_format = f.name("q_format", io::kFormatNames);
  s.kv_format = f.name("kv_format", io::kFormatNames);
  s.out_format = f.name("out_format", io::kFormatNames);
  s.k_scale_mode = f.name("k_scale_mode", io::kScaleModeNames);
  s.v_scale_mode = f.name("v_scale_mode", io::kScaleModeNames);
  s.nibble_order = f.name("nibble_order", io::kNibbleOrderNames);
  s.k_layout = f.name("k_layout", io::kPoolLayoutNames);
  s.v_layout = f.name("v_layout", io::kPoolLayoutNames);
  s.softcap = f.binary32("softcap");
  s.window = f.int32("window", 0);
  s.sinks = f.boolean("sinks");
  s.lse = f.boolean("lse");
  s.max_context = f.int32("max_context", 0);
  const Json& contexts = f.get("contexts");
  if (!contexts.is_array()) f.fail("contexts", contexts, "expected an array of integers");
  for (size_t i = 0; i < contexts.size(); ++i) {
    const Json& c = contexts[i];
    if (!c.is_number_integer() || (c.is_number_unsigned() && c.get<uint64_t>() > INT32_MAX) ||
        (!c.is_number_unsigned() && (c.get<int64_t>() < 0 || c.get<int64_t>() > INT32_MAX)))
      throw io::FieldError{where + ": shape.contexts[" + std::to_string(i) + "] " + io::brief(c) +
                           ": expected an integer from 0 to 2147483647"};
    s.contexts.push_back(static_cast<int32_t>(c.get<int64_t>()));
  }
  if (!s.contexts.empty() && s.contexts.size() != static_cast<size_t>(s.batch))
    f.fail("contexts", contexts,
           "has " + std::to_string(s.contexts.size()) + " entries; expected none (drawn) or batch " +
               std::to_string(s.batch));
  s.extra_pages = f.int32("extra_pages", 0);
  s.q_gap = f.int32("q_gap", 0);
  s.out_gap = f.int32("out_gap", 0);
  s.q_head_major = f.has("q_order") && f.name("q_order", io::kRowOrderNames);
  s.out_head_major = f.has("out_order") && f.name("out_order", io::kRowOrderNames);
  s.bt_extra_cols = f.int32("bt_extra_cols", 0);
  s.share_pages = f.boolean("share_pages");
  s.low_pages = f.has("low_pages") ? f.int32("low_pages", 0) : 0;
  s.k_e8m0_lo = f.int32("k_e8m0_lo", 0, 255);
  s.k_e8m0_hi = f.int32("k_e8m0_hi", s.k_e8m0_lo, 255);
  s.v_e8m0_lo = f.int32("v_e8m0_lo", 0, 255);
  s.v_e8m0_hi = f.int32("v_e8m0_hi", s.v_e8m0_lo, 255);
  // 2^q_exponent must be a positive finite binary32 (it may become q_scale).
  s.q_exponent = f.int32("q_exponent", -149, 127);
  f.finish();
  check_shape_problem(s, where);
  return s;
}

Override override_from_json(const Json& j, const std::string& where, size_t index) {
  io::Fields f(j, where, "overrides[" + std::to_string(index) + "]");
  Override o;
  o.tensor = f.name("tensor", io::kTensorNames);
  o.seq = f.int32("seq", 0);
  o.pos = f.int32("pos", 0);
  o.head = f.int32("head", 0);
  o.dim = f.int32("dim", 0);
  o.code = f.hex_u32("code");
  f.finish();
  return o;
}

PlanHint hint_from_json(const Json& j, const std::string& where) {
  io::Fields f(j, where, "plan_hint");
  PlanHint h;
  h.kind = f.name("kind", io::kPlanHintNames);
  // automatic carries no value; a partition size or count is at least 1.
  h.value = h.kind == PlanHint::Kind::kAutomatic        ? f.int32("value", 0, 0)
            : h.kind == PlanHint::Kind::kBatchInvariant ? f.int32("value", 0)
                                                        : f.int32("value", 1);
  f.finish();
  return h;
}

CaseFile parse(const std::string& text, const std::string& where) {
  // Depth and repeated keys are checked before a document exists (spec/case_files.md §7).
  if (const spec::Status s = check_json_text(text, where); !s) throw io::FieldError{s.message()};
  Json root;
  try {
    root = Json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // syntax, and numbers beyond binary64 (1e999)
    throw io::FieldError{where + ": not JSON: " + e.what()};
  }
  io::Fields f(root, where, "");
  CaseFile file;
  // The version decides how the rest is read: check it first.
  file.version = f.int32("pacts_case_version");
  if (file.version != io::kCaseFileVersion)
    f.fail("pacts_case_version", root["pacts_case_version"],
           "this pacts reads case-file version " + std::to_string(io::kCaseFileVersion));
  if (f.string("spec_version").empty())
    f.fail("spec_version", root["spec_version"], "expected a spec version such as \"" +
                                                     std::string(io::kSpecVersion) + "\"");
  file.property = f.string("property");
  file.backend = f.string("backend");
  file.device = f.string("device");
  file.run_seed = f.decimal_u64("run_seed");
  file.detail = f.string("detail");
  file.hint = hint_from_json(f.get("plan_hint"), where);
  file.spec.seed = f.decimal_u64("seed");
  file.spec.shape = shape_from_json(f.get("shape"), where);
  const Json& overrides = f.get("overrides");
  if (!overrides.is_array()) f.fail("overrides", overrides, "expected an array of objects");
  for (size_t i = 0; i < overrides.size(); ++i)
    file.spec.overrides.push_back(override_from_json(overrides[i], where, i));
  f.finish();
  return file;
}

spec::Result<CaseFile> parse_or_refuse(const std::string& text, const std::string& where) {
  return io::refuse_on_throw(where, [&]() -> spec::Result<CaseFile> { return parse(text, where); });
}

}  // namespace

std::string to_json_text(const CaseFile& file) {
  Json j;
  // This writer writes the version it implements (file.version is what a reader found).
  j["pacts_case_version"] = io::kCaseFileVersion;
  j["spec_version"] = io::kSpecVersion;
  j["property"] = file.property;
  j["backend"] = file.backend;
  j["device"] = file.device;
  j["run_seed"] = std::to_string(file.run_seed);
  j["detail"] = file.detail;
  j["plan_hint"] = {{"kind", io::name_of(io::kPlanHintNames, file.hint.kind)},
                    {"value", file.hint.value}};
  j["seed"] = std::to_string(file.spec.seed);
  j["shape"] = shape_to_json(file.spec.shape);
  j["overrides"] = Json::array();
  for (const Override& o : file.spec.overrides) j["overrides"].push_back(override_to_json(o));
  // Invalid UTF-8 in a detail string is replaced, never a reason to lose the case.
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

spec::Result<CaseFile> from_json_text(const std::string& text) {
  return parse_or_refuse(text, "case file");
}

spec::Status write_case_file(const std::string& path, const CaseFile& file) {
  return io::write_text_atomically(path, to_json_text(file));
}

spec::Result<CaseFile> read_case_file(const std::string& path) {
  const std::string where = "case file " + path;
  return io::refuse_on_throw(where, [&]() -> spec::Result<CaseFile> {
    auto text = io::read_text(path);
    if (!text) return spec::invalid_argument("case file: " + text.status().message());
    return parse(text.value(), where);
  });
}

uint64_t fnv1a64(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

std::string fitted_file_name(const std::string& stem, const std::string& extension) {
  if (stem.size() <= kMaxFileStem) return stem + extension;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a64(stem)));
  return stem.substr(0, kMaxFileStem) + "~" + hex + extension;
}

}  // namespace pacts::conformance
