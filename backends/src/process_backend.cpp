// The process backend and its serving side (spec/process.md): control lines of JSON over the
// child's standard input and output, buffers in exchange directories on a RAM disk.
#include "descriptor_checks.h"
#include "guard_zones.h"

#include <pacts/backends/process.h>
#include <pacts/conformance/case_data.h>
#include <pacts/conformance/exchange.h>
#include <pacts/conformance/input_limits.h>
#include <pacts/conformance/registry.h>
#include <pacts/spec/formats.h>
#include <pacts/spec/validate.h>

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

extern char** environ;

namespace pacts::backends {
namespace {

namespace fs = std::filesystem;
using conformance::Backend;
using conformance::CaseData;
using conformance::PlanHint;
using conformance::RunResult;
using Json = nlohmann::json;
using namespace detail;  // descriptor_checks.h
using spec::Status;

constexpr size_t kMaxLine = size_t{1} << 20;  // spec/process.md §1.2
constexpr int kProtocolVersion = 1;
// The note pacts-child leaves in the exchange directory when a buffer's guard page faults
// (guard_zones.h, spec/process.md §4).
constexpr const char* kGuardNote = "guard_fault.txt";

// "; " and the note of a child that died on a guard page, or "".
std::string guard_note(const fs::path& dir) {
  if (dir.empty()) return "";
  std::error_code ec;
  const fs::path note = dir / kGuardNote;
  if (!fs::is_regular_file(note, ec) || fs::file_size(note, ec) > 4096) return "";
  std::ifstream in(note);
  std::string t((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r')) t.pop_back();
  return t.empty() ? "" : "; " + t;
}

// The positive whole seconds below `below` that environment variable `name` holds, or `fallback`
// (unset, empty, not a number, out of range).
int seconds_from_env(const char* name, int fallback, long below) {
  const char* env = std::getenv(name);
  if (env == nullptr) return fallback;
  char* end = nullptr;
  const long v = std::strtol(env, &end, 10);
  return end != env && *end == '\0' && v > 0 && v < below ? static_cast<int>(v) : fallback;
}

// spec/process.md §5: 60 s to start, 120 s per call, or PACTS_EXEC_TIMEOUT_S for both.
int timeout_s(int fallback) { return seconds_from_env("PACTS_EXEC_TIMEOUT_S", fallback, 1000000); }

// spec/process.md §5: the calls of one backend together, PACTS_EXEC_RUN_LIMIT_S seconds (a positive
// integer); 0 (unset): no limit.
int run_limit_s() { return seconds_from_env("PACTS_EXEC_RUN_LIMIT_S", 0, 100000000); }

// A directory on a RAM disk for the exchange directories of this process's calls.
fs::path scratch_root() {
  std::error_code ec;
  if (fs::is_directory("/dev/shm", ec) && access("/dev/shm", W_OK) == 0) return "/dev/shm";
  if (const char* t = std::getenv("TMPDIR"); t != nullptr && fs::is_directory(t, ec)) return t;
  return "/tmp";
}

const char* const kScaleModeNames[] = {"none", "per_tensor", "per_token", "mx_block"};

std::optional<pacts_format> format_named(const std::string& name) {
  for (int f = PACTS_FORMAT_BF16; f <= PACTS_FORMAT_E8M0; ++f)
    if (spec::format_name(static_cast<pacts_format>(f)) == name) return static_cast<pacts_format>(f);
  return std::nullopt;
}

std::optional<pacts_scale_mode> scale_mode_named(const std::string& name) {
  for (int m = PACTS_SCALE_NONE; m <= PACTS_SCALE_MX_BLOCK; ++m)
    if (name == kScaleModeNames[m]) return static_cast<pacts_scale_mode>(m);
  return std::nullopt;
}

const char* status_name(spec::Code c) {
  switch (c) {
    case spec::Code::kOk: return "ok";
    case spec::Code::kInvalidArgument: return "InvalidArgument";
    case spec::Code::kNotSupported: return "NotSupported";
    case spec::Code::kOutOfRange: return "OutOfRange";
    case spec::Code::kDeviceError: return "DeviceError";
    default: return "Internal";
  }
}

std::optional<spec::Code> status_named(const std::string& s) {
  for (spec::Code c : {spec::Code::kOk, spec::Code::kInvalidArgument, spec::Code::kNotSupported,
                       spec::Code::kOutOfRange, spec::Code::kDeviceError, spec::Code::kInternal})
    if (s == status_name(c)) return c;
  return std::nullopt;
}

const char* hint_kind_name(PlanHint::Kind k) {
  switch (k) {
    case PlanHint::Kind::kPartitionSize: return "partition_size";
    case PlanHint::Kind::kPartitions: return "partitions";
    case PlanHint::Kind::kBatchInvariant: return "batch_invariant";
    case PlanHint::Kind::kAutomatic: break;
  }
  return "automatic";
}

// ---- the handshake, read ------------------------------------------------------------------

// What a child declares, checked as a plugin's descriptor is (descriptor_checks.h).
struct Declaration {
  std::string name, device, driver, runtime, version;
  conformance::Capabilities caps;
  spec::NumericsProfile profile;
  bool timed_calls = false;  // serves time_prepare, time and time_end (spec/process.md §6)
  std::string canonical;  // the declaration as pacts read it, to compare restarts with
};

// Strict field access: a missing key or a value of another type is refused naming the key.
struct Fields {
  const Checker& c;
  Status error;

  const Json* at(const Json& obj, const std::string& where, const char* key, bool required) {
    if (!error) return nullptr;
    const auto it = obj.find(key);
    if (it == obj.end()) {
      if (required) error = c.refuse(where + key + ": missing");
      return nullptr;
    }
    return &*it;
  }
  std::string text(const Json& obj, const std::string& where, const char* key, bool required) {
    const Json* v = at(obj, where, key, required);
    if (v == nullptr) return "";
    if (!v->is_string()) {
      error = c.refuse(where + key + ": accepted: a string");
      return "";
    }
    return v->get<std::string>();
  }
  int64_t integer(const Json& obj, const std::string& where, const char* key) {
    const Json* v = at(obj, where, key, true);
    if (v == nullptr) return 0;
    if (!v->is_number_integer()) {
      error = c.refuse(where + key + " = " + v->dump() + ": accepted: an integer");
      return 0;
    }
    return v->get<int64_t>();
  }
  int32_t flag(const Json& obj, const std::string& where, const char* key) {
    const Json* v = at(obj, where, key, true);
    if (v == nullptr) return 0;
    if (!v->is_boolean()) {
      error = c.refuse(where + key + " = " + v->dump() + ": accepted: true or false");
      return 0;
    }
    return v->get<bool>() ? 1 : 0;
  }
  double number(const Json& obj, const std::string& where, const char* key) {
    const Json* v = at(obj, where, key, true);
    if (v == nullptr) return 0;
    if (!v->is_number()) {
      error = c.refuse(where + key + " = " + v->dump() + ": accepted: a number");
      return 0;
    }
    return v->get<double>();
  }
  // A list of names or integers into a C array of at most PACTS_BACKEND_LIST_MAX.
  template <class T, class Convert>
  uint32_t list(const Json& obj, const std::string& where, const char* key, T* dst, Convert convert) {
    const Json* v = at(obj, where, key, true);
    if (v == nullptr) return 0;
    if (!v->is_array() || v->size() > PACTS_BACKEND_LIST_MAX) {
      error = c.refuse(where + key + ": accepted: an array of at most " +
                       std::to_string(PACTS_BACKEND_LIST_MAX) + " values");
      return 0;
    }
    uint32_t n = 0;
    for (const Json& x : *v) {
      const std::optional<T> t = convert(x);
      if (!t) {
        error = c.refuse(where + key + ": " + x.dump() + " is not a value of the spec");
        return 0;
      }
      dst[n++] = *t;
    }
    return n;
  }
  void only(const Json& obj, const std::string& where, std::initializer_list<const char*> keys) {
    if (!error) return;
    for (const auto& [k, v] : obj.items()) {
      bool known = false;
      for (const char* key : keys) known |= k == key;
      if (!known) {
        error = c.refuse(where + k + ": not a key of spec/process.md §2");
        return;
      }
    }
  }
};

std::optional<pacts_format> format_of_json(const Json& x) {
  return x.is_string() ? format_named(x.get<std::string>()) : std::nullopt;
}

Status read_declaration(const Checker& c, const std::string& line, Declaration& d) {
  // spec/case_files.md §7's check of JSON text: a child's line is input like any file, so a
  // value nested too deep or a key written twice is refused before a document is built.
  if (Status s = conformance::check_json_text(line, "handshake"); !s) return c.refuse(s.message());
  Json j;
  try {
    j = Json::parse(line);
  } catch (const std::exception& e) {
    return c.refuse(std::string("handshake: not JSON (") + e.what() + "): " + line.substr(0, 200));
  }
  if (!j.is_object()) return c.refuse("handshake: not a JSON object");
  Fields f{c, Status::ok()};
  if (f.text(j, "handshake.", "protocol", true) != "pacts-process" && f.error)
    return c.refuse("handshake.protocol: accepted: \"pacts-process\"");
  const int64_t version = f.integer(j, "handshake.", "version");
  if (!f.error) return f.error;
  if (version != kProtocolVersion)
    return c.refuse("handshake.version = " + std::to_string(version) +
                    ": this pacts implements process protocol version 1");
  f.only(j, "handshake.", {"protocol", "version", "name", "device", "driver", "runtime",
                           "kernel_version", "capabilities", "numerics", "q_requant",
                           "batch_invariant", "timed_calls"});
  d.name = f.text(j, "handshake.", "name", true);
  d.device = f.text(j, "handshake.", "device", true);
  d.driver = f.text(j, "handshake.", "driver", false);
  d.runtime = f.text(j, "handshake.", "runtime", false);
  d.version = f.text(j, "handshake.", "kernel_version", false);
  if (!f.error) return f.error;
  if (!valid_name(d.name.c_str()))
    return c.refuse("handshake.name \"" + d.name +
                    "\": accepted: 1 to 64 characters of A-Z a-z 0-9 . _ -");
  if (d.device.empty()) return c.refuse("handshake.device: accepted: a non-empty string");

  const Json* cj = f.at(j, "handshake.", "capabilities", true);
  const Json* nj = f.at(j, "handshake.", "numerics", true);
  if (!f.error) return f.error;
  if (!cj->is_object() || !nj->is_object())
    return c.refuse("handshake.capabilities and handshake.numerics: accepted: JSON objects");
  const std::string cw = "capabilities.";
  f.only(*cj, cw, {"q_formats", "kv_formats", "out_formats", "scale_modes", "head_dims",
                   "min_page_size", "max_page_size", "max_q_len", "max_group", "chunked_layouts",
                   "sinks", "window", "softcap", "lse", "deterministic", "split_plans",
                   "plan_replay", "large_buffers", "vector_alignment_bytes",
                   "max_element_offset"});
  pacts_backend_capabilities cap{};
  cap.num_q_formats = f.list(*cj, cw, "q_formats", cap.q_formats, format_of_json);
  cap.num_kv_formats = f.list(*cj, cw, "kv_formats", cap.kv_formats, format_of_json);
  cap.num_out_formats = f.list(*cj, cw, "out_formats", cap.out_formats, format_of_json);
  cap.num_scale_modes = f.list(*cj, cw, "scale_modes", cap.scale_modes,
                               [](const Json& x) -> std::optional<pacts_scale_mode> {
                                 return x.is_string() ? scale_mode_named(x.get<std::string>())
                                                      : std::nullopt;
                               });
  cap.num_head_dims = f.list(*cj, cw, "head_dims", cap.head_dims,
                             [](const Json& x) -> std::optional<int32_t> {
                               if (!x.is_number_integer()) return std::nullopt;
                               const int64_t v = x.get<int64_t>();
                               return v > 0 && v < 65536 ? std::optional<int32_t>(v) : std::nullopt;
                             });
  const auto int32_field = [&](const char* key) {
    const int64_t v = f.integer(*cj, cw, key);
    if (f.error && (v < INT32_MIN || v > INT32_MAX))
      f.error = c.refuse(cw + key + " = " + std::to_string(v) + ": accepted: a 32-bit integer");
    return static_cast<int32_t>(v);
  };
  cap.min_page_size = int32_field("min_page_size");
  cap.max_page_size = int32_field("max_page_size");
  cap.max_q_len = int32_field("max_q_len");
  cap.max_group = int32_field("max_group");
  cap.chunked_layouts = f.flag(*cj, cw, "chunked_layouts");
  cap.sinks = f.flag(*cj, cw, "sinks");
  cap.window = f.flag(*cj, cw, "window");
  cap.softcap = f.flag(*cj, cw, "softcap");
  cap.lse = f.flag(*cj, cw, "lse");
  cap.deterministic = f.flag(*cj, cw, "deterministic");
  cap.split_plans = f.flag(*cj, cw, "split_plans");
  cap.plan_replay = f.flag(*cj, cw, "plan_replay");
  cap.large_buffers = f.flag(*cj, cw, "large_buffers");
  const int64_t align = f.integer(*cj, cw, "vector_alignment_bytes");
  cap.vector_alignment_bytes = align > 0 && align <= UINT32_MAX ? static_cast<uint32_t>(align) : 0;
  cap.max_element_offset = f.integer(*cj, cw, "max_element_offset");
  const std::string nw = "numerics.";
  f.only(*nj, nw, {"u_logit", "u_q", "u_p", "eta_p", "u_acc", "u_partial", "eps_exp", "eps_tanh",
                   "eps_log", "p_rounded_in_denominator", "ftz", "eta_p_formats"});
  pacts_backend_numerics num{};
  num.u_logit = f.number(*nj, nw, "u_logit");
  num.u_q = f.number(*nj, nw, "u_q");
  num.u_p = f.number(*nj, nw, "u_p");
  num.eta_p = f.number(*nj, nw, "eta_p");
  num.u_acc = f.number(*nj, nw, "u_acc");
  num.u_partial = f.number(*nj, nw, "u_partial");
  num.eps_exp = f.number(*nj, nw, "eps_exp");
  num.eps_tanh = f.number(*nj, nw, "eps_tanh");
  num.eps_log = f.number(*nj, nw, "eps_log");
  num.p_rounded_in_denominator = f.flag(*nj, nw, "p_rounded_in_denominator");
  num.ftz = f.flag(*nj, nw, "ftz");
  if (!f.error) return f.error;
  if (Status s = check_capabilities_of(c, cap, d.caps); !s) return s;
  if (Status s = check_numerics_of(c, num, d.name, d.profile); !s) return s;
  // eta_p_formats (optional): {"kv_formats": [...], "eta_p": x}, spec/tolerance.md §2.
  if (const Json* e = f.at(*nj, nw, "eta_p_formats", false); e != nullptr) {
    if (!e->is_object()) return c.refuse("numerics.eta_p_formats: accepted: a JSON object");
    f.only(*e, "numerics.eta_p_formats.", {"kv_formats", "eta_p"});
    pacts_format formats[PACTS_BACKEND_LIST_MAX];
    const uint32_t n = f.list(*e, "numerics.eta_p_formats.", "kv_formats", formats, format_of_json);
    const double eta = f.number(*e, "numerics.eta_p_formats.", "eta_p");
    if (!f.error) return f.error;
    if (Status s = c.number("eta_p_formats.eta_p", eta); !s) return s;
    for (uint32_t i = 0; i < n; ++i) d.profile.eta_p_formats.kv_formats |= spec::format_bit(formats[i]);
    d.profile.eta_p_formats.eta_p = eta;
  }
  // Version 2's extension of the C ABI: the query requantisation and the batch-invariant plan.
  pacts_backend_v2_extension v2{};
  if (const Json* b = f.at(j, "handshake.", "batch_invariant", false); b != nullptr) {
    if (!b->is_boolean()) return c.refuse("handshake.batch_invariant: accepted: true or false");
    v2.batch_invariant = b->get<bool>() ? 1 : 0;
  }
  if (const Json* q = f.at(j, "handshake.", "q_requant", false); q != nullptr) {
    if (!q->is_object()) return c.refuse("handshake.q_requant: accepted: a JSON object");
    f.only(*q, "q_requant.", {"rule", "kv_formats"});
    const std::string rule = f.text(*q, "q_requant.", "rule", true);
    if (!f.error) return f.error;
    if (rule == "fp8-row-pow2") {
      v2.q_requant = PACTS_Q_REQUANT_FP8_ROW_POW2;
      v2.num_q_requant_kv_formats =
          f.list(*q, "q_requant.", "kv_formats", v2.q_requant_kv_formats, format_of_json);
      if (!f.error) return f.error;
    } else if (rule != "none") {
      return c.refuse("q_requant.rule \"" + rule + "\": accepted: none, fp8-row-pow2");
    }
  }
  if (Status s = check_v2_extension_of(c, v2, d.profile, d.caps); !s) return s;
  if (const Json* t = f.at(j, "handshake.", "timed_calls", false); t != nullptr) {
    if (!t->is_boolean()) return c.refuse("handshake.timed_calls: accepted: true or false");
    d.timed_calls = t->get<bool>();
  }
  d.canonical = line;
  return Status::ok();
}

// ---- the child process --------------------------------------------------------------------

class Child {
 public:
  Child() = default;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() { stop(); }

  Status start(const std::string& command) {
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0) return spec::Status(spec::Code::kInternal, "pipe: " + std::string(std::strerror(errno)));
    if (pipe2(out, O_CLOEXEC) != 0) {
      close(in[0]);
      close(in[1]);
      return spec::Status(spec::Code::kInternal, "pipe: " + std::string(std::strerror(errno)));
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);  // a group of its own: a timeout kills all of it
    const char* argv[] = {"sh", "-c", command.c_str(), nullptr};
    const int rc = posix_spawn(&pid_, "/bin/sh", &actions, &attr, const_cast<char**>(argv), environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    close(in[0]);
    close(out[1]);
    if (rc != 0) {
      close(in[1]);
      close(out[0]);
      pid_ = -1;
      return spec::Status(spec::Code::kInternal, "cannot start /bin/sh: " + std::string(std::strerror(rc)));
    }
    to_child_ = in[1];
    from_child_ = out[0];
    buffer_.clear();
    return Status::ok();
  }

  bool running() const { return pid_ > 0; }

  // false when the child is gone (its pipe closed).
  bool send(const std::string& line) {
    std::string data = line + "\n";
    size_t done = 0;
    while (done < data.size()) {
      const ssize_t n = write(to_child_, data.data() + done, data.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      done += static_cast<size_t>(n);
    }
    return true;
  }

  enum class Got { kLine, kEof, kTimeout, kTooLong };
  Got read_line(std::string& line, int seconds) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    for (;;) {
      if (const size_t nl = buffer_.find('\n'); nl != std::string::npos) {
        line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return Got::kLine;
      }
      if (buffer_.size() > kMaxLine) return Got::kTooLong;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return Got::kTimeout;
      pollfd p{from_child_, POLLIN, 0};
      const int r = poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) continue;
      char chunk[65536];
      const ssize_t n = read(from_child_, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return Got::kEof;
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }

  // How the child ended, after its output closed: "exit status N", "signal N (SIGSEGV)".
  std::string ended() {
    if (pid_ <= 0) return "not running";
    int status = 0;
    pid_t r = 0;
    for (int i = 0; i < 50 && (r = waitpid(pid_, &status, WNOHANG)) == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (r == 0) {  // output closed but still alive: end it
      kill(-pid_, SIGKILL);
      waitpid(pid_, &status, 0);
    }
    close_pipes();
    pid_ = -1;
    if (WIFSIGNALED(status))
      return "signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
    const int code = WEXITSTATUS(status);
    // /bin/sh reports a command killed by signal N as exit status 128 + N.
    if (code > 128 && code < 128 + 65)
      return "exit status " + std::to_string(code) + " (signal " + std::to_string(code - 128) +
             ", " + strsignal(code - 128) + ")";
    return "exit status " + std::to_string(code);
  }

  void kill_group() {
    if (pid_ <= 0) return;
    kill(-pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    close_pipes();
    pid_ = -1;
  }

  // `exit`, then up to 5 s, then the group is killed (spec/process.md §5).
  void stop() {
    if (pid_ <= 0) return;
    send(R"({"op": "exit"})");
    close(to_child_);
    to_child_ = -1;
    int status = 0;
    for (int i = 0; i < 250; ++i) {
      if (waitpid(pid_, &status, WNOHANG) != 0) {
        close_pipes();
        pid_ = -1;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    kill_group();
  }

 private:
  void close_pipes() {
    if (to_child_ >= 0) close(to_child_);
    if (from_child_ >= 0) close(from_child_);
    to_child_ = from_child_ = -1;
  }

  pid_t pid_ = -1;
  int to_child_ = -1, from_child_ = -1;
  std::string buffer_;
};

// Writing to a child that died must fail the call, not end pacts by SIGPIPE.
void ignore_sigpipe() {
  static std::once_flag once;
  std::call_once(once, [] { signal(SIGPIPE, SIG_IGN); });
}

std::atomic<uint64_t> g_calls{0};

class ProcessBackend final : public Backend {
 public:
  explicit ProcessBackend(std::string command, std::string display_name = "")
      : command_(std::move(command)), display_(std::move(display_name)) {}

  // Starts the child and reads its declaration.
  Status open() {
    const Checker c("exec child '" + command_ + "'");
    std::string line;
    if (Status s = start_child(c, line); !s) return s;
    const Status s = read_declaration(c, line, declared_);
    if (!s) child_.kill_group();  // refused: not asked to exit, not waited for
    info_.command = command_;
    info_.declared = declared_.name;
    info_.driver = declared_.driver;
    info_.runtime = declared_.runtime;
    info_.kernel_version = declared_.version;
    return s;
  }

  const ProcessInfo& info() const { return info_; }
  ProcessInfo& info() { return info_; }

  std::string name() const override { return display_.empty() ? kProcessPrefix + command_ : display_; }
  std::string device() const override { return declared_.device; }
  const conformance::Capabilities& capabilities() const override { return declared_.caps; }
  const spec::NumericsProfile& profile() const override { return declared_.profile; }

  RunResult run(const pacts_problem& problem, const pacts_buffers& buffers,
                const PlanHint& hint) override {
    return call("run", problem, buffers, {}, hint);
  }

  RunResult run_replayed(const pacts_problem& problem, const pacts_buffers& buffers,
                         std::span<const int32_t> replayed, const PlanHint& hint) override {
    if (!declared_.caps.plan_replay) return Backend::run_replayed(problem, buffers, replayed, hint);
    if (replayed.size() != static_cast<size_t>(std::max(problem.batch, 0))) {
      RunResult r;
      r.status = spec::invalid_argument("replayed_context_lens: " + std::to_string(replayed.size()) +
                                        " values: accepted: exactly batch = " +
                                        std::to_string(problem.batch));
      return r;
    }
    return call("run_replayed", problem, buffers, replayed, hint);
  }

  bool timed_calls() const { return declared_.timed_calls; }

  // spec/process.md §6: the call prepared in the child, one untimed run whose results land in
  // `buffers` as run()'s do.
  spec::Result<ChildTimedCall> prepare_timed(const pacts_problem& problem,
                                             const pacts_buffers& buffers, uint64_t flush_bytes) {
    if (!declared_.timed_calls)
      return spec::not_supported("exec child '" + command_ + "': declares no timed calls "
                                 "(spec/process.md §6)");
    Json reply;
    const RunResult r = call("time_prepare", problem, buffers, {}, PlanHint::automatic(),
                             Json{{"flush_bytes", flush_bytes}}, &reply);
    if (!r.status) return r.status;
    ChildTimedCall t;
    t.plan = r.plan;
    t.device_error = r.device_error;
    const Json m = reply.value("method", Json(""));
    if (!m.is_string() || m.get<std::string>().empty() || m.get<std::string>().size() > 200) {
      const RunResult g = garbage("method: accepted: 1 to 200 characters saying how the child times");
      return g.status;
    }
    t.method = m.get<std::string>();
    return t;
  }

  // spec/process.md §6: `reps` timed calls of the prepared call, in microseconds.
  spec::Result<std::vector<double>> time(int32_t reps) {
    Json reply;
    RunResult r;
    if (std::optional<RunResult> lost = request({{"op", "time"}, {"reps", reps}}, reply, r))
      return lost->status;
    if (!r.status) return r.status;
    const Json t = reply.value("times_us", Json());
    std::vector<double> us;
    if (t.is_array() && t.size() == static_cast<size_t>(reps))
      for (const Json& x : t)
        if (x.is_number() && std::isfinite(x.get<double>()) && x.get<double>() > 0)
          us.push_back(x.get<double>());
    if (us.size() != static_cast<size_t>(reps))
      return garbage("times_us: accepted: " + std::to_string(reps) +
                     " positive finite numbers (one per timed call)").status;
    return us;
  }

  // spec/process.md §6: the prepared call released.
  Status end_timed() {
    Json reply;
    RunResult r;
    if (std::optional<RunResult> lost = request({{"op", "time_end"}}, reply, r)) return lost->status;
    return r.status;
  }

 private:
  Status start_child(const Checker& c, std::string& line) {
    ignore_sigpipe();
    if (Status s = child_.start(command_); !s) return c.refuse(s.message());
    const int limit = timeout_s(60);
    switch (child_.read_line(line, limit)) {
      case Child::Got::kLine: return Status::ok();
      case Child::Got::kEof: return c.refuse("crashed before its handshake: " + child_.ended());
      case Child::Got::kTimeout:
        child_.kill_group();
        return c.refuse("timed out: no handshake within " + std::to_string(limit) + " s");
      case Child::Got::kTooLong:
        child_.kill_group();
        return c.refuse("answered garbage: a handshake line over 1 MiB");
    }
    return c.refuse("no handshake");
  }

  RunResult failed(const std::string& what) {
    RunResult r;
    r.status = spec::Status(spec::Code::kInternal, "exec child '" + command_ + "' " + what);
    if (what.rfind("crashed", 0) == 0) r.lost = RunResult::Lost::kCrash;
    if (what.rfind("timed out", 0) == 0) r.lost = RunResult::Lost::kTimeout;
    return r;
  }

  RunResult call(const char* op, const pacts_problem& problem, const pacts_buffers& buffers,
                 std::span<const int32_t> replayed, const PlanHint& hint,
                 const Json& extra = Json::object(), Json* reply_out = nullptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    const Spend spend{std::chrono::steady_clock::now(), &spent_};
    const int run_limit = run_limit_s();
    const double left_s = run_limit > 0 ? run_limit - spent_.count() : 1e18;
    if (left_s <= 0) return run_limit_spent(run_limit);
    // A problem the spec refuses cannot be written as an exchange directory: it is refused here,
    // with the child's declared requirements, as an adapter's own validation would
    // (spec/process.md §3).
    RunResult r;
    if (Status s = spec::validate(problem, buffers, declared_.caps.requirements); !s) {
      r.status = s;
      return r;
    }
    if (!child_.running()) {  // after a crash or a timeout: the same declaration, or no call
      const Checker c("exec child '" + command_ + "' (restarted)");
      std::string line;
      if (Status s = start_child(c, line); !s) return failed("crashed: could not restart: " + s.message());
      Declaration again;
      if (Status s = read_declaration(c, line, again); !s) return failed("crashed: restarted: " + s.message());
      if (again.canonical != declared_.canonical)
        return failed("crashed: restarted with another declaration than its first");
    }
    CaseData c;
    c.problem = problem;
    c.allocate();
    const auto take = [](std::vector<uint8_t>& dst, const pacts_view& v) {
      if (v.data != nullptr)
        std::memcpy(dst.data(), v.data, std::min<size_t>(dst.size(), v.bytes));
    };
    take(c.q, buffers.q);
    take(c.k, buffers.k);
    take(c.v, buffers.v);
    take(c.k_scale, buffers.k_scale);
    take(c.v_scale, buffers.v_scale);
    take(c.sinks, buffers.sinks);
    take(c.out, buffers.out);
    take(c.lse, buffers.lse);
    if (buffers.block_table.data != nullptr)
      std::memcpy(c.block_table.data(), buffers.block_table.data,
                  std::min<size_t>(c.block_table.size() * 4, buffers.block_table.bytes));
    if (buffers.context_lens.data != nullptr)
      std::memcpy(c.context_lens.data(), buffers.context_lens.data,
                  std::min<size_t>(c.context_lens.size() * 4, buffers.context_lens.bytes));

    const uint64_t id = ++ids_;
    const fs::path dir = scratch_root() / ("pacts-exec-" + std::to_string(getpid()) + "-" +
                                           std::to_string(++g_calls));
    struct Cleanup {
      fs::path dir;
      ~Cleanup() {
        std::error_code ec;
        fs::remove_all(dir, ec);
      }
    } cleanup{dir};
    conformance::ExchangeExtras extras;
    extras.out = &c.out;  // the allocations' current bytes (guard bytes included)
    extras.lse = &c.lse;
    if (Status s = conformance::dump_case(c, dir.string(), &extras); !s) {
      r.status = spec::Status(spec::Code::kInternal, "exchange directory " + dir.string() + ": " + s.message());
      return r;
    }
    if (!replayed.empty() || std::string(op) == "run_replayed") {
      conformance::NpyArray lens;
      lens.type = conformance::NpyType::kI32;
      lens.shape = {replayed.size()};
      lens.data.resize(replayed.size() * 4);
      std::memcpy(lens.data.data(), replayed.data(), lens.data.size());
      if (Status s = conformance::write_npy((dir / "replayed_context_lens.npy").string(), lens); !s) {
        r.status = s;
        return r;
      }
    }
    Json request = {{"op", op},
                    {"id", id},
                    {"dir", dir.string()},
                    {"hint", {{"kind", hint_kind_name(hint.kind)}, {"value", hint.value}}}};
    for (const auto& [key, value] : extra.items()) request[key] = value;
    Json reply;
    if (std::optional<RunResult> lost = converse(request, id, dir, left_s, run_limit, reply, r))
      return *lost;
    if (reply_out != nullptr) *reply_out = reply;
    if (!r.status) return r;  // a refusal writes nothing
    if (Status s = conformance::load_results(dir.string(), c); !s) return garbage(s.message());
    if (buffers.out.data != nullptr)
      std::memcpy(buffers.out.data, c.out.data(), std::min<size_t>(c.out.size(), buffers.out.bytes));
    if (problem.want_lse && buffers.lse.data != nullptr)
      std::memcpy(buffers.lse.data, c.lse.data(), std::min<size_t>(c.lse.size(), buffers.lse.bytes));
    return r;
  }

  // The run's time limit (spec/process.md §5): each request's wall time is added to spent_ when
  // its Spend ends; once the limit is spent, every later request is a Timeout without reaching
  // the child (the backend is skipped, the run goes on).
  struct Spend {
    std::chrono::steady_clock::time_point at;
    std::chrono::duration<double>* total;
    ~Spend() { *total += std::chrono::steady_clock::now() - at; }
  };
  RunResult run_limit_spent(int run_limit) {
    return failed("timed out: the run's time limit of " + std::to_string(run_limit) +
                  " s (PACTS_EXEC_RUN_LIMIT_S) is spent; the backend is skipped");
  }

  // A request without an exchange directory (spec/process.md §6's time and time_end) to a child
  // that is running: a child that crashed since lost what it had prepared.
  std::optional<RunResult> request(Json req, Json& reply, RunResult& r) {
    std::lock_guard<std::mutex> lock(mutex_);
    const Spend spend{std::chrono::steady_clock::now(), &spent_};
    const int run_limit = run_limit_s();
    const double left_s = run_limit > 0 ? run_limit - spent_.count() : 1e18;
    if (left_s <= 0) return run_limit_spent(run_limit);
    if (!child_.running()) return failed("crashed: " + child_.ended() + " (its prepared call is lost)");
    const uint64_t id = ++ids_;
    req["id"] = id;
    return converse(req, id, fs::path(), left_s, run_limit, reply, r);
  }

  RunResult garbage(const std::string& why) {
    child_.kill_group();  // its state is unknown: the next call starts it again
    return failed("answered garbage: " + why);
  }

  // Sends `request` (its id `id`) and reads the reply into `reply`, `r` taking its status,
  // device error bits and plan; the failure of spec/process.md §4 when the child crashed, timed
  // out or answered garbage, else nullopt. `dir`: the call's exchange directory ("" for none),
  // where a guard fault's note is looked for.
  std::optional<RunResult> converse(const Json& request, uint64_t id, const fs::path& dir,
                                    double left_s, int run_limit, Json& reply, RunResult& r) {
    if (!child_.send(request.dump())) return failed("crashed: " + child_.ended() + guard_note(dir));
    std::string line;
    const int call_limit = timeout_s(120);
    // The call's limit, or what is left of the run's when that is shorter (at least 1 s).
    const bool run_bound = left_s < call_limit;
    const int limit = run_bound ? std::max(1, static_cast<int>(left_s)) : call_limit;
    switch (child_.read_line(line, limit)) {
      case Child::Got::kLine: break;
      case Child::Got::kEof: return failed("crashed: " + child_.ended() + guard_note(dir));
      case Child::Got::kTimeout:
        child_.kill_group();
        if (run_bound)
          return failed("timed out: no reply within the " + std::to_string(limit) +
                        " s left of the run's time limit of " + std::to_string(run_limit) +
                        " s (PACTS_EXEC_RUN_LIMIT_S)");
        return failed("timed out: no reply within " + std::to_string(limit) + " s");
      case Child::Got::kTooLong:
        child_.kill_group();
        return failed("answered garbage: a reply line over 1 MiB");
    }
    // Checked before it is built (spec/case_files.md §7): a reply nested too deep must not
    // exhaust the stack, and a key written twice must not silently lose its first value.
    if (Status s = conformance::check_json_text(line, "reply to request " + std::to_string(id)); !s)
      return garbage(s.message());
    try {
      reply = Json::parse(line);
    } catch (const std::exception&) {
      return garbage("not JSON: " + line.substr(0, 200));
    }
    if (!reply.is_object() || !reply.contains("id") || !reply["id"].is_number_unsigned() ||
        reply["id"].get<uint64_t>() != id)
      return garbage("not a reply to request " + std::to_string(id) + ": " + line.substr(0, 200));
    if (!reply.contains("status") || !reply["status"].is_string())
      return garbage("no status: " + line.substr(0, 200));
    const std::optional<spec::Code> code = status_named(reply["status"].get<std::string>());
    if (!code) return garbage("status \"" + reply["status"].get<std::string>() + "\" is none of spec/process.md §3");
    const std::string message = reply.value("message", std::string());
    if (reply.contains("device_error")) {
      if (!reply["device_error"].is_number_unsigned() || reply["device_error"].get<uint64_t>() > UINT32_MAX)
        return garbage("device_error: accepted: an unsigned 32-bit integer");
      r.device_error = static_cast<uint32_t>(reply["device_error"].get<uint64_t>());
    }
    if (reply.contains("plan")) {
      const Json& p = reply["plan"];
      if (!p.is_object() || !p.value("partition_size", Json(0)).is_number_integer() ||
          !p.value("max_partitions", Json(1)).is_number_integer() ||
          !p.value("variant", Json("")).is_string())
        return garbage("plan: accepted: {\"partition_size\": int, \"max_partitions\": int, \"variant\": string}");
      r.plan.partition_size = p.value("partition_size", 0);
      r.plan.max_partitions = p.value("max_partitions", 1);
      r.plan.variant = p.value("variant", std::string());
    }
    if (*code != spec::Code::kOk) r.status = spec::Status(*code, message);
    return std::nullopt;
  }

  std::string command_;
  std::string display_;  // the name() of an isolated plugin ("lib:PATH"), else ""
  ProcessInfo info_;
  Declaration declared_;
  Child child_;
  std::mutex mutex_;
  uint64_t ids_ = 0;
  std::chrono::duration<double> spent_{0};  // the calls' wall time (the run's time limit)
};

// ---- the serving side ---------------------------------------------------------------------

Json format_list(const std::vector<pacts_format>& v) {
  Json a = Json::array();
  for (pacts_format f : v) a.push_back(std::string(spec::format_name(f)));
  return a;
}

Json formats_of_mask(uint32_t mask) {
  Json a = Json::array();
  for (int f = PACTS_FORMAT_BF16; f <= PACTS_FORMAT_E8M0; ++f)
    if (mask & spec::format_bit(static_cast<pacts_format>(f)))
      a.push_back(std::string(spec::format_name(static_cast<pacts_format>(f))));
  return a;
}

std::optional<PlanHint> hint_of(const Json& h) {
  if (!h.is_object() || !h.contains("kind") || !h["kind"].is_string()) return std::nullopt;
  const std::string k = h["kind"].get<std::string>();
  const int32_t v = h.value("value", 0);
  if (k == "automatic") return PlanHint::automatic();
  if (k == "partition_size") return PlanHint::partition_size(v);
  if (k == "partitions") return PlanHint::partitions(v);
  if (k == "batch_invariant") return PlanHint::batch_invariant(v);
  return std::nullopt;
}

std::string reply_line(int64_t id, const RunResult& r) {
  Json j = {{"id", id},
            {"status", status_name(r.status.code())},
            {"message", r.status.is_ok() ? std::string() : r.status.message()},
            {"device_error", r.device_error},
            {"plan",
             {{"partition_size", r.plan.partition_size},
              {"max_partitions", r.plan.max_partitions},
              {"variant", r.plan.variant}}}};
  return j.dump();
}

}  // namespace

spec::Result<std::unique_ptr<Backend>> start_process_backend(const std::string& command) {
  if (command.empty())
    return spec::invalid_argument(std::string(kProcessPrefix) + ": accepted: a command after the prefix");
  auto backend = std::make_unique<ProcessBackend>(command);
  if (Status s = backend->open(); !s) return s;
  return std::unique_ptr<Backend>(std::move(backend));
}

namespace {

// A word for /bin/sh: single quotes, with each ' written as '\''.
std::string shell_quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace

spec::Result<std::unique_ptr<Backend>> start_isolated_plugin(const std::string& library,
                                                             const std::string& child_program) {
  std::error_code ec;
  const std::string absolute = fs::absolute(fs::path(library), ec).lexically_normal().string();
  if (child_program.empty())
    return spec::not_supported("backend library " + absolute +
                               ": no pacts-child to isolate it in (set PACTS_CHILD, or run the "
                               "plugin in this process)");
  const std::string command =
      shell_quoted(child_program) + " --backend " + shell_quoted("lib:" + absolute);
  auto backend = std::make_unique<ProcessBackend>(command, std::string("lib:") + absolute);
  if (Status s = backend->open(); !s) return s;
  backend->info().library = absolute;
  return std::unique_ptr<Backend>(std::move(backend));
}

std::string find_child_program() {
  if (const char* env = std::getenv("PACTS_CHILD"); env != nullptr && *env != '\0') return env;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  for (const fs::path& candidate :
       {self.parent_path() / "pacts-child", self.parent_path().parent_path() / "tools" / "pacts-child"})
    if (fs::is_regular_file(candidate, ec) && access(candidate.c_str(), X_OK) == 0)
      return candidate.string();
  return "";
}

const ProcessInfo* process_info(const Backend& backend) {
  const auto* p = dynamic_cast<const ProcessBackend*>(&backend);
  return p ? &p->info() : nullptr;
}

bool child_timed_calls(const Backend& backend) {
  const auto* p = dynamic_cast<const ProcessBackend*>(&backend);
  return p != nullptr && p->timed_calls();
}

namespace {
spec::Result<ProcessBackend*> timed_child(Backend& backend) {
  auto* p = dynamic_cast<ProcessBackend*>(&backend);
  if (p == nullptr)
    return spec::invalid_argument("backend " + backend.name() + ": not a process backend (exec:)");
  return p;
}
}  // namespace

spec::Result<ChildTimedCall> child_prepare_timed(Backend& backend, const pacts_problem& problem,
                                                 const pacts_buffers& buffers, uint64_t flush_bytes) {
  spec::Result<ProcessBackend*> p = timed_child(backend);
  if (!p) return p.status();
  return p.value()->prepare_timed(problem, buffers, flush_bytes);
}

spec::Result<std::vector<double>> child_time(Backend& backend, int32_t reps) {
  spec::Result<ProcessBackend*> p = timed_child(backend);
  if (!p) return p.status();
  if (reps < 1 || reps > 100000)
    return spec::invalid_argument("reps " + std::to_string(reps) + ": accepted 1 to 100000");
  return p.value()->time(reps);
}

spec::Status child_end_timed(Backend& backend) {
  spec::Result<ProcessBackend*> p = timed_child(backend);
  if (!p) return p.status();
  return p.value()->end_timed();
}

void register_process_backend() {
  conformance::BackendFactory f;
  f.name = kProcessPrefix;
  f.kind = conformance::NameKind::kPrefix;
  f.listed = false;
  f.make = [](const std::string& command) -> std::unique_ptr<Backend> {
    auto b = start_process_backend(command);
    if (b) return std::move(b).value();
    std::fprintf(stderr, "%s\n", b.status().to_string().c_str());
    return nullptr;
  };
  conformance::register_backend(std::move(f));
}

std::string handshake_line(const Backend& backend, const ChildIdentity& id) {
  const conformance::Capabilities& c = backend.capabilities();
  const spec::NumericsProfile& p = backend.profile();
  Json modes = Json::array();
  for (pacts_scale_mode m : c.scale_modes) modes.push_back(kScaleModeNames[m]);
  Json numerics = {{"u_logit", p.u_logit},
                   {"u_q", p.u_q},
                   {"u_p", p.u_p},
                   {"eta_p", p.eta_p},
                   {"u_acc", p.u_acc},
                   {"u_partial", p.u_partial},
                   {"eps_exp", p.eps_exp},
                   {"eps_tanh", p.eps_tanh},
                   {"eps_log", p.eps_log},
                   {"p_rounded_in_denominator", p.p_rounded_in_denominator},
                   {"ftz", p.ftz}};
  if (p.eta_p_formats.kv_formats != 0)
    numerics["eta_p_formats"] = {{"kv_formats", formats_of_mask(p.eta_p_formats.kv_formats)},
                                 {"eta_p", p.eta_p_formats.eta_p}};
  Json j = {{"protocol", "pacts-process"},
            {"version", kProtocolVersion},
            {"name", id.name},
            {"device", id.device},
            {"driver", id.driver},
            {"runtime", id.runtime},
            {"kernel_version", id.kernel_version},
            {"capabilities",
             {{"q_formats", format_list(c.q_formats)},
              {"kv_formats", format_list(c.kv_formats)},
              {"out_formats", format_list(c.out_formats)},
              {"scale_modes", modes},
              {"head_dims", c.head_dims},
              {"min_page_size", c.min_page_size},
              {"max_page_size", c.max_page_size},
              {"max_q_len", c.max_q_len},
              {"max_group", c.max_group},
              {"chunked_layouts", c.chunked_layouts},
              {"sinks", c.sinks},
              {"window", c.window},
              {"softcap", c.softcap},
              {"lse", c.lse},
              {"deterministic", c.deterministic},
              {"split_plans", c.split_plans},
              {"plan_replay", c.plan_replay},
              {"large_buffers", c.large_buffers},
              {"vector_alignment_bytes", c.requirements.vector_alignment_bytes},
              {"max_element_offset", c.requirements.max_element_offset}}},
            {"numerics", numerics},
            {"batch_invariant", c.batch_invariant}};
  if (id.timed_calls) j["timed_calls"] = true;
  if (p.q_requant.kind == spec::QueryRequant::kFp8RowPow2)
    j["q_requant"] = {{"rule", "fp8-row-pow2"}, {"kv_formats", formats_of_mask(p.q_requant.kv_formats)}};
  return j.dump();
}

namespace {

// The serving side of spec/process.md §6 for a backend that computes in host memory: the
// prepared case kept in this process, each timed call its run() between two readings of the host
// clock, a write of `flush_bytes` bytes before each (the caches flushed, as pacts-bench does).
struct TimedServing {
  static constexpr const char* kMethod =
      "host clock (steady_clock) around each run() of the served backend, its plan included";
  std::optional<CaseData> prepared;
  PlanHint hint = PlanHint::automatic();
  std::vector<uint8_t> flush;

  static std::string with_method(const std::string& reply) {
    Json j = Json::parse(reply);
    j["method"] = kMethod;
    return j.dump();
  }

  RunResult prepare(Backend& backend, CaseData& c, const PlanHint& h, const Json& flush_bytes) {
    RunResult r;
    constexpr uint64_t kMaxFlush = uint64_t{1} << 30;
    if (!flush_bytes.is_number_unsigned() || flush_bytes.get<uint64_t>() > kMaxFlush) {
      r.status = spec::invalid_argument("flush_bytes: accepted: 0 to 2^30");
      return r;
    }
    prepared = c;
    hint = h;
    flush.assign(flush_bytes.get<uint64_t>(), 0);
    r = backend.run(prepared->problem, prepared->buffers(), hint);  // untimed: its results replied
    if (r.status.is_ok()) {
      c.out = prepared->out;
      c.lse = prepared->lse;
    } else {
      prepared.reset();
    }
    return r;
  }

  std::string serve(Backend& backend, const std::string& op, int64_t id, const Json& req) {
    Json reply = {{"id", id}, {"status", "ok"}, {"message", ""}};
    const auto refuse = [&](spec::Code code, const std::string& why) {
      reply["status"] = status_name(code);
      reply["message"] = why;
      return reply.dump();
    };
    if (!prepared) return refuse(spec::Code::kInvalidArgument, op + ": no call prepared (time_prepare first)");
    if (op == "time_end") {
      prepared.reset();
      flush.clear();
      return reply.dump();
    }
    const Json reps = req.value("reps", Json());
    if (!reps.is_number_unsigned() || reps.get<uint64_t>() < 1 || reps.get<uint64_t>() > 100000)
      return refuse(spec::Code::kInvalidArgument, "reps: accepted: 1 to 100000");
    Json times = Json::array();
    const pacts_buffers buffers = prepared->buffers();
    for (uint64_t i = 0; i < reps.get<uint64_t>(); ++i) {
      for (size_t at = 0; at < flush.size(); at += 64) flush[at] = static_cast<uint8_t>(flush[at] + 1);
      const auto t0 = std::chrono::steady_clock::now();
      const RunResult r = backend.run(prepared->problem, buffers, hint);
      const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      if (!r.status) return refuse(r.status.code(), r.status.message());
      times.push_back(std::max(us, 1e-3));
    }
    reply["times_us"] = times;
    return reply.dump();
  }
};

}  // namespace

int serve(Backend& backend, const ChildIdentity& identity, std::FILE* in, std::FILE* out,
          const ServeHooks& hooks) {
  TimedServing timed;
  const auto emit = [&](const std::string& line) {
    std::fputs(line.c_str(), out);
    std::fputc('\n', out);
    std::fflush(out);
  };
  emit(handshake_line(backend, identity));
  std::string line;
  for (int ch; (ch = std::fgetc(in)) != EOF;) {
    if (ch != '\n') {
      line.push_back(static_cast<char>(ch));
      continue;
    }
    Json req;
    if (const Status s = conformance::check_json_text(line, "request"); !s) {
      std::fprintf(stderr, "pacts-child: a request refused: %s\n", s.message().c_str());
      return 2;
    }
    try {
      req = Json::parse(line);
    } catch (const std::exception&) {
      std::fprintf(stderr, "pacts-child: a request that is not JSON: %s\n", line.substr(0, 200).c_str());
      return 2;
    }
    line.clear();
    const std::string op = req.value("op", std::string());
    if (op == "exit") return 0;
    const bool timing = identity.timed_calls && (op == "time" || op == "time_end");
    const bool with_dir = op == "run" || op == "run_replayed" || (identity.timed_calls && op == "time_prepare");
    if ((!with_dir && !timing) || !req.contains("id") || !req["id"].is_number_integer() ||
        (with_dir && (!req.contains("dir") || !req["dir"].is_string()))) {
      std::fprintf(stderr, "pacts-child: not a request of spec/process.md §3 or §6: %s\n", req.dump().c_str());
      return 2;
    }
    const int64_t id = req["id"].get<int64_t>();
    if (timing) {
      if (hooks.before_call) hooks.before_call(id);
      std::string reply = timed.serve(backend, op, id, req);
      if (hooks.reply) reply = hooks.reply(id, reply);
      emit(reply);
      continue;
    }
    const std::string dir = req["dir"].get<std::string>();
    if (hooks.before_call) hooks.before_call(id);
    RunResult r;
    const std::optional<PlanHint> hint = hint_of(req.value("hint", Json::object()));
    auto loaded = conformance::load_case(dir);
    if (!hint) {
      r.status = spec::invalid_argument("hint: accepted: {\"kind\": automatic | partition_size | "
                                        "partitions | batch_invariant, \"value\": int}");
    } else if (!loaded) {
      r.status = loaded.status();
    } else {
      CaseData c = std::move(loaded).value();
      // The output allocations as pacts wrote them: their guard bytes stay unless written.
      if (Status s = conformance::load_results(dir, c); !s) {
        r.status = spec::Status(spec::Code::kInternal, "pacts-child: " + s.message());
      } else {
        // The backend runs on guarded copies of the buffers (guard_zones.h): an access outside
        // them faults and is named in the exchange directory's note, a write outside out and lse
        // is named after the call.
        std::vector<int32_t> replay;
        if (op == "run_replayed") {
          auto lens = conformance::read_npy(dir + "/replayed_context_lens.npy");
          if (!lens || lens.value().type != conformance::NpyType::kI32) {
            r.status = spec::invalid_argument("replayed_context_lens.npy: accepted: int32, batch values");
          } else {
            replay.resize(lens.value().elements());
            std::memcpy(replay.data(), lens.value().data.data(), replay.size() * 4);
          }
        }
        detail::GuardZones guard;
        const pacts_buffers views = c.buffers();
        if (op == "time_prepare") {  // §6: on plain buffers, kept for the timed calls
          if (r.status.is_ok()) r = timed.prepare(backend, c, *hint, req.value("flush_bytes", Json(0)));
        } else if (r.status.is_ok()) r.status = guard.place(views, dir + "/" + kGuardNote);
        if (r.status.is_ok() && op != "time_prepare") {
          r = op == "run" ? backend.run(c.problem, guard.views(), *hint)
                          : backend.run_replayed(c.problem, guard.views(), replay, *hint);
          if (Status outside = guard.check(op == "run" ? nullptr : &replay); !outside)
            r.status = outside;
          else
            guard.copy_outputs(views);
        }
      }
      if (r.status.is_ok() && hooks.after_call) hooks.after_call(id, c.out);
      if (r.status.is_ok() && op == "time_prepare" && hooks.after_time_prepare) hooks.after_time_prepare(c.out);
      if (r.status.is_ok()) {
        conformance::NpyArray o;
        o.type = c.problem.out_format == PACTS_FORMAT_FP32 ? conformance::NpyType::kF32
                                                            : conformance::NpyType::kU16;
        o.shape = {c.out.size() / conformance::npy_item_bytes(o.type)};
        o.data = c.out;
        if (Status s = conformance::write_npy(dir + "/out.npy", o); !s) r.status = s;
        if (c.problem.want_lse && r.status.is_ok()) {
          conformance::NpyArray l;
          l.type = conformance::NpyType::kF32;
          l.shape = {c.lse.size() / 4};
          l.data = c.lse;
          if (Status s = conformance::write_npy(dir + "/lse.npy", l); !s) r.status = s;
        }
      }
    }
    std::string reply = reply_line(id, r);
    if (op == "time_prepare" && r.status.is_ok()) reply = TimedServing::with_method(reply);
    if (hooks.reply) reply = hooks.reply(id, reply);
    emit(reply);
  }
  return 0;
}

}  // namespace pacts::backends
