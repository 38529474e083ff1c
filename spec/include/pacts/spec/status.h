// pacts::spec::Status and Result<T>: typed refusals (spec/refusals.md §1).
#pragma once

#include <pacts/problem.h>

#include <string>
#include <utility>
#include <variant>

namespace pacts::spec {

enum class Code : int {
  kOk = PACTS_OK,
  kInvalidArgument = PACTS_INVALID_ARGUMENT,
  kNotSupported = PACTS_NOT_SUPPORTED,
  kOutOfRange = PACTS_OUT_OF_RANGE,
  kDeviceError = PACTS_DEVICE_ERROR,
  kInternal = PACTS_INTERNAL,
};

const char* code_name(Code code);

// A status names the field, the value and what is accepted, e.g.
// "page_size 48: supported page sizes are powers of two from 8 to 256".
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status ok() { return {}; }

  bool is_ok() const { return code_ == Code::kOk; }
  explicit operator bool() const { return is_ok(); }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string to_string() const;  // "NotSupported: page_size 48: ..."

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

inline Status invalid_argument(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
inline Status not_supported(std::string m) { return {Code::kNotSupported, std::move(m)}; }
inline Status out_of_range(std::string m) { return {Code::kOutOfRange, std::move(m)}; }

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}          // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}   // NOLINT: must not be ok
  bool is_ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return is_ok(); }
  const T& value() const& { return std::get<T>(v_); }
  T& value() & { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  Status status() const { return is_ok() ? Status::ok() : std::get<Status>(v_); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace pacts::spec
