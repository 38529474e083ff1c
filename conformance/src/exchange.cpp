// The exchange format (spec/case_files.md §4-§6): problem.json plus one .npy per tensor.
#include <pacts/conformance/exchange.h>
#include <pacts/conformance/input_limits.h>
#include <pacts/spec/formats.h>
#include <pacts/spec/validate.h>

#include "case_io.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <tuple>

namespace pacts::conformance {

// .npy files hold little-endian data and are written and read by copying memory.
static_assert(std::endian::native == std::endian::little, "pacts assumes a little-endian host");

namespace {

namespace fs = std::filesystem;
using io::Json;

// ---- .npy --------------------------------------------------------------------------------------

constexpr char kNpyMagic[] = "\x93NUMPY";  // 6 bytes, then major and minor version

struct NpyTypeInfo {
  NpyType type;
  const char* descr;
  size_t bytes;
  const char* numpy;  // the NumPy dtype name, for messages
};
constexpr std::array<NpyTypeInfo, 5> kNpyTypes = {{
    {NpyType::kU8, "|u1", 1, "uint8"},
    {NpyType::kU16, "<u2", 2, "uint16"},
    {NpyType::kI32, "<i4", 4, "int32"},
    {NpyType::kF32, "<f4", 4, "float32"},
    {NpyType::kF64, "<f8", 8, "float64"},
}};

const NpyTypeInfo& info(NpyType t) {
  for (const NpyTypeInfo& i : kNpyTypes)
    if (i.type == t) return i;
  return kNpyTypes[0];
}

std::string shape_tuple(const std::vector<uint64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

// NumPy's limits on an array: at most 64 dimensions, and a size in bytes below 2^63 counted over
// the nonzero dimensions (so a shape whose element count wraps modulo 2^64 is never accepted,
// even beside a zero dimension).
constexpr size_t kNpyMaxDims = 64;
constexpr uint64_t kNpyMaxBytes = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());

// The bytes `shape` of `item`-byte elements spans, or nullopt beyond NumPy's limits.
std::optional<uint64_t> npy_bytes(const std::vector<uint64_t>& shape, size_t item) {
  if (shape.size() > kNpyMaxDims) return std::nullopt;
  uint64_t nonzero = item;
  bool empty = false;
  for (uint64_t d : shape) {
    if (d == 0) {
      empty = true;
      continue;
    }
    if (nonzero > kNpyMaxBytes / d) return std::nullopt;
    nonzero *= d;
  }
  return empty ? 0 : nonzero;
}

std::span<const uint8_t> bytes_of(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

template <class T>
std::span<const uint8_t> bytes_of(const std::vector<T>& v) {
  return {reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(T)};
}

spec::Status write_npy_raw(const std::string& path, NpyType type,
                           const std::vector<uint64_t>& shape, std::span<const uint8_t> data) {
  const std::optional<uint64_t> bytes = npy_bytes(shape, info(type).bytes);
  if (!bytes || *bytes != data.size())
    return spec::invalid_argument(path + ": " + std::to_string(data.size()) +
                                  " bytes do not hold shape " + shape_tuple(shape) + " of " +
                                  info(type).numpy);
  std::string header = "{'descr': '" + std::string(info(type).descr) +
                       "', 'fortran_order': False, 'shape': " + shape_tuple(shape) + ", }";
  // Magic (6) + version (2) + length (2) + header + '\n', padded with spaces to a multiple of 64.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::string preamble(kNpyMagic, 6);
  preamble += '\x01';
  preamble += '\x00';
  preamble += static_cast<char>(header.size() & 0xFF);
  preamble += static_cast<char>(header.size() >> 8);
  preamble += header;
  return io::write_file_atomically(path, {bytes_of(preamble), data});
}

// A reader for the Python literal of a .npy header: {'key': value, ...} with string, bool and
// tuple-of-integer values.
class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& path) : s_(text), path_(path) {}

  NpyArray parse() {
    NpyArray a;
    bool have_descr = false, have_order = false, have_shape = false, fortran = false;
    expect('{');
    while (!peek('}')) {
      const std::string key = string_literal();
      expect(':');
      if (key == "descr" && !have_descr) {
        const std::string descr = string_literal();
        have_descr = true;
        a.type = type_of(descr);
      } else if (key == "fortran_order" && !have_order) {
        fortran = boolean();
        have_order = true;
      } else if (key == "shape" && !have_shape) {
        a.shape = tuple();
        have_shape = true;
      } else {
        fail("unexpected or repeated header key '" + key + "'");
      }
      if (!peek('}')) expect(',');
    }
    expect('}');
    if (!have_descr || !have_order || !have_shape)
      fail("the header lacks one of 'descr', 'fortran_order', 'shape'");
    if (fortran && a.shape.size() > 1)
      fail("fortran_order True with " + std::to_string(a.shape.size()) +
           " dimensions: write C order (numpy.ascontiguousarray)");
    return a;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw io::FieldError{path_ + ": .npy header: " + why};
  }
  void skip() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n')) ++i_;
  }
  bool peek(char c) {
    skip();
    return i_ < s_.size() && s_[i_] == c;
  }
  void expect(char c) {
    if (!peek(c)) fail(std::string("expected '") + c + "' at offset " + std::to_string(i_));
    ++i_;
  }
  std::string string_literal() {
    skip();
    if (i_ >= s_.size() || (s_[i_] != '\'' && s_[i_] != '"'))
      fail("expected a string at offset " + std::to_string(i_));
    const char quote = s_[i_++];
    const size_t end = s_.find(quote, i_);
    if (end == std::string::npos) fail("unterminated string");
    std::string out = s_.substr(i_, end - i_);
    i_ = end + 1;
    return out;
  }
  bool boolean() {
    skip();
    if (s_.compare(i_, 4, "True") == 0) {
      i_ += 4;
      return true;
    }
    if (s_.compare(i_, 5, "False") == 0) {
      i_ += 5;
      return false;
    }
    fail("expected True or False at offset " + std::to_string(i_));
  }
  std::vector<uint64_t> tuple() {
    std::vector<uint64_t> dims;
    expect('(');
    while (!peek(')')) {
      skip();
      uint64_t x = 0;
      const size_t start = i_;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
        if (x > (std::numeric_limits<uint64_t>::max() - 9) / 10) fail("shape dimension too large");
        x = x * 10 + static_cast<uint64_t>(s_[i_++] - '0');
      }
      if (i_ == start) fail("expected a dimension at offset " + std::to_string(i_));
      dims.push_back(x);
      if (dims.size() > kNpyMaxDims)
        fail("shape: more than " + std::to_string(kNpyMaxDims) +
             " dimensions; accepted: at most " + std::to_string(kNpyMaxDims) + " (NumPy's limit)");
      if (!peek(')')) expect(',');
    }
    expect(')');
    return dims;
  }
  NpyType type_of(const std::string& descr) const {
    if (descr == "<u1") return NpyType::kU8;  // NumPy writes '|u1'; '<u1' means the same
    for (const NpyTypeInfo& t : kNpyTypes)
      if (descr == t.descr) return t.type;
    fail("dtype '" + descr + "': accepted are '|u1' (uint8), '<u2' (uint16), '<i4' (int32), "
         "'<f4' (float32), '<f8' (float64), little-endian");
  }

  const std::string& s_;
  const std::string& path_;
  size_t i_ = 0;
};

// An open .npy file whose header is read and checked: its data (`bytes` of them, exactly what the
// file holds after the header) is next in `in`.
struct NpyFile {
  std::ifstream in;
  NpyType type = NpyType::kU8;
  std::vector<uint64_t> shape;
  uint64_t bytes = 0;

  uint64_t elements() const { return bytes / npy_item_bytes(type); }
};

// Opens `path` and checks its header against the file's size, reading no data: a reader knows
// the size of every array before it allocates any.
NpyFile open_npy_or_throw(const std::string& path) {
  io::readable_file_or_throw(path);  // a missing file: the open below names the system's reason
  NpyFile f;
  std::ifstream& in = f.in;
  in.open(path, std::ios::binary);
  if (!in) throw io::FieldError{path + ": cannot open: " + std::strerror(errno)};
  char pre[8];
  if (!in.read(pre, 8) || std::memcmp(pre, kNpyMagic, 6) != 0)
    throw io::FieldError{path + ": not a .npy file (no \\x93NUMPY magic)"};
  const int major = static_cast<uint8_t>(pre[6]);
  uint32_t header_len = 0;
  if (major == 1) {
    unsigned char len[2];
    if (!in.read(reinterpret_cast<char*>(len), 2)) throw io::FieldError{path + ": truncated header"};
    header_len = len[0] | (uint32_t{len[1]} << 8);
  } else if (major == 2 || major == 3) {
    unsigned char len[4];
    if (!in.read(reinterpret_cast<char*>(len), 4)) throw io::FieldError{path + ": truncated header"};
    header_len = len[0] | (uint32_t{len[1]} << 8) | (uint32_t{len[2]} << 16) | (uint32_t{len[3]} << 24);
  } else {
    throw io::FieldError{path + ": .npy version " + std::to_string(major) +
                         ": accepted versions are 1.0, 2.0, 3.0"};
  }
  if (header_len > (1u << 24)) throw io::FieldError{path + ": implausible header length"};
  std::string header(header_len, '\0');
  if (!in.read(header.data(), header_len)) throw io::FieldError{path + ": truncated header"};
  NpyArray a = HeaderParser(header, path).parse();
  const std::optional<uint64_t> bytes = npy_bytes(a.shape, npy_item_bytes(a.type));
  if (!bytes)
    throw io::FieldError{path + ": .npy header: shape " + shape_tuple(a.shape) + " of " +
                         info(a.type).numpy + ": its size in bytes exceeds 2^63 - 1 (the "
                         "element count wraps); accepted: a size below 2^63 bytes (NumPy's limit)"};
  const std::streamoff data_start = in.tellg();
  in.seekg(0, std::ios::end);
  const uint64_t available = static_cast<uint64_t>(in.tellg() - data_start);
  if (available != *bytes)
    throw io::FieldError{path + ": holds " + std::to_string(available) + " data bytes; shape " +
                         shape_tuple(a.shape) + " of " + info(a.type).numpy + " needs " +
                         std::to_string(*bytes)};
  in.seekg(data_start);
  f.type = a.type;
  f.shape = std::move(a.shape);
  f.bytes = *bytes;
  return f;
}

// The data of an opened file into `into`, exactly f.bytes long.
void read_npy_data_or_throw(const std::string& path, NpyFile& f, std::span<uint8_t> into) {
  if (!into.empty() &&
      !f.in.read(reinterpret_cast<char*>(into.data()), static_cast<std::streamsize>(into.size())))
    throw io::FieldError{path + ": cannot read the data"};
}

NpyArray read_npy_or_throw(const std::string& path) {
  NpyFile f = open_npy_or_throw(path);
  NpyArray a;
  a.type = f.type;
  a.shape = f.shape;
  a.data.resize(f.bytes);
  read_npy_data_or_throw(path, f, a.data);
  return a;
}

// ---- which tensors, which dtypes ----------------------------------------------------------------

// spec/case_files.md §5: the file names of the format, inputs first.
constexpr std::array<const char*, 9> kInputNames = {
    "query", "k_pages", "v_pages", "k_scale", "v_scale", "q_scale", "sinks", "block_table",
    "context_lens"};
constexpr std::array<const char*, 7> kResultNames = {
    "out", "lse", "ref_out", "ref_lse", "ref_a", "ref_bound", "ref_lse_bound"};

// The storage of a data format as NumPy sees it: bytes for 8-bit and packed 4-bit formats.
NpyType storage_type(pacts_format f) {
  switch (spec::element_bytes(f)) {
    case 2: return NpyType::kU16;
    case 4: return NpyType::kF32;
    default: return NpyType::kU8;
  }
}

std::string file_of(const std::string& dir, const char* name) {
  return (fs::path(dir) / (std::string(name) + ".npy")).string();
}

// The input tensors, in the order of kInputNames.
enum class Input { kQuery, kKPages, kVPages, kKScale, kVScale, kQScale, kSinks, kBlockTable, kContextLens };

struct InputFile {
  Input id;
  const char* name;
  NpyType type;
  bool used = true;                    // false: the problem has no such tensor (no file)
  const char* scalar_field = nullptr;  // 1-element file holding this problem.json scalar
  uint64_t bytes = 0;                  // bytes the tensor spans (spec::required_extents)
};

InputFile scale_file(Input id, const char* name, pacts_scale_mode mode, uint64_t bytes) {
  InputFile f{id, name, mode == PACTS_SCALE_MX_BLOCK ? NpyType::kU8 : NpyType::kF32};
  f.used = mode != PACTS_SCALE_NONE;
  if (mode == PACTS_SCALE_PER_TENSOR) {
    f.scalar_field = name;
    f.bytes = 4;
  } else {
    f.bytes = bytes;
  }
  return f;
}

std::vector<InputFile> input_files(const pacts_problem& p) {
  const spec::RequiredExtents e = spec::required_extents(p);
  std::vector<InputFile> files;
  files.push_back({Input::kQuery, "query", storage_type(p.q_format), true, nullptr, e.q});
  files.push_back({Input::kKPages, "k_pages", storage_type(p.kv_format), true, nullptr, e.k});
  files.push_back({Input::kVPages, "v_pages", storage_type(p.kv_format), true, nullptr, e.v});
  files.push_back(scale_file(Input::kKScale, "k_scale", p.k_scale_mode, e.k_scale));
  files.push_back(scale_file(Input::kVScale, "v_scale", p.v_scale_mode, e.v_scale));
  files.push_back({Input::kQScale, "q_scale", NpyType::kF32, true, "q_scale", 4});
  files.push_back({Input::kSinks, "sinks", NpyType::kF32, p.has_sinks != 0, nullptr, e.sinks});
  files.push_back({Input::kBlockTable, "block_table", NpyType::kI32, true, nullptr, e.block_table});
  files.push_back(
      {Input::kContextLens, "context_lens", NpyType::kI32, true, nullptr, e.context_lens});
  return files;
}

std::span<const uint8_t> scalar_bytes(const float& x) {
  return {reinterpret_cast<const uint8_t*>(&x), sizeof x};
}

// The bytes an input file holds for case `c`.
std::span<const uint8_t> input_bytes(const CaseData& c, const InputFile& f) {
  switch (f.id) {
    case Input::kQuery: return bytes_of(c.q);
    case Input::kKPages: return bytes_of(c.k);
    case Input::kVPages: return bytes_of(c.v);
    case Input::kKScale: return f.scalar_field ? scalar_bytes(c.problem.k_scale) : bytes_of(c.k_scale);
    case Input::kVScale: return f.scalar_field ? scalar_bytes(c.problem.v_scale) : bytes_of(c.v_scale);
    case Input::kQScale: return scalar_bytes(c.problem.q_scale);
    case Input::kSinks: return bytes_of(c.sinks);
    case Input::kBlockTable: return bytes_of(c.block_table);
    case Input::kContextLens: return bytes_of(c.context_lens);
  }
  return {};
}

// The buffer of the case (allocated at its required extent) that a non-scalar input file fills.
std::span<uint8_t> input_target(CaseData& c, const InputFile& f) {
  const auto raw = [](auto& v) {
    return std::span<uint8_t>(reinterpret_cast<uint8_t*>(v.data()), v.size() * sizeof(v[0]));
  };
  switch (f.id) {
    case Input::kQuery: return raw(c.q);
    case Input::kKPages: return raw(c.k);
    case Input::kVPages: return raw(c.v);
    case Input::kKScale: return raw(c.k_scale);
    case Input::kVScale: return raw(c.v_scale);
    case Input::kSinks: return raw(c.sinks);
    case Input::kBlockTable: return raw(c.block_table);
    case Input::kContextLens: return raw(c.context_lens);
    case Input::kQScale: break;
  }
  return {};
}

// ---- problem.json ------------------------------------------------------------------------------

Json rows_json(const pacts_row_layout& l) {
  return {{"s_batch", l.s_batch}, {"s_tok", l.s_tok}, {"s_head", l.s_head}};
}
Json pool_json(const pacts_pool_layout& l) {
  return {{"s_page", l.s_page}, {"s_head", l.s_head}, {"s_tok", l.s_tok},
          {"s_chunk", l.s_chunk}, {"chunk", l.chunk}};
}
Json scales_json(const pacts_scale_layout& l) {
  return {{"s_page", l.s_page}, {"s_head", l.s_head}, {"s_tok", l.s_tok}, {"s_block", l.s_block}};
}

Json problem_json(const pacts_problem& p, const ExchangeExtras* x) {
  Json j;
  j["pacts_exchange_version"] = io::kExchangeVersion;
  j["spec_version"] = io::kSpecVersion;
  j["abi_version"] = p.abi_version;
  j["batch"] = p.batch;
  j["q_len"] = p.q_len;
  j["num_q_heads"] = p.num_q_heads;
  j["num_kv_heads"] = p.num_kv_heads;
  j["head_dim"] = p.head_dim;
  j["page_size"] = p.page_size;
  j["num_pages"] = p.num_pages;
  j["max_pages_per_seq"] = p.max_pages_per_seq;
  j["q_format"] = io::name_of(io::kFormatNames, p.q_format);
  j["kv_format"] = io::name_of(io::kFormatNames, p.kv_format);
  j["out_format"] = io::name_of(io::kFormatNames, p.out_format);
  j["k_scale_mode"] = io::name_of(io::kScaleModeNames, p.k_scale_mode);
  j["v_scale_mode"] = io::name_of(io::kScaleModeNames, p.v_scale_mode);
  j["nibble_order"] = io::name_of(io::kNibbleOrderNames, p.nibble_order);
  // binary32 values as binary64 numbers: exact, and exact again when read back.
  j["softmax_scale"] = static_cast<double>(p.softmax_scale);
  j["q_scale"] = static_cast<double>(p.q_scale);
  j["k_scale"] = static_cast<double>(p.k_scale);
  j["v_scale"] = static_cast<double>(p.v_scale);
  j["softcap"] = static_cast<double>(p.softcap);
  j["window"] = p.window;
  j["has_sinks"] = p.has_sinks != 0;
  j["want_lse"] = p.want_lse != 0;
  j["q_layout"] = rows_json(p.q_layout);
  j["out_layout"] = rows_json(p.out_layout);
  j["lse_layout"] = rows_json(p.lse_layout);
  j["k_layout"] = pool_json(p.k_layout);
  j["v_layout"] = pool_json(p.v_layout);
  j["k_scale_layout"] = scales_json(p.k_scale_layout);
  j["v_scale_layout"] = scales_json(p.v_scale_layout);
  j["block_table_stride"] = p.block_table_stride;
  if (x && (!x->backend.empty() || x->plan || x->reference)) {
    Json run;
    if (!x->backend.empty()) {
      run["backend"] = x->backend;
      run["device"] = x->device;
      run["device_error"] = x->device_error;
    }
    if (x->plan)
      run["plan"] = {{"partition_size", x->plan->partition_size},
                     {"max_partitions", x->plan->max_partitions},
                     {"variant", x->plan->variant}};
    if (x->reference && x->profile) run["bound_profile"] = x->profile->name;
    j["run"] = run;
  }
  return j;
}

pacts_row_layout rows_from(io::Fields& parent, const char* key) {
  io::Fields f(parent.get(key), parent.where(), key);
  pacts_row_layout l{};
  l.s_batch = f.integer("s_batch", INT64_MIN, INT64_MAX);
  l.s_tok = f.integer("s_tok", INT64_MIN, INT64_MAX);
  l.s_head = f.integer("s_head", INT64_MIN, INT64_MAX);
  f.finish();
  return l;
}

pacts_pool_layout pool_from(io::Fields& parent, const char* key) {
  io::Fields f(parent.get(key), parent.where(), key);
  pacts_pool_layout l{};
  l.s_page = f.integer("s_page", INT64_MIN, INT64_MAX);
  l.s_head = f.integer("s_head", INT64_MIN, INT64_MAX);
  l.s_tok = f.integer("s_tok", INT64_MIN, INT64_MAX);
  l.s_chunk = f.integer("s_chunk", INT64_MIN, INT64_MAX);
  l.chunk = f.int32("chunk");
  f.finish();
  return l;
}

pacts_scale_layout scales_from(io::Fields& parent, const char* key) {
  io::Fields f(parent.get(key), parent.where(), key);
  pacts_scale_layout l{};
  l.s_page = f.integer("s_page", INT64_MIN, INT64_MAX);
  l.s_head = f.integer("s_head", INT64_MIN, INT64_MAX);
  l.s_tok = f.integer("s_tok", INT64_MIN, INT64_MAX);
  l.s_block = f.integer("s_block", INT64_MIN, INT64_MAX);
  f.finish();
  return l;
}

// The descriptor of problem.json, every key required; the spec's validator judges the values.
pacts_problem problem_from(const Json& root, const std::string& where) {
  io::Fields f(root, where, "");
  if (f.int32("pacts_exchange_version") != io::kExchangeVersion)
    f.fail("pacts_exchange_version", f.get("pacts_exchange_version"),
           "this pacts reads exchange version " + std::to_string(io::kExchangeVersion));
  if (f.string("spec_version").empty())
    f.fail("spec_version", f.get("spec_version"), "expected a spec version");
  pacts_problem p{};
  p.abi_version = static_cast<uint32_t>(f.integer("abi_version", 0, UINT32_MAX));
  p.batch = f.int32("batch");
  p.q_len = f.int32("q_len");
  p.num_q_heads = f.int32("num_q_heads");
  p.num_kv_heads = f.int32("num_kv_heads");
  p.head_dim = f.int32("head_dim");
  p.page_size = f.int32("page_size");
  p.num_pages = f.int32("num_pages");
  p.max_pages_per_seq = f.int32("max_pages_per_seq");
  p.q_format = f.name("q_format", io::kFormatNames);
  p.kv_format = f.name("kv_format", io::kFormatNames);
  p.out_format = f.name("out_format", io::kFormatNames);
  p.k_scale_mode = f.name("k_scale_mode", io::kScaleModeNames);
  p.v_scale_mode = f.name("v_scale_mode", io::kScaleModeNames);
  p.nibble_order = f.name("nibble_order", io::kNibbleOrderNames);
  p.softmax_scale = f.binary32("softmax_scale");
  p.q_scale = f.binary32("q_scale");
  p.k_scale = f.binary32("k_scale");
  p.v_scale = f.binary32("v_scale");
  p.softcap = f.binary32("softcap");
  p.window = f.int32("window");
  p.has_sinks = f.boolean("has_sinks") ? 1 : 0;
  p.want_lse = f.boolean("want_lse") ? 1 : 0;
  p.q_layout = rows_from(f, "q_layout");
  p.out_layout = rows_from(f, "out_layout");
  p.lse_layout = rows_from(f, "lse_layout");
  p.k_layout = pool_from(f, "k_layout");
  p.v_layout = pool_from(f, "v_layout");
  p.k_scale_layout = scales_from(f, "k_scale_layout");
  p.v_scale_layout = scales_from(f, "v_scale_layout");
  p.block_table_stride = f.integer("block_table_stride", INT64_MIN, INT64_MAX);
  // What ran is a record for people; reading a case does not depend on it.
  if (f.has("run") && !f.get("run").is_object())
    f.fail("run", f.get("run"), "expected an object");
  f.finish();
  return p;
}

// ---- results ------------------------------------------------------------------------------------


struct DenseResults {
  std::vector<double> out, lse, a, bound, lse_bound;
};

// The reference's answer as dense arrays; rows the reference marks invalid (a device
// precondition failed) are NaN, as a backend must write them (spec/contract.md §4).
spec::Result<DenseResults> dense_results(const pacts_problem& p, const reference::Output& ref,
                                         const spec::NumericsProfile& prof) {
  const size_t rows = static_cast<size_t>(p.batch) * static_cast<size_t>(p.q_len) *
                      static_cast<size_t>(p.num_q_heads);
  const size_t D = static_cast<size_t>(p.head_dim);
  if (ref.out.size() != rows * D || ref.lse.size() != rows || ref.abs_weighted_v.size() != rows * D ||
      ref.sum_abs_v.size() != rows * D || ref.logit_abs_dot.size() != rows ||
      ref.visible.size() != rows || ref.row_invalid.size() != rows)
    return spec::invalid_argument("ExchangeExtras::reference: not the reference answer of this "
                                  "problem (" + std::to_string(rows) + " rows of " +
                                  std::to_string(D) + " expected)");
  DenseResults r;
  r.out.resize(rows * D);
  r.a = ref.abs_weighted_v;
  r.bound.resize(rows * D);
  r.lse.resize(rows);
  r.lse_bound.resize(rows);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (size_t row = 0; row < rows; ++row) {
    const bool invalid = ref.row_invalid[row] != 0;
    for (size_t d = 0; d < D; ++d) {
      const size_t e = row * D + d;
      r.out[e] = invalid ? nan : ref.out[e];
      r.bound[e] = spec::output_bound(prof, p, reference::bound_inputs(ref, row, e), r.out[e]);
    }
    r.lse[row] = invalid ? nan : ref.lse[row];
    r.lse_bound[row] = spec::lse_bound(prof, p, reference::bound_inputs(ref, row, row * D), r.lse[row]);
  }
  return r;
}

spec::Status write_results(const CaseData& c, const std::string& dir, const ExchangeExtras& x,
                           std::vector<std::string>& written) {
  const pacts_problem& p = c.problem;
  const spec::RequiredExtents e = spec::required_extents(p);
  if (x.out) {
    if (x.out->size() != e.out)
      return spec::invalid_argument("ExchangeExtras::out: " + std::to_string(x.out->size()) +
                                    " bytes; the problem's output spans " + std::to_string(e.out));
    const NpyType t = storage_type(p.out_format);
    if (auto s = write_npy_raw(file_of(dir, "out"), t, {e.out / npy_item_bytes(t)}, bytes_of(*x.out));
        !s)
      return s;
    written.emplace_back("out");
  }
  if (x.lse && p.want_lse) {
    if (x.lse->size() != e.lse)
      return spec::invalid_argument("ExchangeExtras::lse: " + std::to_string(x.lse->size()) +
                                    " bytes; the problem's LSE spans " + std::to_string(e.lse));
    if (auto s = write_npy_raw(file_of(dir, "lse"), NpyType::kF32, {e.lse / 4}, bytes_of(*x.lse)); !s)
      return s;
    written.emplace_back("lse");
  }
  if (!x.reference) return spec::Status::ok();
  if (!x.profile)
    return spec::invalid_argument("ExchangeExtras::profile: required with reference results "
                                  "(ref_bound is the bound of the backend's profile)");
  auto dense = dense_results(p, *x.reference, *x.profile);
  if (!dense) return dense.status();
  const DenseResults& r = dense.value();
  const uint64_t B = static_cast<uint64_t>(p.batch), L = static_cast<uint64_t>(p.q_len),
                 H = static_cast<uint64_t>(p.num_q_heads), D = static_cast<uint64_t>(p.head_dim);
  const std::vector<uint64_t> elements = {B, L, H, D}, rows = {B, L, H};
  const std::array<std::tuple<const char*, const std::vector<double>*, const std::vector<uint64_t>*>, 5>
      files = {{{"ref_out", &r.out, &elements},
                {"ref_lse", &r.lse, &rows},
                {"ref_a", &r.a, &elements},
                {"ref_bound", &r.bound, &elements},
                {"ref_lse_bound", &r.lse_bound, &rows}}};
  for (const auto& [name, values, shape] : files) {
    if (auto s = write_npy_raw(file_of(dir, name), NpyType::kF64, *shape, bytes_of(*values)); !s)
      return s;
    written.emplace_back(name);
  }
  return spec::Status::ok();
}

spec::Status remove_if_present(const std::string& path) {
  std::error_code ec;
  fs::remove(path, ec);
  if (ec) return spec::invalid_argument("cannot remove " + path + ": " + ec.message());
  return spec::Status::ok();
}

std::string where_of(const std::string& dir) { return "exchange " + dir; }

// Opens one input file and checks it against problem.json (presence, dtype, element count)
// without reading its data; nullopt for an absent file that the problem does not use.
std::optional<NpyFile> open_input_or_throw(const std::string& dir, const InputFile& f) {
  const std::string path = file_of(dir, f.name);
  const std::string name = std::string(f.name) + ".npy";
  const std::string where = where_of(dir) + ": " + name;
  const bool present = io::readable_file_or_throw(path);
  if (!f.used) {
    if (present)
      throw io::FieldError{where + ": present, but problem.json does not use it (" +
                           (f.id == Input::kSinks ? "has_sinks is false" : "its scale mode is none") +
                           "); remove it or fix problem.json"};
    return std::nullopt;
  }
  if (!present) throw io::FieldError{where + ": missing"};
  NpyFile a = open_npy_or_throw(path);
  if (a.type != f.type)
    throw io::FieldError{where + ": dtype " + info(a.type).numpy + ", expected " +
                         info(f.type).numpy + " for the formats and modes of problem.json"};
  const uint64_t expected = f.bytes / npy_item_bytes(f.type);
  if (a.elements() != expected)
    throw io::FieldError{where + ": " + std::to_string(a.elements()) + " elements, expected " +
                         std::to_string(expected) +
                         (f.scalar_field ? " (a scalar)"
                                         : " (the extent problem.json's layout reaches, "
                                           "spec::required_extents)")};
  return a;
}

// Reads a checked input file into the case, whose buffers are allocated; a scalar file is
// compared with problem.json instead.
void load_input(const std::string& dir, const InputFile& f, NpyFile& file, CaseData& c) {
  const std::string path = file_of(dir, f.name);
  if (!f.scalar_field) {
    read_npy_data_or_throw(path, file, input_target(c, f));
    return;
  }
  std::array<uint8_t, 4> got_bytes{};
  read_npy_data_or_throw(path, file, got_bytes);
  const std::span<const uint8_t> want = input_bytes(c, f);
  if (std::memcmp(got_bytes.data(), want.data(), 4) != 0) {
    float got = 0, expected_value = 0;
    std::memcpy(&got, got_bytes.data(), 4);
    std::memcpy(&expected_value, want.data(), 4);
    throw io::FieldError{where_of(dir) + ": " + f.name + ".npy holds " + std::to_string(got) +
                         " but problem.json " + f.scalar_field + " is " +
                         std::to_string(expected_value)};
  }
}

spec::Result<CaseData> load_or_throw(const std::string& dir) {
  const std::string json_path = (fs::path(dir) / "problem.json").string();
  auto text = io::read_text(json_path);
  if (!text) throw io::FieldError{text.status().message()};
  // Depth and repeated keys are checked before a document exists (spec/case_files.md §7).
  if (const spec::Status s = check_json_text(text.value(), json_path); !s)
    throw io::FieldError{s.message()};
  Json root;
  try {
    root = Json::parse(text.value());
  } catch (const nlohmann::json::exception& e) {  // syntax, and numbers beyond binary64 (1e999)
    throw io::FieldError{json_path + ": not JSON: " + e.what()};
  }
  CaseData c;
  c.problem = problem_from(root, json_path);
  // The validator's refusal keeps its code (a head_dim the spec does not support stays
  // NotSupported); its message names the field.
  if (const spec::Status s = spec::validate_problem(c.problem); !s)
    return spec::Status(s.code(), json_path + ": " + s.message());
  // Sizes before buffers (spec/case_files.md §7): the budget, then every file against
  // problem.json, so that a descriptor larger than its files or than this machine is refused
  // before what it describes is allocated.
  if (const spec::Status s = check_case_memory(c.problem, json_path); !s) return s;
  const std::vector<InputFile> inputs = input_files(c.problem);
  for (const InputFile& f : inputs) open_input_or_throw(dir, f);
  c.allocate();
  for (const InputFile& f : inputs)
    if (std::optional<NpyFile> file = open_input_or_throw(dir, f)) load_input(dir, f, *file, c);
  return c;
}

}  // namespace

const char* npy_descr(NpyType type) { return info(type).descr; }
size_t npy_item_bytes(NpyType type) { return info(type).bytes; }

uint64_t NpyArray::elements() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

spec::Status write_npy(const std::string& path, const NpyArray& array) {
  return write_npy_raw(path, array.type, array.shape, array.data);
}

spec::Result<NpyArray> read_npy(const std::string& path) {
  return io::refuse_on_throw(path,
                             [&]() -> spec::Result<NpyArray> { return read_npy_or_throw(path); });
}

spec::Status dump_case(const CaseData& c0, const std::string& dir, const ExchangeExtras* extras) {
  const pacts_problem& p = c0.problem;
  if (const spec::Status s = spec::validate_problem(p); !s)
    return spec::Status(s.code(), "dump_case: " + s.message());
  const spec::RequiredExtents e = spec::required_extents(p);
  if (c0.q.size() != e.q || c0.k.size() != e.k || c0.v.size() != e.v ||
      c0.k_scale.size() != e.k_scale || c0.v_scale.size() != e.v_scale ||
      c0.sinks.size() != e.sinks || c0.block_table.size() * 4 != e.block_table ||
      c0.context_lens.size() * 4 != e.context_lens)
    return spec::invalid_argument("dump_case: the case's buffers are not sized to "
                                  "spec::required_extents (CaseData::allocate)");
  const ExchangeExtras none;
  const ExchangeExtras& x = extras ? *extras : none;
  // No problem.json while the files change: a reader sees a whole case or none.
  const std::string json_path = (fs::path(dir) / "problem.json").string();
  if (auto s = remove_if_present(json_path); !s) return s;
  std::vector<std::string> written;
  if (x.write_inputs) {
    for (const InputFile& f : input_files(p)) {
      if (!f.used) continue;
      const std::span<const uint8_t> data = input_bytes(c0, f);
      if (auto s = write_npy_raw(file_of(dir, f.name), f.type,
                                 {data.size() / npy_item_bytes(f.type)}, data);
          !s)
        return s;
      written.emplace_back(f.name);
    }
  }
  if (auto s = write_results(c0, dir, x, written); !s) return s;
  const auto stale = [&](const char* name) {
    return std::find(written.begin(), written.end(), name) == written.end();
  };
  // Inputs are left alone when not written: they may be the very files this run read.
  if (x.write_inputs)
    for (const char* name : kInputNames)
      if (stale(name))
        if (auto s = remove_if_present(file_of(dir, name)); !s) return s;
  for (const char* name : kResultNames)
    if (stale(name))
      if (auto s = remove_if_present(file_of(dir, name)); !s) return s;
  return io::write_text_atomically(json_path, problem_json(p, extras).dump(2) + "\n");
}

spec::Result<CaseData> load_case(const std::string& dir) {
  return io::refuse_on_throw(where_of(dir), [&] { return load_or_throw(dir); });
}

namespace {

// One result file of an external run into `into` (its required extent in bytes).
void load_result_or_throw(const std::string& dir, const char* name, NpyType type, uint64_t bytes,
                          std::vector<uint8_t>& into) {
  const std::string path = file_of(dir, name);
  const std::string where = where_of(dir) + ": " + name + ".npy";
  if (!io::readable_file_or_throw(path))
    throw io::FieldError{where + ": missing (the results to judge)"};
  NpyFile a = open_npy_or_throw(path);  // checked before `into` grows to its size
  if (a.type != type)
    throw io::FieldError{where + ": dtype " + info(a.type).numpy + ", expected " +
                         info(type).numpy + " (spec/case_files.md §4.4)"};
  const uint64_t expected = bytes / npy_item_bytes(type);
  if (a.elements() != expected)
    throw io::FieldError{where + ": " + std::to_string(a.elements()) + " elements, expected " +
                         std::to_string(expected) +
                         " (the whole allocation problem.json's layout reaches, "
                         "spec::required_extents)"};
  into.resize(a.bytes);
  read_npy_data_or_throw(path, a, into);
}

}  // namespace

spec::Status load_results(const std::string& dir, CaseData& c) {
  return io::refuse_on_throw(where_of(dir), [&] {
    const pacts_problem& p = c.problem;
    const spec::RequiredExtents e = spec::required_extents(p);
    load_result_or_throw(dir, "out", storage_type(p.out_format), e.out, c.out);
    if (p.want_lse) {
      load_result_or_throw(dir, "lse", NpyType::kF32, e.lse, c.lse);
    } else if (io::readable_file_or_throw(file_of(dir, "lse"))) {
      throw io::FieldError{where_of(dir) + ": lse.npy: present, but problem.json's want_lse is "
                           "false; remove it or fix problem.json"};
    }
    return spec::Status::ok();
  });
}

spec::Result<spec::NumericsProfile> read_profile_file(const std::string& path) {
  return io::refuse_on_throw(path, [&]() -> spec::Result<spec::NumericsProfile> {
    auto text = read_json_file(path);
    if (!text) throw io::FieldError{text.status().message()};
    Json j;
    try {
      j = Json::parse(text.value());
    } catch (const Json::exception& e) {
      throw io::FieldError{path + ": not JSON: " + e.what()};
    }
    if (!j.is_object()) throw io::FieldError{path + ": expected a JSON object (a numerics profile)"};
    io::Fields f(j, "profile " + path, "");
    spec::NumericsProfile prof;
    prof.name = f.string("name");
    const auto number = [&](const char* key) {
      const Json& v = f.get(key);
      if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0)
        f.fail(key, v, "expected a finite number >= 0");
      return v.get<double>();
    };
    prof.u_logit = number("u_logit");
    prof.u_q = number("u_q");
    prof.u_p = number("u_p");
    prof.eta_p = number("eta_p");
    if (f.has("eta_p_formats")) {  // optional: {"eta_p": x, "kv_formats": ["fp16", ...]}
      const Json& floor = f.get("eta_p_formats");
      if (!floor.is_object())
        f.fail("eta_p_formats", floor, "expected an object {\"eta_p\": x, \"kv_formats\": [names]}");
      io::Fields g(floor, "profile " + path, "eta_p_formats");
      const Json& eta = g.get("eta_p");
      if (!eta.is_number() || !std::isfinite(eta.get<double>()) || eta.get<double>() < 0)
        g.fail("eta_p", eta, "expected a finite number >= 0");
      prof.eta_p_formats.eta_p = eta.get<double>();
      const Json& names = g.get("kv_formats");
      if (!names.is_array()) g.fail("kv_formats", names, "expected an array of format names");
      for (const Json& n : names) {
        bool known = false;
        for (const auto& [value, name] : io::kFormatNames)
          if (n.is_string() && n.get<std::string>() == name) {
            prof.eta_p_formats.kv_formats |= spec::format_bit(value);
            known = true;
          }
        if (!known) g.fail("kv_formats", n, "unknown format name");
      }
      g.finish();
    }
    prof.p_rounded_in_denominator = f.boolean("p_rounded_in_denominator");
    prof.u_acc = number("u_acc");
    prof.u_partial = number("u_partial");
    prof.eps_exp = number("eps_exp");
    prof.eps_tanh = number("eps_tanh");
    prof.eps_log = number("eps_log");
    prof.ftz = f.boolean("ftz");
    f.finish();
    return prof;
  });
}

}  // namespace pacts::conformance
