// The checks of what an external backend declares (pacts/backend_abi.h's descriptor): shared by
// the plugin loader (a C descriptor) and the process backend (the same fields in its handshake,
// spec/process.md), so both refuse the same declarations with the same messages. Internal to
// backends/.
#pragma once

#include <pacts/backend_abi.h>
#include <pacts/conformance/backend.h>
#include <pacts/spec/formats.h>
#include <pacts/spec/status.h>
#include <pacts/spec/tolerance.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace pacts::backends::detail {

using conformance::Capabilities;
using spec::Status;

inline std::string quoted_list(const std::vector<std::string>& items) {
  std::string s;
  for (const std::string& x : items) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// Refusals name the library first (spec/refusals.md §1 style: what, its value, what is accepted).
class Checker {
 public:
  explicit Checker(std::string who) : who_(std::move(who)) {}

  Status refuse(const std::string& what) const {
    return spec::invalid_argument(who_ + ": " + what);
  }

  Status flag(const char* field, int32_t value) const {
    if (value == 0 || value == 1) return Status::ok();
    return refuse(std::string("capabilities.") + field + " = " + std::to_string(value) +
                  ": accepted: 0 or 1");
  }

  template <class T>
  Status list(const char* field, uint32_t count, const T* values, const std::vector<T>& accepted,
              std::string (*name)(T), std::vector<T>& out) const {
    if (count == 0 || count > PACTS_BACKEND_LIST_MAX)
      return refuse(std::string("capabilities.num_") + field + " = " + std::to_string(count) +
                    ": accepted: 1 to " + std::to_string(PACTS_BACKEND_LIST_MAX));
    for (uint32_t i = 0; i < count; ++i) {
      if (std::find(accepted.begin(), accepted.end(), values[i]) == accepted.end()) {
        std::vector<std::string> names;
        for (T a : accepted) names.push_back(name(a));
        return refuse(std::string("capabilities.") + field + "[" + std::to_string(i) + "] = " +
                      name(values[i]) + ": accepted: " + quoted_list(names));
      }
      out.push_back(values[i]);
    }
    return Status::ok();
  }

  Status number(const char* field, double value) const {
    if (std::isfinite(value) && value >= 0 && value < 1) return Status::ok();
    return refuse(std::string("numerics.") + field + " = " + std::to_string(value) +
                  ": accepted: finite, >= 0 and < 1");
  }

 private:
  std::string who_;  // "backend library PATH", "exec child 'CMD'"
};

inline std::string format_text(pacts_format f) {
  return std::string(spec::format_name(f)) + " (" + std::to_string(static_cast<int64_t>(f)) + ")";
}
inline std::string mode_text(pacts_scale_mode m) {
  static const char* const kNames[] = {"none", "per_tensor", "per_token", "mx_block"};
  const std::string n = m >= 0 && m <= 3 ? kNames[m] : "invalid";
  return n + " (" + std::to_string(static_cast<int64_t>(m)) + ")";
}
inline std::string int_text(int32_t x) { return std::to_string(x); }

inline bool is_power_of_two(int64_t x) { return x > 0 && (x & (x - 1)) == 0; }

// 1-64 characters of [A-Za-z0-9._-]: the name goes into test names and file names.
inline bool valid_name(const char* s) {
  if (s == nullptr) return false;
  const std::string_view v(s);
  if (v.empty() || v.size() > 64) return false;
  return std::all_of(v.begin(), v.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
}

inline std::string text_or_empty(const char* s) { return s ? std::string(s) : std::string(); }

// The fixed-size text of a result, read without trusting a terminating NUL.
inline std::string bounded(const char* s, size_t capacity) {
  return std::string(s, strnlen(s, capacity));
}

inline Status check_capabilities_of(const Checker& c, const pacts_backend_capabilities& in,
                             Capabilities& out) {
  const Capabilities all = Capabilities::everything();
  out = Capabilities{};  // empty lists; filled from the declaration below
  if (Status s = c.list("q_formats", in.num_q_formats, in.q_formats, all.q_formats, format_text,
                        out.q_formats); !s)
    return s;
  if (Status s = c.list("kv_formats", in.num_kv_formats, in.kv_formats, all.kv_formats,
                        format_text, out.kv_formats); !s)
    return s;
  if (Status s = c.list("out_formats", in.num_out_formats, in.out_formats, all.out_formats,
                        format_text, out.out_formats); !s)
    return s;
  if (Status s = c.list("scale_modes", in.num_scale_modes, in.scale_modes, all.scale_modes,
                        mode_text, out.scale_modes); !s)
    return s;
  if (Status s = c.list("head_dims", in.num_head_dims, in.head_dims, all.head_dims, int_text,
                        out.head_dims); !s)
    return s;
  // spec/refusals.md §2: page sizes are powers of two from 8 to 256, L is 1..16.
  for (const auto& [field, value] : {std::pair{"min_page_size", in.min_page_size},
                                     std::pair{"max_page_size", in.max_page_size}})
    if (!is_power_of_two(value) || value < 8 || value > 256)
      return c.refuse(std::string("capabilities.") + field + " = " + std::to_string(value) +
                      ": accepted: a power of two from 8 to 256");
  if (in.min_page_size > in.max_page_size)
    return c.refuse("capabilities.min_page_size = " + std::to_string(in.min_page_size) +
                    " exceeds max_page_size = " + std::to_string(in.max_page_size));
  if (in.max_q_len < 1 || in.max_q_len > 16)
    return c.refuse("capabilities.max_q_len = " + std::to_string(in.max_q_len) +
                    ": accepted: 1 to 16");
  if (in.max_group < 1)
    return c.refuse("capabilities.max_group = " + std::to_string(in.max_group) +
                    ": accepted: >= 1");
  const std::pair<const char*, int32_t> flags[] = {
      {"chunked_layouts", in.chunked_layouts}, {"sinks", in.sinks}, {"window", in.window},
      {"softcap", in.softcap}, {"lse", in.lse}, {"deterministic", in.deterministic},
      {"split_plans", in.split_plans}, {"plan_replay", in.plan_replay},
      {"large_buffers", in.large_buffers}};
  for (const auto& [field, value] : flags)
    if (Status s = c.flag(field, value); !s) return s;
  if (!is_power_of_two(in.vector_alignment_bytes))
    return c.refuse("capabilities.vector_alignment_bytes = " +
                    std::to_string(in.vector_alignment_bytes) + ": accepted: a power of two >= 1");
  if (in.max_element_offset < 1)
    return c.refuse("capabilities.max_element_offset = " + std::to_string(in.max_element_offset) +
                    ": accepted: >= 1");
  if (in.reserved0 != 0)
    return c.refuse("capabilities.reserved0 = " + std::to_string(in.reserved0) + ": accepted: 0");
  out.min_page_size = in.min_page_size;
  out.max_page_size = in.max_page_size;
  out.max_q_len = in.max_q_len;
  out.max_group = in.max_group;
  out.chunked_layouts = in.chunked_layouts != 0;
  out.sinks = in.sinks != 0;
  out.window = in.window != 0;
  out.softcap = in.softcap != 0;
  out.lse = in.lse != 0;
  out.deterministic = in.deterministic != 0;
  out.split_plans = in.split_plans != 0;
  out.plan_replay = in.plan_replay != 0;
  out.large_buffers = in.large_buffers != 0;
  out.requirements.vector_alignment_bytes = in.vector_alignment_bytes;
  out.requirements.max_element_offset = in.max_element_offset;
  return Status::ok();
}

inline Status check_numerics_of(const Checker& c, const pacts_backend_numerics& in, const std::string& name,
                         spec::NumericsProfile& out) {
  const std::pair<const char*, double> numbers[] = {
      {"u_logit", in.u_logit}, {"u_q", in.u_q}, {"u_p", in.u_p}, {"eta_p", in.eta_p},
      {"u_acc", in.u_acc}, {"u_partial", in.u_partial}, {"eps_exp", in.eps_exp},
      {"eps_tanh", in.eps_tanh}, {"eps_log", in.eps_log}};
  for (const auto& [field, value] : numbers)
    if (Status s = c.number(field, value); !s) return s;
  for (const auto& [field, value] : {std::pair{"p_rounded_in_denominator", in.p_rounded_in_denominator},
                                     std::pair{"ftz", in.ftz}})
    if (value != 0 && value != 1)
      return c.refuse(std::string("numerics.") + field + " = " + std::to_string(value) +
                      ": accepted: 0 or 1");
  out.name = name;
  out.u_logit = in.u_logit;
  out.u_q = in.u_q;
  out.u_p = in.u_p;
  out.eta_p = in.eta_p;
  out.p_rounded_in_denominator = in.p_rounded_in_denominator != 0;
  out.u_acc = in.u_acc;
  out.u_partial = in.u_partial;
  out.eps_exp = in.eps_exp;
  out.eps_tanh = in.eps_tanh;
  out.eps_log = in.eps_log;
  out.ftz = in.ftz != 0;
  return Status::ok();
}

// Version 2's extension (backend_abi.h): the query requantisation rule into `profile`, the
// batch-invariant plan into `caps`.
inline Status check_v2_extension_of(const Checker& c, const pacts_backend_v2_extension& in,
                             spec::NumericsProfile& profile, Capabilities& caps) {
  if (in.reserved1 != 0) return c.refuse("reserved1 = " + std::to_string(in.reserved1) + ": accepted: 0");
  if (in.batch_invariant != 0 && in.batch_invariant != 1)
    return c.refuse("batch_invariant = " + std::to_string(in.batch_invariant) + ": accepted: 0 or 1");
  caps.batch_invariant = in.batch_invariant == 1;
  if (in.q_requant == PACTS_Q_REQUANT_NONE) {
    if (in.num_q_requant_kv_formats != 0)
      return c.refuse("num_q_requant_kv_formats = " + std::to_string(in.num_q_requant_kv_formats) +
                      " with q_requant NONE: accepted: 0");
    return Status::ok();
  }
  if (in.q_requant != PACTS_Q_REQUANT_FP8_ROW_POW2)
    return c.refuse("q_requant = " + std::to_string(static_cast<int64_t>(in.q_requant)) +
                    ": accepted: 0 (none) or 1 (fp8-row-pow2, spec/tolerance.md §2.1)");
  std::vector<pacts_format> formats;
  if (Status s = c.list("q_requant_kv_formats", in.num_q_requant_kv_formats, in.q_requant_kv_formats,
                        std::vector<pacts_format>{PACTS_FORMAT_E4M3FN, PACTS_FORMAT_E4M3FNUZ,
                                                  PACTS_FORMAT_E5M2, PACTS_FORMAT_E5M2FNUZ,
                                                  PACTS_FORMAT_E2M1},
                        format_text, formats);
      !s)
    return s;
  profile.q_requant.kind = spec::QueryRequant::kFp8RowPow2;
  for (pacts_format f : formats) profile.q_requant.kv_formats |= spec::format_bit(f);
  return Status::ok();
}

// Version 3's extension (backend_abi.h, timed calls): flags 0 or 1, the memory kind one of the
// enum's, and the four functions set exactly when timed_calls is 1.
inline Status check_v3_extension_of(const Checker& c, const pacts_backend_v3_extension& in) {
  if (in.reserved2 != 0) return c.refuse("reserved2 = " + std::to_string(in.reserved2) + ": accepted: 0");
  for (const auto& [field, value] : {std::pair{"timed_calls", in.timed_calls},
                                     std::pair{"graph_capturable", in.graph_capturable}})
    if (value != 0 && value != 1)
      return c.refuse(std::string(field) + " = " + std::to_string(value) + ": accepted: 0 or 1");
  if (in.memory != PACTS_BACKEND_MEMORY_HOST && in.memory != PACTS_BACKEND_MEMORY_DEVICE)
    return c.refuse("memory = " + std::to_string(static_cast<int64_t>(in.memory)) +
                    ": accepted: 0 (host) or 1 (device)");
  for (const auto& [field, fn] :
       {std::pair{"prepare", reinterpret_cast<const void*>(in.prepare)},
        std::pair{"enqueue", reinterpret_cast<const void*>(in.enqueue)},
        std::pair{"device_error", reinterpret_cast<const void*>(in.device_error)},
        std::pair{"release", reinterpret_cast<const void*>(in.release)}})
    if ((fn != nullptr) != (in.timed_calls == 1))
      return c.refuse(std::string(field) + " is " + (fn ? "set" : "NULL") + " with timed_calls = " +
                      std::to_string(in.timed_calls) +
                      ": accepted: the four timed calls set exactly when timed_calls is 1");
  return Status::ok();
}


}  // namespace pacts::backends::detail
