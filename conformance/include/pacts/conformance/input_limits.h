// What every reader of pacts' files checks before it builds anything from them
// (spec/case_files.md §7): JSON text is checked before a document is built (nesting depth,
// duplicate keys, syntax), and a case read from a file must fit a memory budget before any of its
// buffers is allocated. Files come from other people's tools: a reader refuses, it never crashes.
#pragma once

#include <pacts/problem.h>
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

// The environment variable that sets the memory budget of a case: bytes, or a number with the
// suffix K, M, G or T (powers of 1024).
inline constexpr const char* kMemoryBudgetVariable = "PACTS_CASE_MEMORY_BUDGET";

// The memory one case read from a file may take for its buffers: the variable above when it is
// set, else a quarter of the memory of this machine (the smaller of its physical memory and the
// memory limit of its control group), since checking a case holds several copies of it.
struct MemoryBudget {
  uint64_t bytes = 0;
  std::string source;  // for messages: "PACTS_CASE_MEMORY_BUDGET=8G", "a quarter of ..."
};
// InvalidArgument naming the variable when it is set to something else than a byte count.
spec::Result<MemoryBudget> case_memory_budget();

// The bytes of every buffer of `problem`, inputs and outputs (the sum of spec::required_extents).
// `problem` must pass spec::validate_problem (each extent is then below 2^58).
uint64_t case_buffer_bytes(const pacts_problem& problem);

// OutOfRange "WHERE: ..." naming the largest buffer, the fields that size it, the total and the
// budget when the buffers of `problem` (which must pass spec::validate_problem) exceed
// case_memory_budget(); InvalidArgument when the budget variable is malformed.
spec::Status check_case_memory(const pacts_problem& problem, const std::string& where);

}  // namespace pacts::conformance
