#include "commands.h"

#include "summary.h"

#include <pacts/conformance/case_file.h>
#include <pacts/conformance/input_limits.h>
#include <pacts/conformance/property.h>
#include <pacts/conformance/registry.h>
#include <pacts/conformance/runner.h>

#include <algorithm>
#include <exception>
#include <filesystem>
#include <map>
#include <memory>

namespace pacts::fuzz {
namespace {

namespace pc = pacts::conformance;
namespace fs = std::filesystem;

std::vector<fs::path> case_files_of(const fs::path& path) {
  if (!fs::is_directory(path)) return {path};
  const fs::path dir = fs::is_directory(path / "failures") ? path / "failures" : path;
  std::vector<fs::path> files;
  for (const fs::directory_entry& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

int replay(const std::string& path, const std::string& backend_override, std::FILE* out) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    std::fprintf(out, "pacts-fuzz replay: '%s': no such file or directory\n", path.c_str());
    return kExitUsage;
  }
  std::map<std::string, std::unique_ptr<pc::Backend>> backends;
  auto reference = pc::make_reference_backend();
  int failed = 0, passed = 0, errors = 0;
  std::vector<fs::path> files;
  try {
    files = case_files_of(path);
  } catch (const fs::filesystem_error& e) {  // a folder that cannot be listed
    std::fprintf(out, "pacts-fuzz replay: '%s': %s\n", path.c_str(), e.what());
    return kExitUsage;
  }
  for (const fs::path& f : files) {
    auto file = pc::read_case_file(f.string());
    if (!file) {
      std::fprintf(out, "  %s: cannot load: %s\n", f.c_str(), file.status().to_string().c_str());
      ++errors;
      continue;
    }
    const pc::CaseFile& cf = file.value();
    const std::string id = cf.property.empty() ? "PACTS-ACC-1" : cf.property;  // §2.2
    const pc::Property* property = pc::find_property(id);
    const std::string name = backend_override.empty() ? cf.backend : backend_override;
    if (property == nullptr || name.empty()) {
      std::fprintf(out, "  %s: %s\n", f.c_str(),
                   property == nullptr ? ("unknown property '" + id + "'").c_str()
                                       : "the file names no backend: pass --backend NAME");
      ++errors;
      continue;
    }
    auto& backend = backends[name];
    if (!backend) backend = pc::make_backend(name);
    if (!backend) {
      std::fprintf(out, "  %s: backend '%s' cannot be made here\n", f.c_str(), name.c_str());
      ++errors;
      continue;
    }
    pc::Outcome o;
    try {
      o = pc::check_case(*property, *backend, *reference, cf.spec);
    } catch (const std::exception& e) {
      o = pc::Outcome::fail(std::string("the check threw: ") + e.what());
    }
    (o.failed() ? failed : passed) += 1;
    std::fprintf(out, "  %s: %s %s on %s (worst error/bound %.3g)%s%s\n", f.c_str(), id.c_str(),
                 pc::verdict_name(o.verdict), name.c_str(), o.worst_ratio,
                 o.detail.empty() ? "" : ": ", o.detail.c_str());
  }
  std::fprintf(out, "pacts-fuzz replay: %d failed, %d did not fail, %d could not be run\n", failed,
               passed, errors);
  if (errors > 0) return kExitUsage;
  return failed > 0 ? kExitFail : kExitPass;
}

int merge(const std::string& out_dir, const std::vector<std::string>& inputs, std::FILE* out) {
  Summary merged;
  std::error_code ec;
  fs::create_directories(fs::path(out_dir) / "failures", ec);
  if (ec) {
    std::fprintf(out, "pacts-fuzz merge: cannot create %s/failures: %s\n", out_dir.c_str(),
                 ec.message().c_str());
    return kExitUsage;
  }
  for (const std::string& input : inputs) {
    // A path that cannot be examined (a loop of symbolic links) is refused by the read below.
    const fs::path file =
        fs::is_directory(input, ec) ? fs::path(input) / "summary.json" : fs::path(input);
    // Depth and repeated keys are checked before a document exists (spec/case_files.md §7).
    auto text = pc::read_json_file(file.string());
    if (!text) {
      std::fprintf(out, "pacts-fuzz merge: %s\n", text.status().message().c_str());
      return kExitUsage;
    }
    nlohmann::json doc = nlohmann::json::parse(text.value(), nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) {
      std::fprintf(out, "pacts-fuzz merge: %s: not JSON\n", file.c_str());
      return kExitUsage;
    }
    auto part = summary_from_json(doc);
    if (!part) {
      std::fprintf(out, "pacts-fuzz merge: %s: %s\n", file.c_str(),
                   part.status().to_string().c_str());
      return kExitUsage;
    }
    // The merged directory is self-contained: `pacts-fuzz replay OUT` re-runs every failure.
    for (const FailureRecord& f : part.value().failures) {
      const fs::path from = file.parent_path() / f.case_file, to = fs::path(out_dir) / f.case_file;
      if (fs::exists(to, ec) || !fs::exists(from, ec)) continue;
      fs::copy_file(from, to, ec);
      if (ec) {
        std::fprintf(out, "pacts-fuzz merge: cannot copy %s: %s\n", from.c_str(),
                     ec.message().c_str());
        return kExitUsage;
      }
    }
    merge_into(merged, part.value());
  }
  if (spec::Status s = write_summary(out_dir, merged); !s) {
    std::fprintf(out, "pacts-fuzz merge: %s\n", s.to_string().c_str());
    return kExitUsage;
  }
  std::fprintf(out, "pacts-fuzz merge: %zu summaries, %lld cases, %lld failed, %zu distinct failures, "
                    "%lld cells -> %s/summary.json\n",
               inputs.size(), static_cast<long long>(merged.cases()),
               static_cast<long long>(merged.failed()), merged.failures.size(),
               static_cast<long long>(merged.coverage.cells()), out_dir.c_str());
  return kExitPass;
}

}  // namespace pacts::fuzz
