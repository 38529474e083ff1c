// The SVG plot of a report, written by hand (no plotting dependency): K/V bytes per second against
// context length (log2 axis, a tick at each context timed), one line per batch, heads, D and
// Shape::series() (KV format and scale mode x page size x layout) and variant, each point the
// best row of that line at that context; the measured read ceiling and the datasheet as
// horizontal references. The unit follows the data (TB/s, or GB/s and MB/s for slower backends
// such as the host), the value axis has round ticks, and the foot names the suite version, driver
// and runtime.
#include "internal.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <vector>

namespace pacts::bench {
namespace {

std::string num(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", x);
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

// A "nice" tick step for an axis from 0 to `top`: 1, 2, 2.5 or 5 times a power of ten, about
// five ticks.
double nice_step(double top) {
  const double raw = top / 5, p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0})
    if (m * p >= raw) return m * p;
  return 10 * p;
}

// A tick value without trailing zeros: 0, 0.5, 2.5, 1000.
std::string tick_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// A measured value to three significant digits: 10.2, 4.36.
std::string three_digits(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

}  // namespace

std::string to_svg(const Report& r) {
  // One line per series: the KV format, scale, page size and layout, with the batch, the heads
  // and D (Shape::series() alone would join shapes of other batches and heads into one line);
  // each point the best row of that line at that context.
  std::map<std::string, std::map<int32_t, double>> series;
  double top_tbs = std::max(r.ceilings.read_tbs, r.datasheet_tbs);
  std::vector<int32_t> contexts;
  for (const Row& row : r.rows) {
    if (!row.ok()) continue;
    const Shape& sh = row.shape;
    const std::string name = "B" + std::to_string(sh.batch) + " Hq" + std::to_string(sh.num_q_heads) +
                             "/Hkv" + std::to_string(sh.num_kv_heads) + " D" + std::to_string(sh.head_dim) +
                             " " + sh.series() + (row.variant == "safe" ? "" : " " + row.variant);
    double& best = series[name][sh.context];
    best = std::max(best, row.kv_tbs);
    top_tbs = std::max(top_tbs, row.kv_tbs);
    contexts.push_back(sh.context);
  }
  std::sort(contexts.begin(), contexts.end());
  contexts.erase(std::unique(contexts.begin(), contexts.end()), contexts.end());
  // The unit follows the data: TB/s on a GPU, GB/s or MB/s on the host.
  double scale = 1;
  std::string unit = "TB/s";
  if (top_tbs > 0 && top_tbs < 0.1) scale = 1e3, unit = "GB/s";
  if (top_tbs > 0 && top_tbs < 1e-4) scale = 1e6, unit = "MB/s";
  const double top_value = top_tbs > 0 ? top_tbs * scale : 1;
  const double step = nice_step(top_value * 1.05);
  const double y_max = std::ceil(top_value * 1.05 / step) * step;
  // x: log2 of the context; one context sits in the middle of an axis one octave either side,
  // and only contexts that were timed get a tick.
  const double lx0 = contexts.empty() ? 0 : std::log2(std::max(1, contexts.front())) - (contexts.size() == 1 ? 1 : 0);
  const double lx1 = contexts.empty() ? 1 : std::log2(std::max(1, contexts.back())) + (contexts.size() == 1 ? 1 : 0);
  const double W = 980, H = 560, left = 95, right = 330, top = 56, bottom = 78;
  const double pw = W - left - right, ph = H - top - bottom;
  const auto px = [&](double ctx) { return left + (std::log2(ctx) - lx0) / std::max(1e-9, lx1 - lx0) * pw; };
  const auto py = [&](double value) { return top + ph - value / y_max * ph; };

  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(W) + "\" height=\"" +
                  num(H) + "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  s += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s += "<text x=\"" + num(left) + "\" y=\"24\" font-size=\"15\">" +
       escape("pacts-bench " + r.set + " on " + r.device + " (" + r.backend + ")") + "</text>\n";
  s += "<text x=\"" + num(left) + "\" y=\"42\" fill=\"#555\">" +
       escape("K/V bytes per second, the best row of each line at each context") + "</text>\n";
  // Axes, ticks and grid.
  s += "<line x1=\"" + num(left) + "\" y1=\"" + num(top + ph) + "\" x2=\"" + num(left + pw) +
       "\" y2=\"" + num(top + ph) + "\" stroke=\"black\"/>\n";
  s += "<line x1=\"" + num(left) + "\" y1=\"" + num(top) + "\" x2=\"" + num(left) + "\" y2=\"" +
       num(top + ph) + "\" stroke=\"black\"/>\n";
  for (int32_t c : contexts) {
    const double x = px(c);
    s += "<line x1=\"" + num(x) + "\" y1=\"" + num(top + ph) + "\" x2=\"" + num(x) + "\" y2=\"" +
         num(top + ph + 5) + "\" stroke=\"black\"/>\n";
    s += "<text class=\"xtick\" x=\"" + num(x) + "\" y=\"" + num(top + ph + 19) +
         "\" text-anchor=\"middle\">" + std::to_string(c) + "</text>\n";
  }
  for (double v = 0; v <= y_max + step / 2; v += step) {
    s += "<text class=\"ytick\" x=\"" + num(left - 8) + "\" y=\"" + num(py(v) + 4) +
         "\" text-anchor=\"end\">" + tick_text(v) + "</text>\n";
    s += "<line x1=\"" + num(left) + "\" y1=\"" + num(py(v)) + "\" x2=\"" + num(left + pw) +
         "\" y2=\"" + num(py(v)) + "\" stroke=\"#eee\"/>\n";
  }
  s += "<text x=\"" + num(left + pw / 2) + "\" y=\"" + num(top + ph + 44) +
       "\" text-anchor=\"middle\">context (keys per sequence, log scale)</text>\n";
  s += "<text x=\"22\" y=\"" + num(top + ph / 2) + "\" transform=\"rotate(-90 22 " +
       num(top + ph / 2) + ")\" text-anchor=\"middle\">" + unit + " (K/V bytes)</text>\n";
  // References.
  const auto reference = [&](double tbs, const std::string& what) {
    if (tbs <= 0) return;
    const double v = tbs * scale;
    s += "<line x1=\"" + num(left) + "\" y1=\"" + num(py(v)) + "\" x2=\"" + num(left + pw) +
         "\" y2=\"" + num(py(v)) + "\" stroke=\"gray\" stroke-dasharray=\"2,3\"/>\n";
    s += "<text x=\"" + num(left + pw - 4) + "\" y=\"" + num(py(v) - 4) +
         "\" text-anchor=\"end\" fill=\"gray\">" + escape(what + " " + three_digits(v) + " " + unit) +
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
      path += (path.empty() ? "" : " ") + num(px(ctx)) + "," + num(py(tbs * scale));
    s += "<polyline class=\"series\" data-series=\"" + escape(name) + "\" fill=\"none\" stroke=\"" +
         color + "\" stroke-width=\"2\"" + (unsafe ? " stroke-dasharray=\"6,4\"" : "") +
         " points=\"" + path + "\"/>\n";
    for (const auto& [ctx, tbs] : points)
      s += "<circle cx=\"" + num(px(ctx)) + "\" cy=\"" + num(py(tbs * scale)) + "\" r=\"3\" fill=\"" +
           color + "\"/>\n";
    const double ly = top + 10 + 18 * i;
    s += "<line x1=\"" + num(W - right + 15) + "\" y1=\"" + num(ly) + "\" x2=\"" +
         num(W - right + 40) + "\" y2=\"" + num(ly) + "\" stroke=\"" + color +
         "\" stroke-width=\"2\"" + (unsafe ? " stroke-dasharray=\"6,4\"" : "") + "/>\n";
    s += "<text x=\"" + num(W - right + 46) + "\" y=\"" + num(ly + 4) + "\">" + escape(name) +
         "</text>\n";
    ++i;
  }
  // What made it: the suite version, the driver and runtime.
  std::string made = "pacts " + r.suite_version;
  if (!r.driver.empty()) made += "; driver " + r.driver;
  if (!r.runtime.empty()) made += "; runtime " + r.runtime;
  s += "<text class=\"provenance\" x=\"" + num(left) + "\" y=\"" + num(H - 10) +
       "\" font-size=\"10\" fill=\"#555\">" + escape(made) + "</text>\n";
  s += "</svg>\n";
  return s;
}

}  // namespace pacts::bench
