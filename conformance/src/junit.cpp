#include <pacts/conformance/junit.h>

#include <filesystem>

#include <unistd.h>  // gethostname

namespace pacts::conformance {

std::string xml_escaped(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (const char ch : s) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20 && ch != '\t' && ch != '\n' && ch != '\r')
          out += ' ';
        else
          out += ch;
    }
  }
  return out;
}

std::string junit_class_part(std::string name) {
  if (name.rfind("auto: ", 0) == 0) name = name.substr(6);
  for (const std::string prefix : {"lib:", "exec:"})
    if (name.rfind(prefix, 0) == 0) {
      name = std::filesystem::path(name.substr(prefix.size())).stem().string();
      if (prefix == "lib:" && name.rfind("lib", 0) == 0 && name.size() > 3) name = name.substr(3);
    }
  std::string out;
  for (const char ch : name) {
    const bool ok = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
                    ch == '_' || ch == '.' || ch == '-';
    out += ok ? ch : '_';
  }
  return out.empty() ? std::string("unnamed") : out;
}

std::string host_name() {
  char host[256] = {};
  return gethostname(host, sizeof host - 1) == 0 && host[0] != 0 ? std::string(host) : "unknown";
}

}  // namespace pacts::conformance
