// The selection report, as a value: per candidate the stages it passed, how long each took, the first
// stage that failed and why; and which candidate was chosen. The CLI's doctor prints it, the Elixir
// side will log it, and an explicit choice that fails carries it in its error.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "select/candidate.h"

namespace plugboard::select {

// In the order a candidate goes through them.
enum class Stage { kFound, kVerified, kProbed, kDependencies, kLoaded, kInitialized, kClient, kDevices, kChosen };
inline constexpr int kStageCount = 9;
std::string stage_name(Stage stage);  // "found", "verified", ...
std::optional<Stage> parse_stage(std::string_view name);

struct StageResult {
  Stage stage;
  bool passed = false;
  double ms = 0;       // how long the stage took
  std::string detail;  // on success, what it found ("3 devices: cpu", "stamp reused"); on failure, empty
};

enum class Verdict {
  kChosen,       // this candidate is the one the boot uses
  kFailed,       // a stage failed: `failed_stage` and `error` say which and why
  kUsable,       // passed every stage but another was chosen (doctor examines them all)
  kNotTried,     // an earlier candidate was chosen first
  kExcluded,     // the policy left it out (not the explicit target, not in the preference list)
};
std::string verdict_name(Verdict v);

struct CandidateReport {
  Candidate candidate;
  std::vector<StageResult> stages;  // the stages run, in order; the last one failed when verdict is kFailed
  Verdict verdict = Verdict::kNotTried;
  std::optional<Stage> failed_stage;
  std::optional<Error> error;
  bool isolated = false;  // the load and create stages ran in a child process
  std::string excluded_because;

  // The last stage passed ("found" when none failed yet... see stages).
  std::optional<Stage> reached() const;
  double total_ms() const;
};

struct BootReport {
  std::string policy;  // "explicit target cuda13 (PLUGBOARD_TARGET)", "preference cuda13,cpu", "priority"
  std::vector<CandidateReport> candidates;  // in the order they were considered
  std::optional<size_t> chosen;             // index into candidates

  const CandidateReport* chosen_report() const { return chosen ? &candidates[*chosen] : nullptr; }
  // A table, one row per candidate, for terminals and logs.
  std::string to_text() const;
  // The same as JSON (schema 1), for tools and the Elixir side.
  std::string to_json() const;
  // One line per failed candidate: "cuda13: client: No visible GPU devices" (excluded ones are not listed).
  std::string reasons() const;
};

}  // namespace plugboard::select
