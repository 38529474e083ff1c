// `pacts-fuzz replay` and `pacts-fuzz merge` (fuzz/README.md).
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace pacts::fuzz {

inline constexpr int kExitPass = 0, kExitFail = 1, kExitUsage = 2;
// merge: the merged folder was written, but some input could not be added up whole.
inline constexpr int kExitIncomplete = 3;

// Re-runs saved failures: FILE, or every case file of DIR/failures (DIR itself when it has no
// failures/ folder), on `backend` ("" = the backend each file names). Exit status: 0 every case
// passed (NotSupported and QualityWarning are not failures), 1 a case failed, 2 a file or backend
// could not be loaded.
int replay(const std::string& path, const std::string& backend, std::FILE* out);

// Adds shard summaries (summary.json files, or directories holding one) into `out_dir`:
// summary.json, junit.xml, and failures/ with every distinct failure's case file, including the
// case files of the inputs' failures/ folders that no summary names. `out_dir` is claimed as a
// campaign's --out is. Exit status: 0 every input added up whole; 3 the merged folder was written
// but is incomplete (a shard without a readable summary, a checkpoint summary, case files its
// summary does not name, or missing); 2 nothing could be merged, or `out_dir` is refused.
// The same summary (or campaign) given twice is counted once.
int merge(const std::string& out_dir, const std::vector<std::string>& inputs, std::FILE* out);

}  // namespace pacts::fuzz
