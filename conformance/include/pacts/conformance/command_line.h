// Values of the programs' command lines that CLI11 would accept too widely: checked here so that
// every program refuses them alike, naming the option, the value and what is accepted.
#pragma once

#include <pacts/spec/status.h>

#include <cstdint>
#include <string>

namespace pacts::conformance {

// A seed: decimal digits only, from 0 to 2^64-1. A larger value is refused, never clamped (the
// run would not be the one asked for), and so are a sign, spaces and anything after the digits.
// InvalidArgument "OPTION 'TEXT': accepted: ...".
spec::Result<uint64_t> parse_seed_option(const std::string& option, const std::string& text);

}  // namespace pacts::conformance
