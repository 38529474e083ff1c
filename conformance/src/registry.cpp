#include <pacts/conformance/fault_backend.h>
#include <pacts/conformance/registry.h>

#include <algorithm>
#include <utility>

namespace pacts::conformance {
namespace {

std::vector<BackendFactory>& registry() {
  static std::vector<BackendFactory> factories;
  return factories;
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

void register_backend(BackendFactory factory) {
  std::vector<BackendFactory>& all = registry();
  for (BackendFactory& f : all)
    if (f.name == factory.name) {
      f = std::move(factory);
      return;
    }
  all.push_back(std::move(factory));
}

const BackendFactory* find_backend(std::string_view name) {
  for (const BackendFactory& f : registry())
    if (f.name == name) return &f;
  return nullptr;
}

std::vector<std::string> backend_names() {
  std::vector<std::string> names;
  for (const BackendFactory& f : registry())
    if (f.listed) names.push_back(f.name);
  return names;
}

std::vector<std::string> device_instances(std::string_view name) {
  std::vector<std::string> names;
  const BackendFactory* f = find_backend(name);
  if (f == nullptr || f->kind != NameKind::kDevices || !f->device_count) return names;
  const int32_t count = f->device_count();
  for (int32_t ordinal = 0; ordinal < count; ++ordinal)
    names.push_back(ordinal == 0 ? f->name : f->name + ":" + std::to_string(ordinal));
  return names;
}

std::unique_ptr<Backend> make_backend(const std::string& name) {
  const bool composed = name.find('+') != std::string::npos;
  for (const BackendFactory& f : registry()) {
    if (!f.make) continue;
    switch (f.kind) {
      case NameKind::kExact:
        if (name == f.name) return f.make("");
        break;
      case NameKind::kDevices:
        if (name == f.name) return f.make("0");
        // "hip:N": device N (pacts-fuzz makes one backend per device). Anything else after the
        // colon (e.g. "hip:1+v_tail_leak") is left to the fault composition below.
        if (name.size() > f.name.size() + 1 && name.size() <= f.name.size() + 5 &&
            name.compare(0, f.name.size(), f.name) == 0 && name[f.name.size()] == ':' &&
            all_digits(std::string_view(name).substr(f.name.size() + 1)))
          return f.make(std::to_string(std::stoi(name.substr(f.name.size() + 1))));
        break;
      case NameKind::kPrefix:
        // "lib:PATH+fault" is left to the fault composition below.
        if (!composed && name.rfind(f.name, 0) == 0) return f.make(name.substr(f.name.size()));
        break;
    }
  }
  // "<inner>+<fault>": a backend with a planted fault (the self-test's case files name these).
  if (const size_t plus = name.find('+'); plus != std::string::npos) {
    const std::optional<Fault> fault = fault_from_name(name.substr(plus + 1));
    std::unique_ptr<Backend> inner = make_backend(name.substr(0, plus));
    if (fault && inner) return make_fault_backend(std::move(inner), *fault);
  }
  return nullptr;
}

}  // namespace pacts::conformance
