// SHA-256 after FIPS 180-4 §6.2, and what /proc says about this process and machine.
#include <pacts/conformance/provenance.h>

#include <pacts/conformance/mustpass.h>

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace pacts::conformance {
namespace {

constexpr std::array<uint32_t, 64> kK = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

void compress(std::array<uint32_t, 8>& h, const unsigned char* block) {
  uint32_t w[64];
  for (int t = 0; t < 16; ++t)
    w[t] = uint32_t{block[4 * t]} << 24 | uint32_t{block[4 * t + 1]} << 16 |
           uint32_t{block[4 * t + 2]} << 8 | uint32_t{block[4 * t + 3]};
  for (int t = 16; t < 64; ++t) {
    const uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
    const uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
    w[t] = w[t - 16] + s0 + w[t - 7] + s1;
  }
  uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
  for (int t = 0; t < 64; ++t) {
    const uint32_t t1 = hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kK[t] + w[t];
    const uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    hh = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
  }
  h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += hh;
}

// Streams bytes through the compression function.
class Sha256 {
 public:
  void add(const char* p, size_t n) {
    total_ += n;
    while (n > 0) {
      const size_t take = std::min(n, sizeof block_ - used_);
      std::copy(p, p + take, block_ + used_);
      used_ += take, p += take, n -= take;
      if (used_ == sizeof block_) compress(h_, block_), used_ = 0;
    }
  }
  std::string hex() {
    const uint64_t bits = total_ * 8;
    const char one = static_cast<char>(0x80), zero = 0;
    add(&one, 1);
    while (used_ != 56) add(&zero, 1);
    char length[8];
    for (int i = 0; i < 8; ++i) length[i] = static_cast<char>(bits >> (56 - 8 * i));
    add(length, 8);
    static const char* digits = "0123456789abcdef";
    std::string out;
    for (uint32_t x : h_)
      for (int s = 28; s >= 0; s -= 4) out += digits[(x >> s) & 15u];
    return out;
  }

 private:
  std::array<uint32_t, 8> h_ = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  unsigned char block_[64] = {};
  size_t used_ = 0;
  uint64_t total_ = 0;
};

std::string first_line_with(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(key, 0) == 0) return line;
  return {};
}

}  // namespace

std::string sha256_hex(const std::string& bytes) {
  Sha256 s;
  s.add(bytes.data(), bytes.size());
  return s.hex();
}

std::string mustpass_sha256(const Mustpass& mustpass) {
  std::vector<std::string> lines;
  for (const MustpassEntry& e : mustpass.entries)
    lines.push_back(std::filesystem::path(e.path).filename().string() + " " +
                    sha256_file(e.path).value_or("unreadable") + "\n");
  std::sort(lines.begin(), lines.end());
  std::string all;
  for (const std::string& l : lines) all += l;
  return sha256_hex(all);
}

std::optional<std::string> sha256_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  Sha256 s;
  char buffer[1 << 16];
  while (in) {
    in.read(buffer, sizeof buffer);
    s.add(buffer, static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) return std::nullopt;
  return s.hex();
}

std::vector<FileHash> running_files() {
  std::vector<FileHash> out;
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    self[n] = '\0';
    out.push_back({self, sha256_file(self).value_or("unreadable")});
  }
  std::set<std::string> seen;
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    const size_t slash = line.find('/');
    if (slash == std::string::npos) continue;
    const std::string path = line.substr(slash);
    const std::string name = path.substr(path.rfind('/') + 1);
    if (name.rfind("libpacts", 0) != 0 || !seen.insert(path).second) continue;
    out.push_back({path, sha256_file(path).value_or("unreadable")});
  }
  return out;
}

MachineInfo machine_info() {
  MachineInfo m;
  utsname u{};
  if (uname(&u) == 0) m.os = std::string(u.sysname) + " " + u.release + " " + u.machine;
  const std::string model = first_line_with("/proc/cpuinfo", "model name");
  m.cpu = model.empty() ? "unknown" : model.substr(model.find(':') + 2);
  m.cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  std::istringstream mem(first_line_with("/proc/meminfo", "MemTotal:").substr(9));
  long long kib = 0;
  mem >> kib;
  m.memory_bytes = kib * 1024;
  return m;
}

}  // namespace pacts::conformance
