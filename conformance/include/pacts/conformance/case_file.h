// Case files (spec/case_files.md): JSON that regenerates a case's exact bytes, with the property
// that failed, the backend and device it failed on, and the seed of the run that found it.
#pragma once

#include <pacts/conformance/backend.h>
#include <pacts/conformance/generators.h>
#include <pacts/spec/status.h>

#include <cstdint>
#include <string>

namespace pacts::conformance {

struct CaseFile {
  int version = 1;            // case-file format version
  std::string property;       // "PACTS-POISON-1" ("" = a plain case, e.g. in the corpus)
  std::string backend;        // backend name it failed on
  std::string device;         // that backend's device
  uint64_t run_seed = 0;      // seed of the run that found it
  std::string detail;         // the failure, as reported
  PlanHint hint;              // the plan hint the property used
  CaseSpec spec;              // regenerates the bytes
};

std::string to_json_text(const CaseFile& file);
// InvalidArgument naming the key; OutOfRange when the buffers the shape describes exceed the
// memory budget (spec/case_files.md §7).
spec::Result<CaseFile> from_json_text(const std::string& text);
spec::Status write_case_file(const std::string& path, const CaseFile& file);
// `stem` + `extension` as a file name that fits common file systems (NAME_MAX, 255 bytes): a
// stem longer than kMaxFileStem bytes (a backend named by a plugin's path or a child's command
// line) is cut there and followed by '~' and 16 hex digits of a hash of the whole stem, so two
// long names stay distinct and the same name always gives the same file.
inline constexpr size_t kMaxFileStem = 200;
std::string fitted_file_name(const std::string& stem, const std::string& extension);
// FNV-1a (64 bits) of the bytes of `s`: the hash fitted_file_name appends, and the one a fuzz
// campaign names its unique failures by.
uint64_t fnv1a64(const std::string& s);
spec::Result<CaseFile> read_case_file(const std::string& path);

}  // namespace pacts::conformance
