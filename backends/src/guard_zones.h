// Guard zones for a backend pacts does not trust (internal to backends/; spec/process.md §4):
// pacts-child copies every buffer of a call into a mapping of its own before the backend runs, so
// that an access outside the declared views is caught and named instead of passing unseen.
//
// A buffer's mapping: 64 KiB of inaccessible guard pages, the pages that hold the data, 1 MiB of
// guard pages. The data starts 64-byte aligned and ends as near the trailing guard pages as that
// allows (at most 63 bytes before them); the bytes between the data and the guard pages hold
// canaries.
// - a read or write that reaches the guard pages faults: the fault handler writes which buffer
//   and how far outside it into a note (`note_path`), then the process dies of the signal (the
//   parent's verdict is Crash, with the note);
// - a write into the canaries (outside out and lse, within 4 KiB before a buffer or 63 bytes
//   after it) or anywhere into an input buffer is found after the call: check() names the buffer
//   and the first byte (the verdict is Fail).
// Reads of the canaries cannot be caught (they fault only past the guard pages' boundary).
#pragma once

#include <pacts/problem.h>
#include <pacts/spec/status.h>

#include <cstdint>
#include <string>
#include <vector>

namespace pacts::backends::detail {

// Byte i of a guard zone's canaries: a pattern no single memset or store of one value
// reproduces. Also the hip backend's device guard zones (hip_backend.cpp).
inline uint8_t guard_canary(size_t i) { return static_cast<uint8_t>(0xA5u ^ (i * 29u)); }

class GuardZones {
 public:
  GuardZones() = default;
  GuardZones(const GuardZones&) = delete;
  GuardZones& operator=(const GuardZones&) = delete;
  ~GuardZones();

  // Copies every non-empty view of `from` into a guarded mapping and arms the fault handler with
  // those mappings and `note_path`. Internal when a mapping cannot be made.
  spec::Status place(const pacts_buffers& from, const std::string& note_path);
  // The guarded copies (empty views stay empty).
  const pacts_buffers& views() const { return views_; }
  // Disarms the fault handler; then every canary intact and every input unchanged, or Internal
  // naming the buffer, the offset of the first changed byte and how many bytes changed. A replay
  // (`replayed`: the lengths it runs with) writes those lengths into context_lens, as its caller
  // would between graph replays: context_lens may end as the placed bytes or as those.
  spec::Status check(const std::vector<int32_t>* replayed = nullptr);
  // The guarded out and lse back into `to`'s out and lse (the same sizes as placed).
  void copy_outputs(const pacts_buffers& to) const;

 private:
  struct Zone {
    const char* name = "";
    uint8_t* map = nullptr;  // the whole mapping, guard pages included
    size_t map_bytes = 0;
    uint8_t* first = nullptr;  // the accessible pages: canaries, data, canaries
    uint8_t* last = nullptr;
    uint8_t* data = nullptr;
    size_t bytes = 0;
    bool output = false;
    std::vector<uint8_t> input;  // an input's bytes as placed
  };
  std::vector<Zone> zones_;
  pacts_buffers views_{};
};

}  // namespace pacts::backends::detail
