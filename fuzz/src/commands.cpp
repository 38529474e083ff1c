#include "commands.h"

#include "campaign.h"
#include "summary.h"

#include <pacts/conformance/case_file.h>
#include <pacts/conformance/generators.h>
#include <pacts/conformance/input_limits.h>
#include <pacts/conformance/out_dir.h>
#include <pacts/conformance/property.h>
#include <pacts/conformance/registry.h>
#include <pacts/conformance/runner.h>

#include <algorithm>
#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

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

namespace {

// One input of `merge`: a shard's folder (or a summary file and the folder it lies in).
struct MergeInput {
  std::string arg;       // as given
  fs::path summary;      // the summary.json it names
  fs::path folder;       // where its case files are (folder/failures/*.json)
};

MergeInput resolve_input(const std::string& arg) {
  std::error_code ec;
  MergeInput in{arg, {}, {}};
  if (fs::is_directory(arg, ec)) {
    in.folder = fs::path(arg);
    in.summary = in.folder / "summary.json";
  } else {
    in.summary = fs::path(arg);
    in.folder = in.summary.has_parent_path() ? in.summary.parent_path() : fs::path(".");
  }
  return in;
}

// The identity of a folder or file for "given twice" (two spellings of one path, a symbolic
// link): its canonical path, or the path as given when it cannot be resolved.
std::string identity(const fs::path& p) {
  std::error_code ec;
  const fs::path c = fs::weakly_canonical(p, ec);
  return ec ? p.lexically_normal().string() : c.string();
}

std::string campaign_key(const CampaignRecord& c) {
  return "seed " + std::to_string(c.seed) + " shard " + std::to_string(c.shard.index) + "/" +
         std::to_string(c.shard.count) + " started " + c.started_utc;
}

// The case files of folder/failures, sorted ("" names when there is no such folder).
std::vector<std::string> case_file_names(const fs::path& folder) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(folder / "failures", ec), end; !ec && it != end; it.increment(ec))
    if (it->is_regular_file(ec) && it->path().extension() == ".json")
      names.push_back(it->path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

}  // namespace

int merge(const std::string& out_dir, const std::vector<std::string>& args, std::FILE* out) {
  std::vector<MergeInput> inputs;
  for (const std::string& a : args) inputs.push_back(resolve_input(a));
  // The output folder is never one of the shards: claiming it would move the shard's own files.
  for (const MergeInput& in : inputs) {
    if (identity(in.folder) == identity(out_dir)) {
      std::fprintf(out, "pacts-fuzz merge: OUT '%s' is also the folder of the input '%s': merge "
                        "into another folder\n", out_dir.c_str(), in.arg.c_str());
      return kExitUsage;
    }
  }
  // One merge per output folder, as one campaign per --out: a concurrent merge or campaign there
  // is refused, and an earlier merge's files are moved into previous-*/ (never mixed with these).
  auto claimed = pc::claim_out_dir(out_dir, "merge OUT", {"summary.json", "junit.xml", "failures"});
  if (!claimed) {
    std::fprintf(out, "pacts-fuzz merge: %s\n", claimed.status().message().c_str());
    return kExitUsage;
  }
  if (!claimed.value().previous().empty())
    std::fprintf(out, "pacts-fuzz merge: the previous merge's files in %s were moved to %s\n",
                 out_dir.c_str(), claimed.value().previous().c_str());
  std::error_code ec;
  fs::create_directories(fs::path(out_dir) / "failures", ec);
  if (ec) {
    std::fprintf(out, "pacts-fuzz merge: cannot create %s/failures: %s\n", out_dir.c_str(),
                 ec.message().c_str());
    return kExitUsage;
  }

  Summary merged;
  std::vector<std::string> incomplete;  // one line per shard that could not be added up whole
  std::map<std::string, std::string> summaries_seen;   // identity of a summary file -> input
  std::map<std::string, std::string> campaigns_seen;   // campaign_key -> input
  std::map<std::string, std::set<std::string>> named;  // identity of a folder -> case files named
  std::vector<std::pair<std::string, const MergeInput*>> folders;  // in order, once each
  size_t added = 0, salvaged = 0;

  const auto copy_case_file = [&](const fs::path& from, const std::string& case_file) {
    const fs::path to = fs::path(out_dir) / case_file;
    std::error_code e;
    if (fs::exists(to, e)) return true;  // one signature: one minimal case
    fs::copy_file(from, to, e);
    if (e) std::fprintf(out, "pacts-fuzz merge: cannot copy %s: %s\n", from.c_str(), e.message().c_str());
    return !e;
  };

  for (const MergeInput& in : inputs) {
    const std::string folder_id = identity(in.folder);
    if (named.find(folder_id) == named.end()) {
      named[folder_id];
      folders.emplace_back(folder_id, &in);
    }
    const std::string summary_id = identity(in.summary);
    if (auto it = summaries_seen.find(summary_id); it != summaries_seen.end()) {
      std::fprintf(out, "pacts-fuzz merge: %s: the same summary as %s (%s): counted once\n",
                   in.arg.c_str(), it->second.c_str(), in.summary.c_str());
      continue;
    }
    summaries_seen[summary_id] = in.arg;
    const auto not_added = [&](const std::string& why) {
      incomplete.push_back(in.arg + ": " + why);
      std::fprintf(out, "pacts-fuzz merge: %s: incomplete: %s\n", in.arg.c_str(), why.c_str());
    };
    if (!fs::exists(in.summary, ec) && !fs::is_symlink(in.summary, ec)) {
      not_added("no summary (" + in.summary.string() +
                " is missing: the shard was killed before writing one, or never ran)");
      continue;
    }
    // Depth and repeated keys are checked before a document exists (spec/case_files.md §7).
    auto text = pc::read_json_file(in.summary.string());
    if (!text) {
      not_added("summary not read: " + text.status().message());
      continue;
    }
    nlohmann::json doc = nlohmann::json::parse(text.value(), nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) {
      not_added("summary not read: " + in.summary.string() + ": not JSON (a partial write?)");
      continue;
    }
    auto part = summary_from_json(doc);
    if (!part) {
      not_added("summary not read: " + in.summary.string() + ": " + part.status().to_string());
      continue;
    }
    Summary& s = part.value();
    // The same campaign twice (a copy of a shard's folder): its cases would be counted twice.
    size_t seen = 0;
    std::string first_seen;
    for (const CampaignRecord& c : s.campaigns)
      if (auto it = campaigns_seen.find(campaign_key(c)); it != campaigns_seen.end()) {
        ++seen;
        first_seen = it->second;
      }
    if (seen > 0 && seen == s.campaigns.size()) {
      std::fprintf(out, "pacts-fuzz merge: %s: the same campaign as %s (%s): counted once\n",
                   in.arg.c_str(), first_seen.c_str(), campaign_key(s.campaigns.front()).c_str());
      for (const FailureRecord& f : s.failures) named[folder_id].insert(fs::path(f.case_file).filename().string());
      continue;
    }
    if (seen > 0) {
      not_added("not added: some of its campaigns were merged already from " + first_seen +
                " (their cases would be counted twice)");
      continue;
    }
    for (const CampaignRecord& c : s.campaigns) campaigns_seen[campaign_key(c)] = in.arg;
    if (!s.complete)
      not_added("its summary is a checkpoint (\"complete\": false): the shard did not finish; "
                "its counts are those of the checkpoint");
    // The merged directory is self-contained: `pacts-fuzz replay OUT` re-runs every failure.
    std::vector<std::string> missing;
    for (const FailureRecord& f : s.failures) {
      named[folder_id].insert(fs::path(f.case_file).filename().string());
      const fs::path from = in.folder / f.case_file;
      if (!fs::exists(from, ec)) missing.push_back(f.case_file);
      else if (!copy_case_file(from, f.case_file)) return kExitUsage;
    }
    if (!missing.empty())
      not_added("its summary names case files that are missing: " + join(missing));
    merge_into(merged, s);
    ++added;
  }

  // Case files that no summary names: a shard killed before (or since) its last summary, a
  // retried shard's older files. Each is listed, copied and added as a failure record that no
  // count includes ("summarised": false), never dropped.
  for (const auto& [folder_id, in] : folders) {
    // An earlier run on the shard's folder (a retried shard) was moved into previous-*/: not this
    // run's, so not merged, but named with what it holds, so that no finding goes unseen.
    std::vector<std::string> previous;
    for (fs::directory_iterator it(in->folder, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (name.rfind("previous-", 0) != 0 || !it->is_directory(ec)) continue;
      previous.push_back(it->path().string() + " (" +
                         std::to_string(case_file_names(it->path()).size()) + " case files)");
    }
    ec.clear();
    std::sort(previous.begin(), previous.end());
    if (!previous.empty())
      std::fprintf(out, "pacts-fuzz merge: %s: note: earlier runs in this folder were moved aside "
                        "and are not merged (merge them too to count them): %s\n",
                   in->arg.c_str(), join(previous).c_str());
    std::vector<std::string> unnamed, unreadable;
    for (const std::string& name : case_file_names(in->folder)) {
      if (named[folder_id].count(name) > 0) continue;
      const fs::path file = in->folder / "failures" / name;
      auto cf = pc::read_case_file(file.string());
      if (!cf) {
        unreadable.push_back(name + " (" + cf.status().message() + ")");
        continue;
      }
      unnamed.push_back(name);
      const pc::CaseFile& c = cf.value();
      FailureRecord f;
      long long index = 0;
      f.property = c.property.empty() ? "PACTS-ACC-1" : c.property;
      f.backend = c.backend;
      f.device = c.device;
      f.verdict = "unknown";
      f.detail = c.detail;
      f.signature = failure_signature(f.property, f.backend, c.spec);
      f.case_file = "failures/" + name;
      f.campaign_seed = c.run_seed;
      // "pacts-fuzz seed S shard K/N case I: ..." (the campaign's case files): where it was found.
      if (std::sscanf(c.detail.c_str(), "pacts-fuzz seed %*s shard %*d/%*d case %lld", &index) == 1) {
        const size_t at = c.detail.find(" shard ") + 7;
        if (auto shard = parse_shard(c.detail.substr(at, c.detail.find(' ', at) - at))) {
          f.shard = shard.value();
          f.index = static_cast<int64_t>(index);
        }
      }
      f.minimal = f.original = pc::describe(c.spec);
      f.summarised = false;
      if (!copy_case_file(file, f.case_file)) return kExitUsage;
      if (std::none_of(merged.properties.begin(), merged.properties.end(),
                       [&](const PropertyCounts& p) { return p.id == f.property; })) {
        PropertyCounts p;
        p.id = f.property;
        const pc::Property* known = pc::find_property(f.property);
        p.name = known != nullptr ? known->name : f.property;
        p.test_name = known != nullptr ? known->test_name() : f.property;
        merged.properties.push_back(p);
        std::sort(merged.properties.begin(), merged.properties.end(),
                  [](const PropertyCounts& a, const PropertyCounts& b) { return a.id < b.id; });
      }
      Summary one;
      one.failures.push_back(f);
      merge_into(merged, one);
      ++salvaged;
    }
    if (!unnamed.empty()) {
      const std::string why = std::to_string(unnamed.size()) + " case files in " +
                              (in->folder / "failures").string() +
                              " that no summary names (listed as failures, verdict unknown until "
                              "replayed): " + join(unnamed);
      incomplete.push_back(in->arg + ": " + why);
      std::fprintf(out, "pacts-fuzz merge: %s: incomplete: %s\n", in->arg.c_str(), why.c_str());
    }
    if (!unreadable.empty()) {
      const std::string why = "case files that cannot be loaded (not merged): " + join(unreadable);
      incomplete.push_back(in->arg + ": " + why);
      std::fprintf(out, "pacts-fuzz merge: %s: incomplete: %s\n", in->arg.c_str(), why.c_str());
    }
  }

  if (added == 0 && salvaged == 0) {
    std::fprintf(out, "pacts-fuzz merge: nothing to merge: no summary could be read and no case "
                      "file was found\n");
    return kExitUsage;
  }
  merged.incomplete.insert(merged.incomplete.end(), incomplete.begin(), incomplete.end());
  merged.complete = merged.complete && incomplete.empty();
  if (spec::Status s = write_summary(out_dir, merged); !s) {
    std::fprintf(out, "pacts-fuzz merge: %s\n", s.to_string().c_str());
    return kExitUsage;
  }
  std::fprintf(out, "pacts-fuzz merge: %s%zu of %zu inputs summarised, %lld cases, %lld failed, "
                    "%zu distinct failures (%lld of them case files that no summary counts), "
                    "%lld cells -> %s/summary.json\n",
               incomplete.empty() ? "" : "INCOMPLETE: ", added, inputs.size(),
               static_cast<long long>(merged.cases()), static_cast<long long>(merged.failed()),
               merged.failures.size(), static_cast<long long>(merged.unsummarised()),
               static_cast<long long>(merged.coverage.cells()), out_dir.c_str());
  return incomplete.empty() ? kExitPass : kExitIncomplete;
}

}  // namespace pacts::fuzz
