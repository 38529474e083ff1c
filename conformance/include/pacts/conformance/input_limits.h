// What every reader of pacts' files checks before it builds anything from them
// (spec/case_files.md §7): JSON text is checked before a document is built (nesting depth,
// duplicate keys, syntax). Files come from other people's tools: a reader refuses, it never
// crashes.
#pragma once

#include <pacts/spec/status.h>

#include <cstdint>
#include <string>

namespace pacts::conformance {

// The deepest nesting of arrays and objects a reader accepts. pacts' own files nest a few levels
// deep; a document built from much deeper text exhausts the stack of the recursive code that
// later walks it (printing a value in a message, copying it).
inline constexpr int kMaxJsonDepth = 64;

// JSON text as every reader of pacts requires it, checked without building a document: valid
// syntax (numbers within binary64 included), arrays and objects nested at most kMaxJsonDepth
// deep, and no key twice in one object (a reader that kept the last one would silently lose the
// first). InvalidArgument "WHERE: ..." naming the key path and what is accepted.
spec::Status check_json_text(const std::string& text, const std::string& where);

// The whole text of a JSON file, checked by check_json_text. InvalidArgument naming the path:
// missing, not a regular file (a FIFO, a device, a loop of symbolic links), unreadable, or
// refused by the check.
spec::Result<std::string> read_json_file(const std::string& path);

}  // namespace pacts::conformance
