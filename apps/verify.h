// `pacts verify DIR`: checks a qualification package (the folder pacts-qualify --out wrote) before
// anyone believes it, as the Vulkan CTS's verify script and MLPerf's submission checker do
// (docs/usage.md, "Verifying a qualification package"). Every problem found is a rejection that
// names the file, the field and what was expected.
#pragma once

#include <pacts/conformance/mustpass.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace pacts::apps {

// The JSON Schema subset spec/report.schema.json uses: type, required, properties, items, enum,
// const, minimum, minItems and "$ref": "#/$defs/NAME". Each violation is "PATH: what".
std::vector<std::string> validate_schema(const nlohmann::json& value, const nlohmann::json& schema);

struct VerifyOptions {
  // Official (the default): the package must be a qualification run of this suite: every property
  // on every backend, the whole mustpass set of this build (same files, same hashes), at least
  // the documented case budget, a clean build. Otherwise only the package's integrity and
  // consistency are checked (any run).
  bool official = true;
};

struct VerifyResult {
  std::vector<std::string> rejections;  // empty: accepted
  std::vector<std::string> facts;       // what was checked and found, for the summary
};

// `mustpass`: this build's set, against which an official package's mustpass counts and hash are
// checked; `schema`: spec/report.schema.json.
VerifyResult verify_package(const std::string& dir, const conformance::Mustpass& mustpass,
                            const nlohmann::json& schema, const VerifyOptions& options);

}  // namespace pacts::apps
