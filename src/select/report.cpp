#include "select/report.h"

#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>

#include "base/terminal_text.h"

namespace plugboard::select {
namespace {
constexpr std::array<const char*, kStageCount> kStageNames = {
    "found", "verified", "probed", "dependencies", "loaded", "initialized", "client", "devices", "chosen"};

std::string format_ms(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, ms < 10 ? "%.2f" : "%.0f", ms);
  return buf;
}

// Names, platforms, paths, details and reasons come from manifests, the environment, plugins and the
// isolation child: every control character is spelled out before it reaches a terminal or a log.
std::string safe(std::string_view text) { return terminal_safe(text); }
}  // namespace

std::string stage_name(Stage stage) { return kStageNames[static_cast<size_t>(stage)]; }

std::optional<Stage> parse_stage(std::string_view name) {
  for (size_t i = 0; i < kStageNames.size(); ++i)
    if (name == kStageNames[i]) return static_cast<Stage>(i);
  return std::nullopt;
}

std::string verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kChosen: return "chosen";
    case Verdict::kFailed: return "failed";
    case Verdict::kUsable: return "usable";
    case Verdict::kNotTried: return "not tried";
    case Verdict::kExcluded: return "excluded";
  }
  return "?";
}

std::optional<Stage> CandidateReport::reached() const {
  std::optional<Stage> last;
  for (const auto& s : stages)
    if (s.passed) last = s.stage;
  return last;
}

double CandidateReport::total_ms() const {
  double t = 0;
  for (const auto& s : stages) t += s.ms;
  return t;
}

std::string BootReport::reasons() const {
  std::string out;
  for (const auto& c : candidates) {
    if (c.verdict == Verdict::kFailed && c.error && c.failed_stage)
      out += safe(c.candidate.name) + ": " + stage_name(*c.failed_stage) + ": " + safe(c.error->to_string()) + "\n";
  }
  return out;
}

std::string BootReport::to_text() const {
  std::string out = "policy: " + safe(policy) + "\n";
  for (size_t i = 0; i < candidates.size(); ++i) {
    const CandidateReport& c = candidates[i];
    std::optional<Stage> reached = c.reached();
    std::string row = "  " + safe(c.candidate.name) + " [" + safe(c.candidate.platform) + "]  " + verdict_name(c.verdict);
    if (c.verdict == Verdict::kFailed && c.failed_stage) row += " at " + stage_name(*c.failed_stage);
    else if (reached) row += ", reached " + stage_name(*reached);
    row += "  (" + format_ms(c.total_ms()) + " ms" + (c.isolated ? ", isolated" : "") + ")\n";
    row += "      " + safe(c.candidate.path.string()) + "  from " + safe(c.candidate.source) + "\n";
    if (!c.stages.empty()) {
      row += "      ";
      for (size_t k = 0; k < c.stages.size(); ++k) {
        const StageResult& s = c.stages[k];
        row += (k ? " → " : "") + stage_name(s.stage) + (s.passed ? "" : " ✗") + " " + format_ms(s.ms) + "ms";
      }
      row += "\n";
    }
    for (const auto& s : c.stages)
      if (s.passed && !s.detail.empty()) row += "      " + stage_name(s.stage) + ": " + safe(s.detail) + "\n";
    if (c.error) row += "      reason: " + safe(c.error->to_string()) + "\n";
    if (c.verdict == Verdict::kExcluded) row += "      reason: " + safe(c.excluded_because) + "\n";
    if (!c.candidate.precompiled_mismatch.empty()) row += "      precompiled: " + safe(c.candidate.precompiled_mismatch) + "\n";
    out += row;
  }
  if (const CandidateReport* c = chosen_report())
    out += "chosen: " + safe(c->candidate.name) + " (" + safe(c->candidate.path.string()) + ")\n";
  else
    out += "chosen: none\n";
  return out;
}

std::string BootReport::to_json() const {
  nlohmann::ordered_json j;
  j["schema"] = 1;
  j["policy"] = policy;
  j["chosen"] = chosen_report() ? nlohmann::ordered_json(chosen_report()->candidate.name) : nlohmann::ordered_json();
  j["candidates"] = nlohmann::ordered_json::array();
  for (const auto& c : candidates) {
    nlohmann::ordered_json row;
    row["name"] = c.candidate.name;
    row["platform"] = c.candidate.platform;
    row["path"] = c.candidate.path.string();
    row["source"] = c.candidate.source;
    row["origin"] = c.candidate.origin;
    if (!c.candidate.precompiled_mismatch.empty()) row["precompiled_mismatch"] = c.candidate.precompiled_mismatch;
    row["verdict"] = verdict_name(c.verdict);
    std::optional<Stage> reached = c.reached();
    row["reached"] = reached ? nlohmann::ordered_json(stage_name(*reached)) : nlohmann::ordered_json();
    row["failed_stage"] = c.failed_stage ? nlohmann::ordered_json(stage_name(*c.failed_stage)) : nlohmann::ordered_json();
    if (c.error) {
      row["code"] = code_name(c.error->code());
      row["reason"] = c.error->to_string();
    } else if (c.verdict == Verdict::kExcluded) {
      row["reason"] = c.excluded_because;
    }
    row["isolated"] = c.isolated;
    row["stages"] = nlohmann::ordered_json::array();
    for (const auto& s : c.stages)
      row["stages"].push_back({{"stage", stage_name(s.stage)}, {"passed", s.passed}, {"ms", s.ms}, {"detail", s.detail}});
    j["candidates"].push_back(std::move(row));
  }
  // JSON escapes control characters itself; bytes that are not UTF-8 (a plugin's message, a path) are
  // replaced rather than thrown over.
  return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace plugboard::select
