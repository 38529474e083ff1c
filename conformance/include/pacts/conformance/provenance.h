// What a report records about the run that made it (pacts-qualify's provenance, docs/usage.md):
// the SHA-256 of the files that ran, and the machine they ran on.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace pacts::conformance {

// SHA-256 (FIPS 180-4) of bytes, as 64 lowercase hex digits.
std::string sha256_hex(const std::string& bytes);
// Of a file's contents; nothing when it cannot be read.
std::optional<std::string> sha256_file(const std::string& path);

// A mustpass set's hash: the SHA-256 of its files' "NAME SHA256\n" lines in name order (the
// manifest included only through the cases it lists). pacts-qualify records it; `pacts verify`
// compares a report's with its own set's.
struct Mustpass;
std::string mustpass_sha256(const Mustpass& mustpass);

struct FileHash {
  std::string path, sha256;
};

// This process's executable and the shared libraries mapped into it whose file name starts with
// "libpacts" (the kernels, peers, plugins loaded in process), each with its SHA-256.
std::vector<FileHash> running_files();

// The machine: "Linux 6.1.0 x86_64", the CPU model, its logical CPUs and memory (bytes).
struct MachineInfo {
  std::string os, cpu;
  int cpus = 0;
  long long memory_bytes = 0;
};
MachineInfo machine_info();

}  // namespace pacts::conformance
