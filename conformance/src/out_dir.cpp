// Output folders (out_dir.h): a lock per folder, the previous run's files moved aside, reports
// written all or none.
#include <pacts/conformance/out_dir.h>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>

namespace pacts::conformance {
namespace {

namespace fs = std::filesystem;

std::string reason() { return std::strerror(errno); }

std::string utc_stamp() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y%m%dT%H%M%SZ", &tm);
  return buffer;
}

// Writes `text` to a new file `path` and flushes it to the disk.
bool write_whole(const std::string& path, const std::string& text, std::string& error) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    error = "cannot create " + path + ": " + reason();
    return false;
  }
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      error = "cannot write " + path + ": " + (n < 0 ? reason() : std::string("no space written"));
      ::close(fd);
      return false;
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    error = "cannot write " + path + ": " + reason();
    return false;
  }
  return true;
}

}  // namespace

OutDir::OutDir(OutDir&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)), previous_(std::move(other.previous_)) {}

OutDir& OutDir::operator=(OutDir&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
    previous_ = std::move(other.previous_);
  }
  return *this;
}

OutDir::~OutDir() {
  if (fd_ >= 0) ::close(fd_);
}

spec::Result<OutDir> claim_out_dir(const std::string& dir, const std::string& option,
                                   const std::vector<std::string>& run_files) {
  const std::string who = option + " '" + dir + "'";
  if (dir.empty())
    return spec::invalid_argument(who + ": accepted: the path of a folder (it is created if needed)");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir, ec))
    return spec::invalid_argument(who + ": cannot create the folder" + (ec ? ": " + ec.message() : std::string()) +
                                  "; accepted: a folder this user can create and write");
  OutDir out;
  out.path_ = dir;
  const std::string lock = (fs::path(dir) / kOutDirLockFile).string();
  out.fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (out.fd_ < 0) return spec::invalid_argument(who + ": cannot open its lock file " + lock + ": " + reason());
  if (::flock(out.fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    std::string holder;
    char buffer[32] = {};
    if (::pread(out.fd_, buffer, sizeof buffer - 1, 0) > 0) {
      std::string id(buffer);
      while (!id.empty() && (id.back() == '\n' || id.back() == '\0')) id.pop_back();
      if (!id.empty()) holder = " (process " + id + ")";
    }
    if (error == EWOULDBLOCK)
      return spec::invalid_argument(who + ": another pacts run is writing into this folder" + holder +
                                    "; accepted: a folder no other run is using (wait for it, or "
                                    "pass another --out)");
    return spec::invalid_argument(who + ": cannot lock " + lock + ": " + std::strerror(error));
  }
  // Who holds the lock, for the message of a run refused beside it (which, should this write
  // fail, only lacks the process id).
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(out.fd_, 0) == 0) (void)!::pwrite(out.fd_, pid.data(), pid.size(), 0);
  std::vector<fs::path> earlier;
  for (const std::string& name : run_files)
    if (fs::path p = fs::path(dir) / name; fs::symlink_status(p, ec).type() != fs::file_type::not_found)
      earlier.push_back(p);
  if (earlier.empty()) return out;
  const std::string stamp = "previous-" + utc_stamp();
  fs::path previous = fs::path(dir) / stamp;
  for (int n = 2; fs::symlink_status(previous, ec).type() != fs::file_type::not_found; ++n)
    previous = fs::path(dir) / (stamp + "-" + std::to_string(n));
  fs::create_directory(previous, ec);
  if (ec)
    return spec::invalid_argument(who + ": cannot create " + previous.string() +
                                  " for the previous run's files: " + ec.message());
  for (const fs::path& p : earlier) {
    fs::rename(p, previous / p.filename(), ec);
    if (ec)
      return spec::invalid_argument(who + ": cannot move the previous run's " + p.string() + " into " +
                                    previous.string() + ": " + ec.message());
  }
  out.previous_ = previous.string();
  return out;
}

spec::Status write_files_atomically(const std::vector<std::pair<std::string, std::string>>& files) {
  static std::atomic<uint64_t> counter{0};
  std::vector<std::string> temps;
  std::string error;
  const auto remove_temps = [&] {
    for (const std::string& t : temps) ::unlink(t.c_str());
  };
  for (const auto& [path, text] : files) {
    const fs::path target(path);
    // In the target's folder (a rename never crosses file systems), unique to this process and
    // call: two runs never share a temporary file.
    const std::string temp = (target.parent_path() / ("." + target.filename().string() + ".tmp." +
                                                      std::to_string(::getpid()) + "." +
                                                      std::to_string(counter.fetch_add(1))))
                                 .string();
    temps.push_back(temp);
    if (!write_whole(temp, text, error)) {
      remove_temps();
      return spec::invalid_argument(path + ": not written (" + error + "); the previous file, if any, is unchanged");
    }
  }
  for (size_t i = 0; i < files.size(); ++i)
    if (::rename(temps[i].c_str(), files[i].first.c_str()) != 0) {
      error = reason();
      remove_temps();
      return spec::invalid_argument(files[i].first + ": cannot rename " + temps[i] + " onto it: " + error);
    }
  return spec::Status::ok();
}

}  // namespace pacts::conformance
