#include "guard_zones.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

namespace pacts::backends::detail {
namespace {

constexpr size_t kAlign = 64;  // a buffer's start: enough for any vector load a kernel may use
// The inaccessible address ranges before and after a buffer (address space only): an access up
// to this far outside faults and is named.
constexpr size_t kLeadGuard = size_t{64} << 10;
constexpr size_t kTailGuard = size_t{1} << 20;
constexpr size_t kMaxZones = 16;


// What the fault handler knows: plain data, written before a call and read in the handler.
struct ArmedZone {
  const char* name;
  uintptr_t map, map_end, data, data_end;
};
ArmedZone g_zones[kMaxZones];
std::atomic<int> g_count{0};
char g_note[4096];
struct sigaction g_old_segv, g_old_bus;
bool g_installed = false;

void put(char*& at, const char* end, const char* s) {
  while (*s != '\0' && at < end) *at++ = *s++;
}
void put_number(char*& at, const char* end, uintptr_t v) {
  char digits[24];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0 && n < 24);
  while (n > 0 && at < end) *at++ = digits[--n];
}

// Async-signal-safe: names the buffer whose guard page `addr` hit in the note, then restores the
// previous action and returns, so the access faults again and the process ends as it would have.
void on_fault(int sig, siginfo_t* info, void*) {
  const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
  const int count = g_count.load(std::memory_order_relaxed);
  for (int z = 0; z < count; ++z) {
    const ArmedZone& a = g_zones[z];
    if (addr < a.map || addr >= a.map_end) continue;
    char text[512];
    char* at = text;
    const char* end = text + sizeof text - 1;
    put(at, end, a.name);
    put(at, end, ": an access ");
    if (addr >= a.data_end) {
      put_number(at, end, addr - a.data_end);
      put(at, end, " bytes past its end");
    } else {
      put_number(at, end, a.data - addr);
      put(at, end, " bytes before its start");
    }
    put(at, end, " (a guard page of pacts-child)\n");
    const int fd = open(g_note, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      const ssize_t written = write(fd, text, static_cast<size_t>(at - text));
      (void)written;
      close(fd);
    }
    break;
  }
  sigaction(sig, sig == SIGBUS ? &g_old_bus : &g_old_segv, nullptr);
}

void install_once() {
  if (g_installed) return;
  struct sigaction sa{};
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, &g_old_segv);
  sigaction(SIGBUS, &sa, &g_old_bus);
  g_installed = true;
}

struct Named {
  const char* name;
  pacts_view pacts_buffers::*view;
  bool output;
};
constexpr Named kViews[] = {
    {"q", &pacts_buffers::q, false},
    {"k", &pacts_buffers::k, false},
    {"v", &pacts_buffers::v, false},
    {"k_scale", &pacts_buffers::k_scale, false},
    {"v_scale", &pacts_buffers::v_scale, false},
    {"block_table", &pacts_buffers::block_table, false},
    {"context_lens", &pacts_buffers::context_lens, false},
    {"sinks", &pacts_buffers::sinks, false},
    {"out", &pacts_buffers::out, true},
    {"lse", &pacts_buffers::lse, true},
};
static_assert(sizeof kViews / sizeof kViews[0] <= kMaxZones);

// "1 byte ... was" or "N bytes ... were".
std::string counted(size_t n, const std::string& middle) {
  return std::to_string(n) + (n == 1 ? " byte " : " bytes ") + middle + (n == 1 ? " was" : " were");
}

}  // namespace

GuardZones::~GuardZones() {
  g_count.store(0, std::memory_order_relaxed);
  for (Zone& z : zones_) munmap(z.map, z.map_bytes);
}

spec::Status GuardZones::place(const pacts_buffers& from, const std::string& note_path) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  views_ = from;
  for (const Named& n : kViews) {
    const pacts_view& v = from.*n.view;
    if (v.data == nullptr || v.bytes == 0) continue;
    Zone z;
    z.name = n.name;
    z.bytes = static_cast<size_t>(v.bytes);
    z.output = n.output;
    const size_t padded = (z.bytes + kAlign - 1) / kAlign * kAlign;
    const size_t data_pages = (padded + page - 1) / page;
    const size_t lead = std::max(kLeadGuard, page), tail = std::max(kTailGuard, page);
    z.map_bytes = lead + data_pages * page + tail;
    void* m = mmap(nullptr, z.map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
      return spec::Status(spec::Code::kInternal,
                          std::string("pacts-child: no guarded mapping for ") + n.name + " (" +
                              std::to_string(z.map_bytes) + " bytes)");
    z.map = static_cast<uint8_t*>(m);
    uint8_t* const first = z.map + lead;
    uint8_t* const last = first + data_pages * page;
    z.data = last - padded;
    z.first = first;
    z.last = last;
    for (uint8_t* p = first; p < last; ++p) *p = guard_canary(static_cast<size_t>(p - first));
    std::memcpy(z.data, v.data, z.bytes);
    if (!z.output) z.input.assign(z.data, z.data + z.bytes);
    if (mprotect(z.map, lead, PROT_NONE) != 0 || mprotect(last, tail, PROT_NONE) != 0) {
      munmap(m, z.map_bytes);
      return spec::Status(spec::Code::kInternal,
                          std::string("pacts-child: no guard page for ") + n.name);
    }
    (views_.*n.view).data = z.data;
    zones_.push_back(std::move(z));
  }
  std::strncpy(g_note, note_path.c_str(), sizeof g_note - 1);
  g_note[sizeof g_note - 1] = '\0';
  for (size_t i = 0; i < zones_.size(); ++i) {
    const Zone& z = zones_[i];
    g_zones[i] = {z.name, reinterpret_cast<uintptr_t>(z.map), reinterpret_cast<uintptr_t>(z.map + z.map_bytes),
                  reinterpret_cast<uintptr_t>(z.data), reinterpret_cast<uintptr_t>(z.data + z.bytes)};
  }
  install_once();
  g_count.store(static_cast<int>(zones_.size()), std::memory_order_relaxed);
  return spec::Status::ok();
}

spec::Status GuardZones::check(const std::vector<int32_t>* replayed) {
  g_count.store(0, std::memory_order_relaxed);
  for (const Zone& z : zones_) {
    uint8_t* const first = z.first;
    uint8_t* const last = z.last;
    size_t changed = 0, at = 0;
    for (uint8_t* p = first; p < z.data; ++p)
      if (*p != guard_canary(static_cast<size_t>(p - first)) && changed++ == 0) at = static_cast<size_t>(z.data - p);
    if (changed > 0)
      return spec::Status(spec::Code::kInternal,
                          std::string(z.name) + ": " + counted(changed, "before its start") +
                              " written (the farthest " +
                              std::to_string(at) + " bytes before it; pacts-child's guard zone)");
    for (uint8_t* p = z.data + z.bytes; p < last; ++p)
      if (*p != guard_canary(static_cast<size_t>(p - first)) && changed++ == 0)
        at = static_cast<size_t>(p - (z.data + z.bytes));
    if (changed > 0)
      return spec::Status(spec::Code::kInternal,
                          std::string(z.name) + ": " + counted(changed, "past its end") +
                              " written (the first " + std::to_string(at) +
                              " bytes past it; pacts-child's guard zone)");
    if (replayed != nullptr && std::strcmp(z.name, "context_lens") == 0 &&
        z.bytes == replayed->size() * sizeof(int32_t) &&
        std::memcmp(z.data, replayed->data(), z.bytes) == 0)
      continue;
    if (!z.output) {
      for (size_t i = 0; i < z.bytes; ++i)
        if (z.data[i] != z.input[i] && changed++ == 0) at = i;
      if (changed > 0)
        return spec::Status(spec::Code::kInternal,
                            std::string(z.name) + ": " + counted(changed, "of this input") +
                                " written (the first at byte " +
                                std::to_string(at) + "); a backend never writes its inputs");
    }
  }
  return spec::Status::ok();
}

void GuardZones::copy_outputs(const pacts_buffers& to) const {
  for (const Zone& z : zones_) {
    if (!z.output) continue;
    const pacts_view& dst = std::strcmp(z.name, "out") == 0 ? to.out : to.lse;
    if (dst.data != nullptr) std::memcpy(dst.data, z.data, std::min<size_t>(z.bytes, dst.bytes));
  }
}

}  // namespace pacts::backends::detail
