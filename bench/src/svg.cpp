// The SVG plot of a report, written by hand (no plotting dependency): TB/s of K/V bytes against
// context length (log2 axis), one line per Shape::series() (KV format and scale mode x page
// size x layout) and variant, each point the best row of that series at that context; the
// measured read ceiling and the datasheet as horizontal references.
#include "internal.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace pacts::bench {
namespace {

std::string num(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", x);
  return buf;
}

std::string num2(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", x);
  return buf;
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

}  // namespace

std::string to_svg(const Report& r) {
  // series -> context -> best K/V TB/s
  std::map<std::string, std::map<int32_t, double>> series;
  double y_max = std::max(r.ceilings.read_tbs, r.datasheet_tbs);
  int32_t x_lo = 0, x_hi = 0;
  for (const Row& row : r.rows) {
    if (!row.ok()) continue;
    const std::string name = row.shape.series() + (row.variant == "safe" ? "" : " " + row.variant);
    double& best = series[name][row.shape.context];
    best = std::max(best, row.kv_tbs);
    y_max = std::max(y_max, row.kv_tbs);
    x_lo = x_lo ? std::min(x_lo, row.shape.context) : row.shape.context;
    x_hi = std::max(x_hi, row.shape.context);
  }
  if (y_max <= 0) y_max = 1;
  y_max *= 1.1;
  const double lx0 = std::log2(std::max(1, x_lo)), lx1 = std::max(lx0 + 1, std::log2(std::max(1, x_hi)));
  const double W = 900, H = 520, left = 70, right = 230, top = 50, bottom = 60;
  const double pw = W - left - right, ph = H - top - bottom;
  const auto px = [&](double ctx) { return left + (std::log2(ctx) - lx0) / (lx1 - lx0) * pw; };
  const auto py = [&](double tbs) { return top + ph - tbs / y_max * ph; };

  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(W) + "\" height=\"" +
                  num(H) + "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  s += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s += "<text x=\"" + num(left) + "\" y=\"24\" font-size=\"15\">" +
       escape("pacts-bench " + r.set + " on " + r.device + " (" + r.backend +
              "): K/V TB/s, best row per context") +
       "</text>\n";
  // Axes and ticks.
  s += "<line x1=\"" + num(left) + "\" y1=\"" + num(top + ph) + "\" x2=\"" + num(left + pw) +
       "\" y2=\"" + num(top + ph) + "\" stroke=\"black\"/>\n";
  s += "<line x1=\"" + num(left) + "\" y1=\"" + num(top) + "\" x2=\"" + num(left) + "\" y2=\"" +
       num(top + ph) + "\" stroke=\"black\"/>\n";
  for (double e = std::ceil(lx0); e <= lx1 + 1e-9; e += 1) {
    const double x = left + (e - lx0) / (lx1 - lx0) * pw;
    s += "<line x1=\"" + num(x) + "\" y1=\"" + num(top + ph) + "\" x2=\"" + num(x) + "\" y2=\"" +
         num(top + ph + 5) + "\" stroke=\"black\"/>\n";
    s += "<text x=\"" + num(x) + "\" y=\"" + num(top + ph + 18) + "\" text-anchor=\"middle\">" +
         std::to_string(static_cast<long long>(std::llround(std::exp2(e)))) + "</text>\n";
  }
  for (int i = 0; i <= 5; ++i) {
    const double v = y_max * i / 5;
    char tick[32];
    std::snprintf(tick, sizeof tick, "%.3g", v);
    s += "<text x=\"" + num(left - 8) + "\" y=\"" + num(py(v) + 4) + "\" text-anchor=\"end\">" +
         tick + "</text>\n";
    s += "<line x1=\"" + num(left) + "\" y1=\"" + num(py(v)) + "\" x2=\"" + num(left + pw) +
         "\" y2=\"" + num(py(v)) + "\" stroke=\"#eee\"/>\n";
  }
  s += "<text x=\"" + num(left + pw / 2) + "\" y=\"" + num(H - 15) +
       "\" text-anchor=\"middle\">context (keys)</text>\n";
  s += "<text x=\"18\" y=\"" + num(top + ph / 2) + "\" transform=\"rotate(-90 18 " +
       num(top + ph / 2) + ")\" text-anchor=\"middle\">TB/s (K/V bytes)</text>\n";
  // References.
  const auto reference = [&](double tbs, const std::string& what) {
    if (tbs <= 0) return;
    s += "<line x1=\"" + num(left) + "\" y1=\"" + num(py(tbs)) + "\" x2=\"" + num(left + pw) +
         "\" y2=\"" + num(py(tbs)) + "\" stroke=\"gray\" stroke-dasharray=\"2,3\"/>\n";
    s += "<text x=\"" + num(left + pw - 4) + "\" y=\"" + num(py(tbs) - 4) +
         "\" text-anchor=\"end\" fill=\"gray\">" + escape(what + " " + num2(tbs) + " TB/s") +
         "</text>\n";
  };
  reference(r.ceilings.read_tbs, "measured read ceiling");
  reference(r.datasheet_tbs, "datasheet");
  // Series.
  static const char* kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                  "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  // A series and its unsafe twin share a colour; the unsafe one is dashed.
  std::map<std::string, size_t> colour_of;
  int i = 0;
  for (const auto& [name, points] : series) {
    const bool unsafe = name.find(" unsafe") != std::string::npos;
    const std::string base = unsafe ? name.substr(0, name.find(" unsafe")) : name;
    const char* color = kColors[colour_of.emplace(base, colour_of.size()).first->second % 10];
    std::string path;
    for (const auto& [ctx, tbs] : points)
      path += (path.empty() ? "" : " ") + num(px(ctx)) + "," + num(py(tbs));
    s += "<polyline class=\"series\" data-series=\"" + escape(name) + "\" fill=\"none\" stroke=\"" +
         color + "\" stroke-width=\"2\"" + (unsafe ? " stroke-dasharray=\"6,4\"" : "") +
         " points=\"" + path + "\"/>\n";
    for (const auto& [ctx, tbs] : points)
      s += "<circle cx=\"" + num(px(ctx)) + "\" cy=\"" + num(py(tbs)) + "\" r=\"3\" fill=\"" +
           color + "\"/>\n";
    const double ly = top + 10 + 18 * i;
    s += "<line x1=\"" + num(W - right + 15) + "\" y1=\"" + num(ly) + "\" x2=\"" +
         num(W - right + 40) + "\" y2=\"" + num(ly) + "\" stroke=\"" + color +
         "\" stroke-width=\"2\"" + (unsafe ? " stroke-dasharray=\"6,4\"" : "") + "/>\n";
    s += "<text x=\"" + num(W - right + 46) + "\" y=\"" + num(ly + 4) + "\">" + escape(name) +
         "</text>\n";
    ++i;
  }
  s += "</svg>\n";
  return s;
}

}  // namespace pacts::bench
