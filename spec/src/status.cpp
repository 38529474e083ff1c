#include <pacts/spec/status.h>

namespace pacts::spec {

const char* code_name(Code code) {
  switch (code) {
    case Code::kOk: return "Ok";
    case Code::kInvalidArgument: return "InvalidArgument";
    case Code::kNotSupported: return "NotSupported";
    case Code::kOutOfRange: return "OutOfRange";
    case Code::kDeviceError: return "DeviceError";
    case Code::kInternal: return "Internal";
  }
  return "Unknown";
}

std::string Status::to_string() const {
  if (is_ok()) return "Ok";
  return std::string(code_name(code_)) + ": " + message_;
}

}  // namespace pacts::spec
