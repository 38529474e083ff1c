// The readers under mutated input (spec/case_files.md §7): case files, problem.json, .npy files
// and exchange directories, each mutated by RapidCheck generators from a valid file with a fixed
// seed and a fixed budget. A reader must answer every input with a valid load or a refusal that
// names the file: no crash, no exception, no allocation beyond the memory budget, no other status
// code. A case file it accepts must then build (make_case). The budget keeps the test under a few
// seconds; campaigns with other seeds: PACTS_READER_FUZZ_SEED=N. pacts_reader_fuzz_asan_test is this
// test with the readers built under AddressSanitizer and UBSan: a one-byte over-read planted after
// an .npy's data is read ends it with a heap-buffer-overflow, where the plain build passes.
#include <pacts/conformance/case_data.h>
#include <pacts/conformance/case_file.h>
#include <pacts/conformance/exchange.h>
#include <pacts/conformance/input_limits.h>
#include <pacts/conformance/random_case.h>
#include <pacts/spec/validate.h>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

namespace pacts::conformance {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kSeed = 20261206;
constexpr int kInputs = 2000;  // mutated inputs per reader

uint64_t seed() {
  const char* s = std::getenv("PACTS_READER_FUZZ_SEED");
  return s ? std::strtoull(s, nullptr, 0) : kSeed;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Pieces a hostile or broken writer produces: structure, extreme numbers, wrong types.
const std::vector<std::string>& tokens() {
  static const std::vector<std::string> t = {
      "[", "]", "{", "}", ",", ":", "\"", "\\", "null", "true", "\"x\"", "0", "-1", "1e999",
      "-1e999", "1.5", "2147483647", "2147483648", "-2147483649", "4294967296",
      "9223372036854775807", "18446744073709551615", "18446744073709551616", "\"0x\"",
      "\"0xffffffff\"", "\"18446744073709551616\"", "[[[[[[[[", "]]]]]]]]", "{\"a\":{\"a\":",
      "\"pacts_case_version\": 1,", "\"seed\": \"1\",", "\"num_pages\": 2147483647,", "\xff\xfe",
      "(", ")", "'", "(18446744073709551615,", "(4611686018427387905, 4)", "'<f8'", "True"};
  return t;
}

// One input: the base file with a few random edits (a byte replaced, a span deleted or
// duplicated, a token inserted, a run of opening brackets thousands deep).
rc::Gen<std::string> mutated(const std::string& base) {
  return rc::gen::exec([base] {
    std::string s = base;
    const int edits = *rc::gen::inRange(1, 6);
    for (int e = 0; e < edits; ++e) {
      const size_t at = *rc::gen::inRange<size_t>(0, s.size() + 1);
      const size_t span = std::min<size_t>(*rc::gen::inRange<size_t>(1, 64), s.size() - at);
      switch (*rc::gen::inRange(0, 6)) {
        case 0:
          if (at < s.size()) s[at] = static_cast<char>(*rc::gen::arbitrary<uint8_t>());
          break;
        case 1: s.erase(at, span); break;
        case 2: s.insert(at, s.substr(at, span)); break;
        case 3: s.insert(at, *rc::gen::elementOf(tokens())); break;
        case 4: {
          // A value replaced by arrays or objects nested deep, well formed, or left open.
          const size_t depth = *rc::gen::element(size_t{2}, size_t{65}, size_t{1000}, size_t{70000});
          const bool objects = *rc::gen::arbitrary<bool>();
          std::string deep;
          for (size_t d = 0; d < depth; ++d) deep += objects ? "{\"a\": " : "[";
          deep += "0";
          if (*rc::gen::inRange(0, 4) != 0) deep += std::string(depth, objects ? '}' : ']');
          const size_t value = s.find(": ", at);
          if (value == std::string::npos) {
            s.insert(at, deep);
            break;
          }
          const size_t end = s.find_first_of(",}\n", value + 2);
          s.replace(value + 2, (end == std::string::npos ? s.size() : end) - value - 2, deep);
          break;
        }
        default: {
          // A number of the file replaced by an extreme one (sizes, strides, counts).
          const size_t digit = s.find_first_of("0123456789", at);
          if (digit == std::string::npos) break;
          const size_t end = s.find_first_not_of("0123456789", digit);
          s.replace(digit, (end == std::string::npos ? s.size() : end) - digit,
                    *rc::gen::element<std::string>("0", "1", "65536", "600000", "2147483647",
                                                   "4294967295", "99999999999999999999"));
        }
      }
    }
    return s;
  });
}

// Runs `check` on kInputs mutations of `base`; a failure names the seed, the input's index and a
// file holding the input. `check` returns whether the reader accepted the input.
void fuzz(const std::string& name, const std::string& base,
          const std::function<bool(const std::string& input, std::string& why)>& check) {
  const uint64_t s = seed();
  std::printf("%s: %d inputs, seed %llu (PACTS_READER_FUZZ_SEED)\n", name.c_str(), kInputs,
              static_cast<unsigned long long>(s));
  const rc::Gen<std::string> gen = mutated(base);
  int accepted = 0;
  for (int i = 0; i < kInputs; ++i) {
    const std::string input =
        gen(rc::Random(s + static_cast<uint64_t>(i)), rc::kNominalSize).value();
    std::string why;
    accepted += check(input, why) ? 1 : 0;
    if (!why.empty()) {
      const std::string path = (fs::temp_directory_path() / ("pacts_reader_fuzz_" + name + "_" +
                                                             std::to_string(i))).string();
      write_bytes(path, input);
      ADD_FAILURE() << name << " input " << i << " (seed " << s << "): " << why
                    << "\n  the input: " << path;
      return;
    }
  }
  std::printf("%s: %d accepted, %d refused\n", name.c_str(), accepted, kInputs - accepted);
  // Both outcomes occur, or the mutations no longer reach the reader's checks.
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, kInputs);
}

// What a refusal must be: one of the reader's codes, naming `where`.
std::string bad_refusal(const spec::Status& st, const std::string& where) {
  const spec::Code c = st.code();
  if (c != spec::Code::kInvalidArgument && c != spec::Code::kNotSupported &&
      c != spec::Code::kOutOfRange)
    return "refused with another code: " + st.to_string();
  if (st.message().find(where) == std::string::npos)
    return "the refusal does not name " + where + ": " + st.to_string();
  return "";
}

class ReaderFuzz : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("pacts_reader_fuzz_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    // Accepted cases are built: a small budget keeps every one of them small.
    ::setenv(kMemoryBudgetVariable, "64M", 1);
  }
  void TearDown() override {
    fs::remove_all(dir_);
    ::unsetenv(kMemoryBudgetVariable);
  }
  static CaseFile base_file() {
    CaseFile f;
    f.property = "PACTS-ACC-1";
    f.spec.seed = 7;
    CaseShape& s = f.spec.shape;
    s.kv_format = PACTS_FORMAT_E4M3FN;
    s.k_scale_mode = PACTS_SCALE_PER_TOKEN;
    s.v_scale_mode = PACTS_SCALE_PER_TENSOR;
    s.sinks = true;
    s.contexts = {17, 40};
    f.spec.overrides = {{Override::Tensor::kK, 0, 3, 1, 5, 0x7f}};
    return f;
  }
  fs::path dir_;
};

TEST_F(ReaderFuzz, CaseFiles) {
  fuzz("case_file", to_json_text(base_file()), [](const std::string& input, std::string& why) {
    auto r = from_json_text(input);
    if (!r.is_ok()) {
      why = bad_refusal(r.status(), "case file");
      return false;
    }
    const CaseData c = r.value().spec.build();  // accepted: it builds within the budget
    if (!spec::validate_problem(c.problem).is_ok()) why = "accepted, but builds a refused problem";
    return true;
  });
}

TEST_F(ReaderFuzz, ProblemJson) {
  const std::string good = (dir_ / "good").string();
  ASSERT_TRUE(dump_case(base_file().spec.build(), good).is_ok());
  const std::string work = (dir_ / "work").string();
  fs::copy(good, work);
  fuzz("problem_json", read_bytes(good + "/problem.json"),
       [&](const std::string& input, std::string& why) {
         write_bytes(work + "/problem.json", input);
         auto r = load_case(work);
         if (!r.is_ok()) why = bad_refusal(r.status(), work);
         return r.is_ok();
       });
}

TEST_F(ReaderFuzz, NpyFiles) {
  const std::string good = (dir_ / "good").string();
  ASSERT_TRUE(dump_case(base_file().spec.build(), good).is_ok());
  const std::string work = (dir_ / "work").string();
  fs::copy(good, work);
  // The header and the first data bytes: mutations there reach the header parser.
  const std::string k = read_bytes(good + "/k_pages.npy");
  const size_t head = std::min<size_t>(k.size(), 192);
  fuzz("npy", k.substr(0, head), [&](const std::string& input, std::string& why) {
    const std::string bytes = input + k.substr(head);
    write_bytes(work + "/k_pages.npy", bytes);
    auto a = read_npy(work + "/k_pages.npy");
    if (!a.is_ok()) {
      why = bad_refusal(a.status(), "k_pages.npy");
      if (!why.empty()) return false;
    } else if (a.value().data.size() != a.value().elements() * npy_item_bytes(a.value().type)) {
      why = "accepted with a data size other than its shape's";
      return true;
    }
    auto r = load_case(work);
    if (!r.is_ok()) why = bad_refusal(r.status(), "k_pages.npy");
    return r.is_ok();
  });
}

}  // namespace
}  // namespace pacts::conformance
