#include "select/select.h"

#include <chrono>
#include <sstream>

#include "base/clock.h"
#include "base/environment.h"
#include "base/hash_stamp.h"
#include "base/parse_number.h"
#include "base/terminal_text.h"
#include "platforms/registry.h"
#include "select/candidate_span.h"
#include "select/policy.h"

namespace plugboard::select {
namespace {
// A boolean variable: unset keeps `fallback`; anything but the usual spellings is an error.
Expected<bool> env_flag(const char* name, bool fallback) {
  auto v = environment_override(name);
  if (!v) return fallback;
  for (const char* yes : {"1", "true", "yes", "on"})
    if (*v == yes) return true;
  for (const char* no : {"0", "false", "no", "off"})
    if (*v == no) return false;
  return invalid_argument(std::string(name) + ": '" + *v + "' is not a flag (use 1/true/yes/on or 0/false/no/off)");
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) {
    while (!item.empty() && item.front() == ' ') item.erase(0, 1);
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// The stages before loading: found, verified, probed, dependencies. False when one failed.
bool check_before_loading(CandidateReport& r, const SelectOptions& options) {
  const Candidate& c = r.candidate;
  auto fail = [&](Stage stage, double ms, Error e) {
    r.stages.push_back({stage, false, ms, ""});
    r.failed_stage = stage;
    r.error = std::move(e);
    r.verdict = Verdict::kFailed;
    return false;
  };
  auto t0 = Clock::now();
  if (c.problem) return fail(Stage::kFound, ms_since(t0), *c.problem);
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(c.path, ec);
  if (st.type() == std::filesystem::file_type::not_found)
    return fail(Stage::kFound, ms_since(t0),
                Error(Code::kNotFound, "plugin file " + c.path.string() + " does not exist (from " + c.source + ")"));
  if (ec)
    return fail(Stage::kFound, ms_since(t0),
                Error(Code::kPermissionDenied, "plugin file " + c.path.string() + " (from " + c.source +
                                                   ") cannot be looked at: " + ec.message()));
  if (st.type() != std::filesystem::file_type::regular)
    return fail(Stage::kFound, ms_since(t0),
                Error(Code::kInvalidArgument, "plugin file " + c.path.string() + " (from " + c.source +
                                                  ") is not a regular file"));
  r.stages.push_back({Stage::kFound, true, ms_since(t0), ""});

  t0 = Clock::now();
  auto verified = verify_candidate(c, options.verify);
  if (!verified) return fail(Stage::kVerified, ms_since(t0), verified.error());
  r.stages.push_back({Stage::kVerified, true, ms_since(t0), verified->detail});

  t0 = Clock::now();
  const ProbeKind kind = effective_probe(c);
  if (!options.probes && !probe_is_mandatory(c)) {
    r.stages.push_back({Stage::kProbed, true, 0, "probes off"});
  } else {
    const std::string kept =
        options.probes ? "" : " (kept with probes off: a " + probe_kind_name(kind) + " target is never loaded without its probe)";
    ProbeResult p = probe(kind, options.probe_env);
    if (!p.available)
      return fail(Stage::kProbed, ms_since(t0),
                  Error(Code::kUnavailable, probe_kind_name(kind) + " probe" + kept + ": " + p.reason));
    r.stages.push_back({Stage::kProbed, true, ms_since(t0), p.reason + kept});
  }

  t0 = Clock::now();
  if (!options.dependencies) {
    r.stages.push_back({Stage::kDependencies, true, 0, "dependency check off"});
    return true;
  }
  auto deps = resolve_dependencies(c.path, options.probe_env.resolve);
  if (!deps) return fail(Stage::kDependencies, ms_since(t0), deps.error());
  if (auto missing = deps->missing(); !missing.empty())
    return fail(Stage::kDependencies, ms_since(t0),
                Error(Code::kFailedPrecondition, c.path.filename().string() + " needs " + std::to_string(missing.size()) +
                                                     " librar" + (missing.size() == 1 ? "y" : "ies") +
                                                     " the loader cannot find: " + deps->missing_summary()));
  r.stages.push_back({Stage::kDependencies, true, ms_since(t0),
                      std::to_string(deps->dependencies.size()) + " libraries resolved"});
  return true;
}

void absorb(CandidateReport& r, StartOutcome&& s) {
  for (auto& st : s.stages) r.stages.push_back(std::move(st));
  if (s.failed_stage) {
    r.failed_stage = s.failed_stage;
    r.error = std::move(s.error);
    r.verdict = Verdict::kFailed;
  }
}

}  // namespace

SelectOptions::SelectOptions() {
  verify.stamp_dir = default_stamp_dir();
  probe_env = ProbeEnvironment::from_process();
}

Expected<SelectOptions> read_environment(SelectOptions base) {
  if (!base.target && base.preference.empty()) {
    if (auto t = environment_override("PLUGBOARD_TARGET")) {
      base.target = *t;
      base.policy_source = "PLUGBOARD_TARGET";
    } else if (auto list = environment_override("PLUGBOARD_TARGETS")) {
      base.preference = split_list(*list);
      base.policy_source = "PLUGBOARD_TARGETS";
    }
  }
  PB_ASSIGN_OR_RETURN(base.probes, env_flag("PLUGBOARD_PROBES", base.probes));
  PB_ASSIGN_OR_RETURN(base.isolate, env_flag("PLUGBOARD_ISOLATE", base.isolate));
  if (auto ms = environment_override("PLUGBOARD_ISOLATE_TIMEOUT_MS")) {
    PB_ASSIGN_OR_RETURN(int64_t v, parse_int64(*ms, "PLUGBOARD_ISOLATE_TIMEOUT_MS (milliseconds)", 1, kMaxIsolateTimeoutMs));
    base.isolation.timeout = std::chrono::milliseconds(v);
  }
  PB_ASSIGN_OR_RETURN(base.verify.rehash, env_flag("PLUGBOARD_REHASH", base.verify.rehash));
  return base;
}

SelectOptions options_from_environment(SelectOptions base) {
  auto read = read_environment(base);
  if (read) return std::move(*read);
  base.problem = std::move(read).error();
  return base;
}

bool probe_is_mandatory(const Candidate& c) {
  const platforms::PlatformTraits* p = platforms::platform_for_probe(effective_probe(c));
  return p && p->probe_mandatory;
}

ProbeKind effective_probe(const Candidate& c) {
  if (c.probe != ProbeKind::kNone) return c.probe;
  const platforms::PlatformTraits* p = platforms::find_platform(c.platform);
  return p && p->probe_mandatory ? p->probe : ProbeKind::kNone;
}

Status Selection::status() const {
  if (client) return ok();
  // The policy names a target from the caller or the environment (PLUGBOARD_TARGET): spelled out, as
  // the report's reasons are, so that the message cannot clear a terminal or forge a log line.
  std::string msg = "no target could start (" + terminal_safe(report.policy) + ")";
  if (std::string why = report.reasons(); !why.empty()) msg += ":\n" + why;
  while (!msg.empty() && msg.back() == '\n') msg.pop_back();
  // A single failed candidate (an explicit target) passes its own code on; several: UNAVAILABLE.
  Code code = Code::kUnavailable;
  const CandidateReport* failed = nullptr;
  size_t failures = 0;
  for (const auto& c : report.candidates)
    if (c.verdict == Verdict::kFailed && c.error) failed = &c, ++failures;
  if (failures == 1) code = failed->error->code();
  return make_error(code, msg);
}

Selection select_target(const std::vector<Candidate>& candidates, const SelectOptions& options) {
  Selection sel;
  Ordering order = order_candidates(candidates, options.target, options.preference, options.policy_source);
  sel.report.policy = order.policy;
  if (options.problem) order.problem = options.problem;  // a malformed setting: no candidate is tried
  for (size_t i : order.to_try) sel.report.candidates.push_back({candidates[i]});
  for (auto& [i, why] : order.excluded) {
    CandidateReport r{candidates[i]};
    r.verdict = Verdict::kExcluded;
    r.excluded_because = why;
    sel.report.candidates.push_back(std::move(r));
  }
  if (order.problem) {
    Candidate none;
    none.name = options.problem ? "(settings)" : options.target.value_or("(none)");
    none.source = options.problem ? "environment" : "policy";
    CandidateReport r{none};
    r.verdict = Verdict::kFailed;
    r.failed_stage = Stage::kFound;
    r.error = *order.problem;
    r.stages.push_back({Stage::kFound, false, 0, ""});
    sel.report.candidates.insert(sel.report.candidates.begin(), std::move(r));
    return sel;
  }

  for (size_t k = 0; k < order.to_try.size(); ++k) {
    CandidateReport& r = sel.report.candidates[k];
    if (sel.client && !options.examine_all) break;  // the rest stay "not tried"
    CandidateSpan span(r);
    const bool checked = check_before_loading(r, options);
    span.stages();
    if (!checked) continue;
    if (options.before_loading_only) {
      r.verdict = Verdict::kUsable;
      continue;
    }
    if (options.isolate || options.examine_all) {
      r.isolated = true;
      StartOutcome child = start_isolated(r.candidate, options.isolation);
      const bool passed = !child.failed_stage;
      absorb(r, std::move(child));
      span.stages("isolated");
      if (!passed) continue;
      if (options.examine_all) {
        r.verdict = sel.report.chosen ? Verdict::kUsable : Verdict::kChosen;
        if (!sel.report.chosen) sel.report.chosen = k;
        continue;
      }
      // The child got through: start it here for real (its stage times replace the child's).
      std::erase_if(r.stages, [](const StageResult& s) { return s.stage >= Stage::kLoaded; });
      span.recorded_up_to_now();
    }
    StartOutcome here = start_in_process(r.candidate);
    std::shared_ptr<Client> client = here.client;
    absorb(r, std::move(here));
    span.stages();
    if (!client) continue;
    r.stages.push_back({Stage::kChosen, true, 0, ""});
    r.verdict = Verdict::kChosen;
    sel.report.chosen = k;
    sel.client = std::move(client);
  }
  return sel;
}

}  // namespace plugboard::select
