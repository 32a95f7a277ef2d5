#include "bench_util.h"

#include <algorithm>
#include <cstdarg>

namespace pbbench {

int64_t calibrate(Batch& b, double target_s, int64_t min_iters) {
  // Grow a trial batch until it runs for a measurable time, then scale to the target.
  int64_t n = 1;
  double t = b(n);
  while (t < 0.02 && t < target_s / 4) {
    n *= 4;
    t = b(n);
  }
  const double per_iter = t / static_cast<double>(n);
  return std::max<int64_t>(min_iters, static_cast<int64_t>(target_s / std::max(per_iter, 1e-12)));
}

std::vector<std::vector<double>> run_interleaved(std::vector<Batch>& variants, const std::vector<int64_t>& iters,
                                                 int reps) {
  const size_t k = variants.size();
  std::vector<std::vector<double>> out(k);
  for (int r = 0; r < reps; ++r) {
    for (size_t j = 0; j < k; ++j) {
      const size_t v = (r % 2 == 0) ? j : k - 1 - j;  // alternate the order: ABC, CBA, ...
      out[v].push_back(variants[v](iters[v]) / static_cast<double>(iters[v]));
    }
  }
  return out;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double paired_ratio(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> r;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) r.push_back(a[i] / b[i]);
  return median(std::move(r));
}

namespace {
// Linear-interpolated quantile of sorted values.
double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}
}  // namespace

double spread_pct(const std::vector<double>& v) {
  if (v.empty()) return 0;
  std::vector<double> s = v;
  std::sort(s.begin(), s.end());
  return 100.0 * (quantile(s, 0.75) - quantile(s, 0.25)) / quantile(s, 0.5);
}

std::string fmt(const char* format, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, format);
  std::vsnprintf(buf, sizeof(buf), format, ap);
  va_end(ap);
  return buf;
}

std::vector<plugboard::Buffer> device_inputs(Context& ctx, const std::vector<std::vector<int64_t>>& shapes) {
  using namespace plugboard;
  std::vector<Buffer> inputs;
  for (const auto& dims : shapes) {
    size_t n = 1;
    for (int64_t d : dims) n *= static_cast<size_t>(d);
    std::vector<float> host(n, 0.5f);
    inputs.push_back(value_or_throw(ctx.client->buffer_from_host(std::as_bytes(std::span<const float>(host)), DType::kF32, dims),
                                    "buffer_from_host"));
    ok_or_throw(value_or_throw(inputs.back().ready_event(), "ready_event").await(), "await input");
  }
  return inputs;
}

void Table::goal(std::string what, double value, double limit, bool at_most) {
  goals.push_back({std::move(what), fmt("%s %.2fx", at_most ? "<=" : ">=", limit), fmt("%.3fx", value),
                   at_most ? value <= limit : value >= limit});
}

void print_goal_summary(const std::vector<RunGoals>& runs, std::FILE* out) {
  if (runs.empty()) return;
  Table t;
  t.title = runs.size() == 1 ? "summary: every goal of this run"
                             : fmt("summary: every goal over %zu consecutive runs", runs.size());
  t.header = {"plugin", "goal", "target"};
  for (size_t r = 0; r < runs.size(); ++r) t.header.push_back(runs.size() == 1 ? "measured" : fmt("run %zu", r + 1));
  t.header.push_back("");
  // Every goal any run measured, in the order first measured; a goal missing from a run (its
  // benchmark failed, or the run died) counts as missed there.
  RunGoals all;
  for (const RunGoals& run : runs)
    for (const auto& [plugin, g] : run) {
      bool seen = false;
      for (const auto& [p, known] : all) seen = seen || (p == plugin && known.what == g.what);
      if (!seen) all.emplace_back(plugin, g);
    }
  int met_all = 0;
  for (const auto& [plugin, first] : all) {
    std::vector<std::string> row = {plugin, first.what, first.target};
    bool met = true;
    for (const RunGoals& run : runs) {
      const Goal* g = nullptr;
      for (const auto& [p, candidate] : run)
        if (p == plugin && candidate.what == first.what) g = &candidate;
      row.push_back(g ? g->measured : "-");
      met = met && g && g->met;
    }
    row.push_back(met ? "\u2713" : "\u2717");
    met_all += met ? 1 : 0;
    t.rows.push_back(std::move(row));
  }
  if (runs.size() == 1)
    t.notes.push_back(fmt("%d of %zu goals met in this run (one run on a shared machine: --runs 3 repeats it)", met_all,
                          all.size()));
  else
    t.notes.push_back(fmt("%d of %zu goals met in every one of %zu consecutive runs", met_all, all.size(), runs.size()));
  t.print(out);
}

void Table::print(std::FILE* out) const {
  std::vector<size_t> width(header.size(), 0);
  auto widen = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size() && i < width.size(); ++i) width[i] = std::max(width[i], row[i].size());
  };
  widen(header);
  for (const auto& r : rows) widen(r);
  auto line = [&](const std::vector<std::string>& row) {
    std::string s = " ";
    for (size_t i = 0; i < width.size(); ++i) {
      const std::string cell = i < row.size() ? row[i] : "";
      const std::string pad(width[i] - cell.size(), ' ');
      s += "  ";
      s += i == 0 ? cell + pad : pad + cell;  // first column left-aligned, figures right-aligned
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    std::fprintf(out, "%s\n", s.c_str());
  };
  std::fprintf(out, " %s\n", title.c_str());
  if (header.empty()) {  // a table of notes only
    for (const auto& n : notes) std::fprintf(out, "   %s\n", n.c_str());
    std::fprintf(out, "\n");
    return;
  }
  line(header);
  size_t total = 1;
  for (size_t w : width) total += w + 2;
  std::fprintf(out, "   %s\n", std::string(total - 2, '-').c_str());
  for (const auto& r : rows) line(r);
  for (const auto& n : notes) std::fprintf(out, "   %s\n", n.c_str());
  std::fprintf(out, "\n");
}

}  // namespace pbbench
