// What every reader checks before it builds anything (spec/case_files.md §7).
#include <pacts/conformance/input_limits.h>

#include "case_io.h"

#include <nlohmann/json.hpp>

#include <exception>
#include <new>
#include <set>
#include <string>
#include <vector>

namespace pacts::conformance {
namespace {

// A message quotes at most this much of a key path (a key may be megabytes long).
constexpr size_t kMaxQuoted = 200;

std::string shortened(const std::string& s) {
  return s.size() <= kMaxQuoted ? s : s.substr(0, kMaxQuoted) + "...";
}

// Walks the text with the library's SAX parser, which keeps its own stack on the heap (never
// recursion), and stops at the first value nested too deep or the first repeated key. Nothing is
// built, so neither can exhaust the stack.
class TextCheck : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit TextCheck(const std::string& where) : where_(where) {}
  const std::string& error() const { return error_; }

  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool start_object(std::size_t) override { return open(false); }
  bool start_array(std::size_t) override { return open(true); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    Frame& f = frames_.back();
    f.key = k;
    if (!f.keys.insert(k).second)
      return fail(shortened(path_of(f)) + ": duplicate key; accepted: each key once in an object");
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    // Syntax, and numbers beyond binary64 (1e999).
    return fail(std::string("not JSON: ") + e.what());
  }

 private:
  struct Frame {
    bool array = false;
    size_t next_index = 0;      // arrays: the index of the next element
    std::string key;            // objects: the key of the value being read
    std::set<std::string> keys;  // objects: every key so far
    std::string path;           // the container's own path ("" for the document)
  };

  bool fail(const std::string& why) {
    error_ = where_ + ": " + why;
    return false;
  }
  // The path of the value about to be read in frame `f`.
  static std::string path_of(const Frame& f) {
    if (f.array) return f.path + "[" + std::to_string(f.next_index) + "]";
    return f.path.empty() ? f.key : f.path + "." + f.key;
  }
  std::string path_of_next() const { return frames_.empty() ? "" : path_of(frames_.back()); }
  bool value() {
    if (!frames_.empty() && frames_.back().array) ++frames_.back().next_index;
    return true;
  }
  bool open(bool array) {
    std::string path = path_of_next();
    if (frames_.size() >= static_cast<size_t>(kMaxJsonDepth)) {
      // Named by the member of the document that holds it ("run"), not by 64 levels of path.
      const bool member = !frames_.front().array;
      return fail((member ? shortened(frames_[1].path) : std::string("the document")) +
                  ": arrays and objects nested deeper than " + std::to_string(kMaxJsonDepth) +
                  " levels; accepted: at most " + std::to_string(kMaxJsonDepth));
    }
    value();
    frames_.push_back(Frame{array, 0, {}, {}, std::move(path)});
    return true;
  }
  bool close() {
    frames_.pop_back();
    return true;
  }

  const std::string& where_;
  std::string error_;
  std::vector<Frame> frames_;
};

}  // namespace

spec::Status check_json_text(const std::string& text, const std::string& where) {
  TextCheck check(where);
  try {
    if (!nlohmann::json::sax_parse(text, &check) || !check.error().empty())
      return spec::invalid_argument(check.error().empty() ? where + ": not JSON" : check.error());
  } catch (const std::bad_alloc&) {
    return spec::invalid_argument(where + ": out of memory while checking the JSON text");
  } catch (const std::exception& e) {
    return spec::invalid_argument(where + ": not JSON: " + e.what());
  }
  return spec::Status::ok();
}

spec::Result<std::string> read_json_file(const std::string& path) {
  auto text = io::read_text(path);
  if (!text) return text.status();
  if (auto s = check_json_text(text.value(), path); !s) return s;
  return text;
}

}  // namespace pacts::conformance
