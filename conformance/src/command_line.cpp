#include <pacts/conformance/command_line.h>

#include <charconv>

namespace pacts::conformance {

spec::Result<uint64_t> parse_seed_option(const std::string& option, const std::string& text) {
  uint64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, ec] = std::from_chars(text.data(), end, value);
  // from_chars takes no '+' and no spaces; it does take a '-' for signed types only.
  if (text.empty() || ec != std::errc() || stop != end)
    return spec::invalid_argument(option + " '" + text + "': " +
                                  (ec == std::errc::result_out_of_range ? "above 2^64-1; " : "") +
                                  "accepted: a decimal integer from 0 to 18446744073709551615");
  return value;
}

}  // namespace pacts::conformance
