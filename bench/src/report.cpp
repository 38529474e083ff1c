// pacts-bench reports: text table, CSV, JSON (and back, for --baseline), the baseline comparison.
#include "internal.h"

#include <pacts/spec/formats.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace pacts::bench {
namespace {

using nlohmann::json;

const char* scale_name(pacts_scale_mode m) {
  switch (m) {
    case PACTS_SCALE_NONE: return "none";
    case PACTS_SCALE_PER_TENSOR: return "per_tensor";
    case PACTS_SCALE_PER_TOKEN: return "per_token";
    case PACTS_SCALE_MX_BLOCK: return "mx_block";
    default: return "invalid";
  }
}

std::string fmt(const char* f, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, x);
  return buf;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

json stats_json(const Stats& s) {
  return {{"median_us", s.median_us}, {"min_us", s.min_us}, {"max_us", s.max_us},
          {"samples", s.samples}};
}

Stats stats_from(const json& j) {
  return {j.at("median_us").get<double>(), j.at("min_us").get<double>(),
          j.at("max_us").get<double>(), j.at("samples").get<int32_t>()};
}

pacts_format format_from(const std::string& name) {
  for (int f = PACTS_FORMAT_BF16; f <= PACTS_FORMAT_E8M0; ++f)
    if (spec::format_name(static_cast<pacts_format>(f)) == name) return static_cast<pacts_format>(f);
  throw std::invalid_argument("kv_format '" + name + "': not a format name of spec/formats.md");
}

pacts_scale_mode scale_from(const std::string& name) {
  for (int m = PACTS_SCALE_NONE; m <= PACTS_SCALE_MX_BLOCK; ++m)
    if (name == scale_name(static_cast<pacts_scale_mode>(m))) return static_cast<pacts_scale_mode>(m);
  throw std::invalid_argument("kv_scale '" + name +
                              "': accepted none, per_tensor, per_token, mx_block");
}

KvLayout layout_from(const std::string& name) {
  for (KvLayout l : {KvLayout::kNhd, KvLayout::kVllm})
    if (name == layout_name(l)) return l;
  throw std::invalid_argument("layout '" + name + "': accepted nhd, vllm");
}

}  // namespace

std::string to_table(const Report& r) {
  std::string out;
  out += "pacts-bench  set " + r.set + "  backend " + r.backend + "  device " + r.device + "\n";
  if (!r.driver.empty() || !r.runtime.empty() || !r.suite_version.empty())
    out += "provenance: driver " + (r.driver.empty() ? "-" : r.driver) + "; " +
           (r.runtime.empty() ? "-" : r.runtime) + "; pacts " +
           (r.suite_version.empty() ? "-" : r.suite_version) + "\n";
  out += "timer: " + r.timer + "; " + std::to_string(r.repeats) + " repeats after " +
         std::to_string(r.warmup) + " warm-up, data seed " + std::to_string(r.data_seed) + "\n";
  out += "gate: " +
         (r.gate.ran ? std::to_string(r.gate.properties) + " properties x " +
                           std::to_string(r.gate.cases_per_property) + " cases, seed " +
                           std::to_string(r.gate.seed) + ": " +
                           (r.gate.passed ? "passed" : "FAILED")
                     : std::string("vouched for by the caller")) +
         "\n";
  for (const GateFailure& f : r.gate.failures)
    out += "  " + f.id + " " + f.name + ": " + f.verdict + "; case file " + f.case_file + "\n";
  out += "ceilings: copy " + fmt("%.3g", r.ceilings.copy_tbs) + " TB/s (read + write), read " +
         fmt("%.3g", r.ceilings.read_tbs) + " TB/s; datasheet " +
         (r.datasheet_tbs > 0 ? fmt("%.2f", r.datasheet_tbs) + " TB/s" : std::string("unknown")) +
         "\n";
  for (const BesideBackend& b : r.beside) {
    out += "beside: " + b.variant + " = " + b.backend + " (" + b.device +
           (b.version.empty() ? "" : "; " + b.version) + "); gate " +
           (b.gate.ran ? std::to_string(b.gate.properties) + " properties x " +
                             std::to_string(b.gate.cases_per_property) + " cases: " +
                             (b.gate.passed ? "passed" : "FAILED")
                       : std::string("not run")) +
           "\n";
    for (const GateFailure& f : b.gate.failures)
      out += "  " + f.id + " " + f.name + ": " + f.verdict + "; case file " + f.case_file + "\n";
  }
  for (const std::string& n : r.notes) out += "note: " + n + "\n";
  char line[640];
  int var = 6;  // the variant column fits the longest variant ("peer:<name>" beside the target)
  for (const Row& row : r.rows) var = std::max(var, static_cast<int>(row.variant.size()));
  std::snprintf(line, sizeof line, "%-62s %-6s %-*s %10s %10s %10s %8s %8s %6s %6s %9s  %s\n",
                "shape", "layout", var, "var", "median us", "min us", "max us", "KV TB/s",
                "all TB/s", "%ceil", "%sheet", "peer TB/s", "plan");
  out += line;
  for (const Row& row : r.rows) {
    const std::string layout(layout_name(row.shape.layout));
    if (!row.ok()) {
      std::snprintf(line, sizeof line, "%-62s %-6s %-*s %s\n", row.shape.label().c_str(),
                    layout.c_str(), var, row.variant.c_str(), row.status.c_str());
    } else {
      const std::string sheet = r.datasheet_tbs > 0 ? fmt("%6.1f", row.kv_pct_datasheet) : "     -";
      const std::string peer = row.peer_tbs > 0 ? fmt("%9.2f", row.peer_tbs) : "        -";
      std::snprintf(line, sizeof line,
                    "%-62s %-6s %-*s %10.1f %10.1f %10.1f %8.3g %8.3g %6.1f %s %s  %s\n",
                    row.shape.label().c_str(), layout.c_str(), var, row.variant.c_str(),
                    row.time.median_us, row.time.min_us, row.time.max_us, row.kv_tbs, row.all_tbs,
                    row.kv_pct_ceiling, sheet.c_str(), peer.c_str(), row.plan.c_str());
    }
    out += line;
  }
  const std::vector<SideBySide> sbs = side_by_side(r);
  if (sbs.empty()) return out;
  // The side-by-side table: per shape the gated kernels' median (min-max), each peer's, and the
  // peer's median over the target's (above 1: the target is faster); then the geometric mean of
  // those ratios per peer with their range.
  out += "\nside by side (median us, min-max; ratio = peer / " + r.backend + " safe):\n";
  for (const SideBySide& x : sbs) {
    const auto cell = [](const Stats& t) {
      return t.samples > 0 ? fmt("%.1f", t.median_us) + " (" + fmt("%.1f", t.min_us) + "-" +
                                 fmt("%.1f", t.max_us) + ")"
                           : std::string("-");
    };
    std::string l = x.label + ": " + cell(x.target);
    for (size_t i = 0; i < x.peers.size(); ++i)
      l += "; " + x.peers[i] + " " + cell(x.peer_times[i]) +
           (x.ratios[i] > 0 ? " x" + fmt("%.2f", x.ratios[i]) : std::string());
    out += "  " + l + "\n";
  }
  for (size_t i = 0; i < r.beside.size(); ++i) {
    double log_sum = 0, lo = 0, hi = 0;
    int n = 0;
    for (const SideBySide& x : sbs) {
      const double q = x.ratios[i];
      if (q <= 0) continue;
      log_sum += std::log(q);
      lo = n == 0 ? q : std::min(lo, q);
      hi = n == 0 ? q : std::max(hi, q);
      ++n;
    }
    out += r.beside[i].variant + ": " +
           (n > 0 ? "geomean ratio " + fmt("%.3f", std::exp(log_sum / n)) + " (" +
                        fmt("%.3f", lo) + "-" + fmt("%.3f", hi) + ") over " + std::to_string(n) +
                        " shapes timed by both"
                  : std::string("no shape timed by both")) +
           "\n";
  }
  return out;
}

std::string to_csv(const Report& r) {
  std::string out =
      "set,model,batch,context,q_len,num_q_heads,num_kv_heads,head_dim,page_size,kv_format,"
      "kv_scale,layout,sinks,window,ragged,label,variant,status,plan,median_us,min_us,max_us,"
      "samples,kv_bytes,all_bytes,kv_tbs,all_tbs,kv_pct_ceiling,kv_pct_datasheet,"
      "all_pct_ceiling,all_pct_datasheet,peer_us,peer_tbs\n";
  for (const Row& row : r.rows) {
    const Shape& s = row.shape;
    const std::vector<std::string> f = {
        s.set, csv_field(s.model), std::to_string(s.batch), std::to_string(s.context),
        std::to_string(s.q_len), std::to_string(s.num_q_heads), std::to_string(s.num_kv_heads),
        std::to_string(s.head_dim), std::to_string(s.page_size),
        std::string(spec::format_name(s.kv_format)), scale_name(s.kv_scale_mode),
        std::string(layout_name(s.layout)), std::to_string(s.sinks ? 1 : 0),
        std::to_string(s.window), std::to_string(s.ragged ? 1 : 0),
        csv_field(s.label()), row.variant, csv_field(row.status), csv_field(row.plan),
        fmt("%.3f", row.time.median_us), fmt("%.3f", row.time.min_us),
        fmt("%.3f", row.time.max_us), std::to_string(row.time.samples),
        std::to_string(row.bytes.kv), std::to_string(row.bytes.all), fmt("%.4f", row.kv_tbs),
        fmt("%.4f", row.all_tbs), fmt("%.2f", row.kv_pct_ceiling),
        fmt("%.2f", row.kv_pct_datasheet), fmt("%.2f", row.all_pct_ceiling),
        fmt("%.2f", row.all_pct_datasheet), fmt("%.1f", row.peer_us), fmt("%.2f", row.peer_tbs)};
    for (size_t i = 0; i < f.size(); ++i) out += (i ? "," : "") + f[i];
    out += "\n";
  }
  return out;
}

std::string to_json(const Report& r) {
  json rows = json::array();
  for (const Row& row : r.rows) {
    const Shape& s = row.shape;
    rows.push_back({{"set", s.set},
                    {"model", s.model},
                    {"label", s.label()},
                    {"batch", s.batch},
                    {"context", s.context},
                    {"q_len", s.q_len},
                    {"num_q_heads", s.num_q_heads},
                    {"num_kv_heads", s.num_kv_heads},
                    {"head_dim", s.head_dim},
                    {"page_size", s.page_size},
                    {"kv_format", std::string(spec::format_name(s.kv_format))},
                    {"kv_scale", scale_name(s.kv_scale_mode)},
                    {"layout", std::string(layout_name(s.layout))},
                    {"sinks", s.sinks},
                    {"window", s.window},
                    {"ragged", s.ragged},
                    {"variant", row.variant},
                    {"status", row.status},
                    {"plan", row.plan},
                    {"time", stats_json(row.time)},
                    {"kv_bytes", row.bytes.kv},
                    {"all_bytes", row.bytes.all},
                    {"kv_tbs", row.kv_tbs},
                    {"all_tbs", row.all_tbs},
                    {"kv_pct_ceiling", row.kv_pct_ceiling},
                    {"kv_pct_datasheet", row.kv_pct_datasheet},
                    {"all_pct_ceiling", row.all_pct_ceiling},
                    {"all_pct_datasheet", row.all_pct_datasheet},
                    {"peer_us", row.peer_us},
                    {"peer_tbs", row.peer_tbs}});
  }
  json failures = json::array();
  for (const GateFailure& f : r.gate.failures)
    failures.push_back({{"id", f.id}, {"name", f.name}, {"verdict", f.verdict},
                        {"detail", f.detail}, {"case_file", f.case_file}, {"replay", f.replay}});
  json beside = json::array();
  for (const BesideBackend& b : r.beside) {
    json bf = json::array();
    for (const GateFailure& f : b.gate.failures)
      bf.push_back({{"id", f.id}, {"name", f.name}, {"verdict", f.verdict}, {"detail", f.detail},
                    {"case_file", f.case_file}, {"replay", f.replay}});
    beside.push_back({{"backend", b.backend}, {"variant", b.variant}, {"device", b.device},
                      {"version", b.version},
                      {"gate",
                       {{"ran", b.gate.ran}, {"passed", b.gate.passed},
                        {"cases_per_property", b.gate.cases_per_property},
                        {"seed", b.gate.seed}, {"properties", b.gate.properties},
                        {"seconds", b.gate.seconds}, {"failures", bf}}}});
  }
  const json j = {
      {"tool", "pacts-bench"},
      {"beside", beside},
      {"set", r.set},
      {"backend", r.backend},
      {"device", r.device},
      {"driver", r.driver},
      {"runtime", r.runtime},
      {"suite_version", r.suite_version},
      {"timer", r.timer},
      {"repeats", r.repeats},
      {"warmup", r.warmup},
      {"data_seed", r.data_seed},
      {"datasheet_tbs", r.datasheet_tbs},
      {"notes", r.notes},
      {"gate",
       {{"ran", r.gate.ran}, {"passed", r.gate.passed},
        {"cases_per_property", r.gate.cases_per_property}, {"seed", r.gate.seed},
        {"properties", r.gate.properties}, {"seconds", r.gate.seconds}, {"failures", failures}}},
      {"ceilings",
       {{"bytes", r.ceilings.bytes}, {"copy", stats_json(r.ceilings.copy)},
        {"read", stats_json(r.ceilings.read)}, {"copy_tbs", r.ceilings.copy_tbs},
        {"read_tbs", r.ceilings.read_tbs}}},
      {"rows", rows}};
  return j.dump(1) + "\n";
}

spec::Result<Report> from_json(std::string_view text) {
  try {
    const json j = json::parse(text);
    if (j.value("tool", "") != "pacts-bench")
      return spec::invalid_argument("tool '" + j.value("tool", std::string()) +
                                    "': not a pacts-bench report (expected \"pacts-bench\")");
    Report r;
    r.set = j.at("set").get<std::string>();
    r.backend = j.at("backend").get<std::string>();
    r.device = j.at("device").get<std::string>();
    r.driver = j.value("driver", std::string());  // absent in reports of older versions
    r.runtime = j.value("runtime", std::string());
    r.suite_version = j.value("suite_version", std::string());
    r.timer = j.at("timer").get<std::string>();
    r.repeats = j.at("repeats").get<int32_t>();
    r.warmup = j.at("warmup").get<int32_t>();
    r.data_seed = j.at("data_seed").get<uint64_t>();
    r.datasheet_tbs = j.at("datasheet_tbs").get<double>();
    r.notes = j.at("notes").get<std::vector<std::string>>();
    const auto gate_from = [](const json& g) {
      Gate gate;
      gate.ran = g.at("ran").get<bool>();
      gate.passed = g.at("passed").get<bool>();
      gate.cases_per_property = g.at("cases_per_property").get<int32_t>();
      gate.seed = g.at("seed").get<uint64_t>();
      gate.properties = g.at("properties").get<int32_t>();
      gate.seconds = g.at("seconds").get<double>();
      for (const json& f : g.at("failures"))
        gate.failures.push_back({f.at("id"), f.at("name"), f.at("verdict"), f.at("detail"),
                                 f.at("case_file"), f.at("replay")});
      return gate;
    };
    r.gate = gate_from(j.at("gate"));
    // Reports written before backends could be timed beside the target have no "beside".
    if (j.contains("beside"))
      for (const json& b : j.at("beside"))
        r.beside.push_back({b.at("backend").get<std::string>(), b.at("variant").get<std::string>(),
                            b.at("device").get<std::string>(), b.at("version").get<std::string>(),
                            gate_from(b.at("gate"))});
    const json& c = j.at("ceilings");
    r.ceilings.bytes = c.at("bytes").get<uint64_t>();
    r.ceilings.copy = stats_from(c.at("copy"));
    r.ceilings.read = stats_from(c.at("read"));
    r.ceilings.copy_tbs = c.at("copy_tbs").get<double>();
    r.ceilings.read_tbs = c.at("read_tbs").get<double>();
    for (const json& x : j.at("rows")) {
      Row row;
      Shape& s = row.shape;
      s.set = x.at("set").get<std::string>();
      s.model = x.at("model").get<std::string>();
      s.batch = x.at("batch").get<int32_t>();
      s.context = x.at("context").get<int32_t>();
      s.q_len = x.at("q_len").get<int32_t>();
      s.num_q_heads = x.at("num_q_heads").get<int32_t>();
      s.num_kv_heads = x.at("num_kv_heads").get<int32_t>();
      s.head_dim = x.at("head_dim").get<int32_t>();
      s.page_size = x.at("page_size").get<int32_t>();
      s.kv_format = format_from(x.at("kv_format").get<std::string>());
      s.kv_scale_mode = scale_from(x.at("kv_scale").get<std::string>());
      // Reports written before the `formats` set have no layout: every pool was NHD then.
      s.layout = layout_from(x.value("layout", std::string(layout_name(KvLayout::kNhd))));
      s.sinks = x.at("sinks").get<bool>();
      s.window = x.at("window").get<int32_t>();
      s.ragged = x.at("ragged").get<bool>();
      row.variant = x.at("variant").get<std::string>();
      row.status = x.at("status").get<std::string>();
      row.plan = x.at("plan").get<std::string>();
      row.time = stats_from(x.at("time"));
      row.bytes = {x.at("kv_bytes").get<uint64_t>(), x.at("all_bytes").get<uint64_t>()};
      row.kv_tbs = x.at("kv_tbs").get<double>();
      row.all_tbs = x.at("all_tbs").get<double>();
      row.kv_pct_ceiling = x.at("kv_pct_ceiling").get<double>();
      row.kv_pct_datasheet = x.at("kv_pct_datasheet").get<double>();
      row.all_pct_ceiling = x.at("all_pct_ceiling").get<double>();
      row.all_pct_datasheet = x.at("all_pct_datasheet").get<double>();
      row.peer_us = x.at("peer_us").get<double>();
      row.peer_tbs = x.at("peer_tbs").get<double>();
      r.rows.push_back(std::move(row));
    }
    return r;
  } catch (const std::exception& e) {
    return spec::invalid_argument(std::string("pacts-bench JSON: ") + e.what());
  }
}

Comparison compare(const Report& baseline, const Report& current, double threshold_pct) {
  std::map<std::string, const Row*> now;
  for (const Row& row : current.rows)
    if (row.ok()) now[row.shape.set + "|" + row.shape.label() + "|" + row.variant] = &row;
  Comparison c;
  for (const Row& base : baseline.rows) {
    if (!base.ok()) continue;
    const auto it = now.find(base.shape.set + "|" + base.shape.label() + "|" + base.variant);
    if (it == now.end()) {
      ++c.missing;
      continue;
    }
    ++c.compared;
    const Stats& b = base.time;
    const Stats& n = it->second->time;
    const double percent = (n.median_us - b.median_us) / b.median_us * 100.0;
    // Beyond the measured noise: the [min, max] intervals are disjoint, and the median moved by
    // more than the threshold (a shift within the spread of either run is noise).
    const bool disjoint = n.min_us > b.max_us || n.max_us < b.min_us;
    if (disjoint && std::fabs(percent) > threshold_pct)
      c.changes.push_back({base.shape.label(), base.variant, b.median_us, n.median_us, percent});
  }
  return c;
}

std::string to_text(const Comparison& c) {
  std::string out = "baseline: " + std::to_string(c.compared) + " rows compared, " +
                    std::to_string(c.changes.size()) + " changed beyond the noise, " +
                    std::to_string(c.missing) + " missing\n";
  for (const Change& ch : c.changes)
    out += "  " + std::string(ch.percent > 0 ? "SLOWER " : "FASTER ") + ch.label + " " +
           ch.variant + ": " + fmt("%.1f", ch.baseline_median_us) + " -> " +
           fmt("%.1f", ch.current_median_us) + " us (" + fmt("%+.1f", ch.percent) + "%)\n";
  return out;
}

}  // namespace pacts::bench
