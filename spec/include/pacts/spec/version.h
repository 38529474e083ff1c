// The revision of spec/ this build implements: written into case files, exchange directories and
// qualification reports (spec/case_files.md §1), and compared by `pacts verify`.
#pragma once

namespace pacts::spec {

inline constexpr const char* kSpecVersion = "pacts-spec-1";

}  // namespace pacts::spec
