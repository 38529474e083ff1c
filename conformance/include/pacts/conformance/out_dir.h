// The output folder of a run (--out of pacts-qualify and pacts-fuzz run): one run at a time owns
// it, a reused folder never mixes two runs' files, and reports are written all or none.
#pragma once

#include <pacts/spec/status.h>

#include <string>
#include <utility>
#include <vector>

namespace pacts::conformance {

// The lock file inside an output folder. A run holds an exclusive flock on it while it runs (the
// kernel drops the lock when the process ends, however it ends).
inline constexpr const char* kOutDirLockFile = ".pacts.lock";

// An output folder claimed by this process: locked until the object is destroyed.
class OutDir {
 public:
  OutDir() = default;
  OutDir(OutDir&& other) noexcept;
  OutDir& operator=(OutDir&& other) noexcept;
  OutDir(const OutDir&) = delete;
  OutDir& operator=(const OutDir&) = delete;
  ~OutDir();

  const std::string& path() const { return path_; }
  // Where the previous run's files were moved ("" when the folder held none).
  const std::string& previous() const { return previous_; }

 private:
  friend spec::Result<OutDir> claim_out_dir(const std::string&, const std::string&,
                                            const std::vector<std::string>&);
  int fd_ = -1;
  std::string path_, previous_;
};

// Creates `dir` if needed and locks it for this process (the lock file is opened close-on-exec:
// the child processes of a run never hold it). Then the files and folders of an earlier run that
// `run_files` names ("report.md", "failures", ...) and that exist in `dir` are moved, together,
// into a new folder `dir`/previous-YYYYMMDDTHHMMSSZ[-N]/, so that what the new run writes is never
// read beside what an earlier one left (nothing is deleted). InvalidArgument naming `option` and
// `dir`: an empty path, a folder that cannot be created or locked, another run holding the lock
// (its process id named), or an earlier run's files that cannot be moved.
spec::Result<OutDir> claim_out_dir(const std::string& dir, const std::string& option,
                                   const std::vector<std::string>& run_files);

// Writes each (path, text) of `files` all or none: every text to a temporary file of its own (its
// name unique to this process and call) in the target's folder, flushed to the disk, and only
// when all were written, each renamed onto its target. A write that fails (a full disk) removes
// the temporary files and leaves every target as it was. InvalidArgument naming the file and the
// system's reason.
spec::Status write_files_atomically(const std::vector<std::pair<std::string, std::string>>& files);

}  // namespace pacts::conformance
