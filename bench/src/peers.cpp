// Peer figures as data (bench.h, "Peer figures"): read from a JSON file with its provenance, so
// that a re-measurement is a new file, not a code change.
#include "internal.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

namespace pacts::bench {

spec::Result<PeerFigures> load_peer_figures(const std::string& path) {
  const auto refuse = [&](const std::string& what) {
    return spec::invalid_argument("peer figures " + path + ": " + what);
  };
  std::ifstream in(path);
  if (!in) return refuse("cannot be read");
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    return refuse(std::string("not JSON: ") + e.what());
  }
  if (!j.is_object()) return refuse("not a JSON object");
  PeerFigures f;
  for (auto [key, field] : {std::pair{"what", &f.what}, std::pair{"device", &f.device},
                            std::pair{"method", &f.method}, std::pair{"measured", &f.measured}}) {
    if (!j.contains(key) || !j[key].is_string() || j[key].get<std::string>().empty())
      return refuse(std::string("\"") + key + "\": a non-empty string is required");
    *field = j[key].get<std::string>();
  }
  if (!j.contains("rows") || !j["rows"].is_array() || j["rows"].empty())
    return refuse("\"rows\": a non-empty array is required");
  for (size_t i = 0; i < j["rows"].size(); ++i) {
    const nlohmann::json& r = j["rows"][i];
    const std::string at = "rows[" + std::to_string(i) + "]";
    if (!r.is_object()) return refuse(at + ": an object is required");
    PeerFigure p;
    for (auto [key, field] : {std::pair{"batch", &p.batch}, std::pair{"context", &p.context},
                              std::pair{"group", &p.group}, std::pair{"page_size", &p.page_size}}) {
      if (!r.contains(key) || !r[key].is_number_integer() || r[key].get<int64_t>() < 1 ||
          r[key].get<int64_t>() > INT32_MAX)
        return refuse(at + ".\"" + key + "\": an integer from 1 to 2^31 - 1 is required");
      *field = r[key].get<int32_t>();
    }
    for (auto [key, field] : {std::pair{"us", &p.us}, std::pair{"tbs", &p.tbs}}) {
      if (!r.contains(key) || !r[key].is_number() || !(r[key].get<double>() > 0))
        return refuse(at + ".\"" + key + "\": a number above 0 is required");
      *field = r[key].get<double>();
    }
    f.rows.push_back(p);
  }
  return f;
}

const PeerFigure* peer_figure(const PeerFigures& figures, const Shape& s) {
  // The conditions the figures were measured under (the `peers` set's; "method" in the file).
  if (s.kv_format != PACTS_FORMAT_BF16 || s.kv_scale_mode != PACTS_SCALE_NONE ||
      s.head_dim != 128 || s.num_kv_heads != 8 || s.q_len != 1 || s.layout != KvLayout::kNhd ||
      s.sinks || s.window != 0 || s.ragged)
    return nullptr;
  for (const PeerFigure& f : figures.rows)
    if (f.batch == s.batch && f.context == s.context && f.group == s.group() &&
        f.page_size == s.page_size)
      return &f;
  return nullptr;
}

}  // namespace pacts::bench
