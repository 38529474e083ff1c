// The regression corpus (conformance/corpus/, spec/case_files.md §3.4): every case file there is
// replayed against the reference backend with the property it names (PACTS-ACC-1 when it names
// none) and must pass. One ctest test per file, named after it.
#include <pacts/conformance/case_file.h>
#include <pacts/conformance/generators.h>
#include <pacts/conformance/property.h>
#include <pacts/conformance/runner.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <string>
#include <vector>

#ifndef PACTS_CORPUS_DIR
#error "PACTS_CORPUS_DIR must name conformance/corpus (a compile definition of this test)"
#endif

namespace pacts::conformance {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> corpus_files() {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(PACTS_CORPUS_DIR, ec))
    if (entry.is_regular_file() && entry.path().extension() == ".json")
      files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

// A corpus that went missing must not pass by running nothing.
TEST(Corpus, IsPresent) {
  EXPECT_GE(corpus_files().size(), 4u) << "no case files found in " << PACTS_CORPUS_DIR;
}

class CorpusReplay : public ::testing::TestWithParam<std::string> {};

TEST_P(CorpusReplay, PassesOnTheReference) {
  const std::string& path = GetParam();
  auto file = read_case_file(path);
  ASSERT_TRUE(file.is_ok()) << file.status().to_string();
  const std::string id = file.value().property.empty() ? "PACTS-ACC-1" : file.value().property;
  const Property* property = find_property(id);
  ASSERT_NE(property, nullptr) << path << " names " << id << ", which is not in the catalogue";
  auto backend = make_reference_backend();
  auto reference = make_reference_backend();
  const Outcome o = check_case(*property, *backend, *reference, file.value().spec);
  EXPECT_EQ(o.verdict, Verdict::kPass)
      << id << " " << verdict_name(o.verdict) << ": " << o.detail << "\n  case: "
      << describe(file.value().spec) << "\n  replay: pacts case run " << path
      << " --backend reference";
}

std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = fs::path(info.param).stem().string();
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(Corpus, CorpusReplay, ::testing::ValuesIn(corpus_files()), test_name);
// An empty corpus instantiates nothing; Corpus.IsPresent reports that instead.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(CorpusReplay);

}  // namespace
}  // namespace pacts::conformance
