// A campaign: properties x cases of one shard on a pool of workers, until a time or case budget,
// a signal, or (if asked) the first failure; failures shrunk, deduplicated and saved as case
// files; a summary at the end and at checkpoints (fuzz/README.md).
#pragma once

#include "case_stream.h"
#include "summary.h"
#include "workers.h"

#include <pacts/conformance/property.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace pacts::fuzz {

struct CampaignOptions {
  std::string suite_version;            // recorded in the summary (the program's PACTS_SUITE_VERSION)
  uint64_t seed = 0;
  Shard shard;
  std::vector<std::string> properties;  // IDs or families ("POISON"); empty: the whole catalogue
  WorkerRequest workers;
  double seconds = 0;                   // time budget (0: none)
  int64_t cases = 0;                    // case budget of this shard (0: none)
  std::optional<int64_t> case_index;    // run exactly this case of the shard (regeneration)
  std::string out_dir = "pacts-fuzz-out";
  bool stop_on_failure = false;
  bool shrink = true;
  ShrinkLimits shrink_limits;
  bool progress = false;                // the progress line even when stderr is not a TTY
  double progress_interval_s = 1;       // at least 1
  double checkpoint_interval_s = 60;    // summary.json rewritten this often (0: never)
};

// The properties named (IDs, or families such as "POISON" / "PACTS-POISON"), in catalogue order;
// InvalidArgument naming the unknown name and the accepted ones.
spec::Result<std::vector<const conformance::Property*>> select_properties(
    const std::vector<std::string>& names);

// The signal that stopped the campaign (0: none). Set from a signal handler: the campaign polls
// it, stops cleanly and writes its summary.
std::atomic<int>& stop_signal();

struct CampaignOutcome {
  Summary summary;
  spec::Status status;  // setup errors (unknown backend, no device, unwritable --out)
};

// The options of a campaign: InvalidArgument naming the option, the value and what is accepted
// (a NaN or infinite --seconds, a negative --case-index, an empty --out, ...). run_campaign checks
// them first, and claims --out (conformance/out_dir.h) only once they and the properties and
// workers were accepted: a refused campaign writes nothing.
spec::Status check_options(const CampaignOptions& o);

CampaignOutcome run_campaign(const CampaignOptions& options, std::FILE* log);

// The case-file name of a failure: "<property>-<backend>-<signature>.json", characters outside
// [A-Za-z0-9._-] replaced by '_'.
std::string case_file_name(const std::string& property, const std::string& backend,
                           const std::string& signature);

// The deduplication key of a minimal failure (FailureRecord::signature): 16 hex digits of a hash
// of the property, the backend and the shrunk shape (B, L, Hq, Hkv, D, page size, the formats and
// scale modes, the contexts), so that one bug reached from different starting cases is one record.
std::string failure_signature(const std::string& property, const std::string& backend,
                              const conformance::CaseSpec& minimal);

}  // namespace pacts::fuzz
