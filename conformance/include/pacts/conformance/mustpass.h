// The mustpass set (spec/case_files.md §3.5): a versioned list of committed case files, each with
// the properties it is judged by, that every backend must pass on every case it supports.
// pacts-qualify runs it before the generated cases.
#pragma once

#include <pacts/conformance/backend.h>
#include <pacts/conformance/case_file.h>
#include <pacts/conformance/property.h>
#include <pacts/spec/status.h>

#include <string>
#include <vector>

namespace pacts::conformance {

// The mustpass versions this pacts reads (manifest key "mustpass_version").
inline constexpr int kMustpassVersion = 1;

struct MustpassEntry {
  std::string path;                     // the case file (absolute or relative to the cwd)
  std::vector<std::string> properties;  // catalogue IDs it is judged by
  std::string guards;                   // what it guards, for people
  std::string fault;                    // a fault_backend.h fault the case must catch ("" = none)
  CaseFile file;                        // the loaded case
};

struct Mustpass {
  int version = 0;
  std::string dir;
  std::vector<MustpassEntry> entries;
};

// Reads DIR/manifest.json and every case file it lists. Refusals are InvalidArgument naming the
// manifest, the key or file, the value and what is accepted: an unknown or missing key, another
// version, a property not in this build's catalogue, a case file that does not read, a case file
// whose own property is not among those listed, a .json file of DIR the manifest does not list.
spec::Result<Mustpass> load_mustpass(const std::string& dir);

// Judges one entry's case with one of its properties (an exception thrown by a check or a
// backend fails the case, as in the runner).
Outcome check_mustpass(const MustpassEntry& entry, const Property& property, Backend& backend,
                       Backend& reference);

}  // namespace pacts::conformance
