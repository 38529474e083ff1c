// SHA-256 against FIPS 180-4's examples (and NIST's million a's), and what the running process
// says about its own files.
#include <pacts/conformance/provenance.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace pacts::conformance {
namespace {

TEST(Provenance, Sha256OfTheStandardsExamples) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  // Lengths around the padding boundary (55, 56, 64 bytes) agree between the string and the
  // file path, which feeds the hash in blocks of another size.
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "pacts-provenance";
  std::filesystem::create_directories(dir);
  for (size_t n : {55u, 56u, 63u, 64u, 65u, 70000u}) {
    const std::string text(n, 'x');
    std::ofstream(dir / "f", std::ios::binary) << text;
    EXPECT_EQ(sha256_file((dir / "f").string()).value_or(""), sha256_hex(text)) << n;
  }
  EXPECT_FALSE(sha256_file((dir / "absent").string()));
}

TEST(Provenance, TheRunningExecutableIsListedWithItsHash) {
  const std::vector<FileHash> files = running_files();
  ASSERT_FALSE(files.empty());
  EXPECT_EQ(files[0].path, std::filesystem::read_symlink("/proc/self/exe").string());
  EXPECT_EQ(files[0].sha256, sha256_file(files[0].path).value_or("?"));
  const MachineInfo m = machine_info();
  EXPECT_NE(m.os.find("Linux"), std::string::npos);
  EXPECT_GT(m.cpus, 0);
  EXPECT_GT(m.memory_bytes, 0);
}

}  // namespace
}  // namespace pacts::conformance
