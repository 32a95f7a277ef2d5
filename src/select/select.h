// The boot-time choice: candidates in, one started client and a report out.
//
// Policy (policy.h): an explicit target (PLUGBOARD_TARGET) is the only one tried, and its failure is
// the boot's failure; an ordered preference (PLUGBOARD_TARGETS=cuda13,rocm7,cpu) is tried in order with
// fallback; with neither, every candidate by priority (accelerators before CPU). Each candidate goes
// through found → verified → probed → dependencies → loaded → initialized → client → devices; the
// first stage that fails is its reason; the first candidate to pass them all is chosen.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/client.h"
#include "select/isolate.h"
#include "select/probe.h"
#include "select/report.h"
#include "select/verify.h"

namespace plugboard::select {

struct SelectOptions {
  // The defaults need work that can fail (the stamp folder, the process's environment): done in the
  // constructor's body, on members already built. GCC 12 destroys a member twice when such work
  // throws inside a default member initializer (found by facade_test's allocation sweep).
  SelectOptions();

  std::optional<std::string> target;   // explicit: that one or fail
  std::vector<std::string> preference;  // ordered fallback; empty = by priority
  std::string policy_source;            // where target/preference came from, for the report ("PLUGBOARD_TARGET")
  bool probes = true;                   // false: skip the probed stage (it passes, saying so)
  bool dependencies = true;             // false: skip the ELF dependency stage
  VerifyOptions verify;
  ProbeEnvironment probe_env;
  bool isolate = false;                 // run the load/create stages in a child first
  IsolationOptions isolation;
  bool examine_all = false;             // doctor: run every candidate through every stage, start none here
  // discover: every candidate through the stages before loading only (found, verified, probed,
  // dependencies); those that pass are kUsable. Nothing is loaded, nothing chosen.
  bool before_loading_only = false;
  // A malformed setting (an environment variable that does not parse): the boot fails with it, naming
  // the variable, before any candidate is looked at.
  std::optional<Error> problem;
};

// PLUGBOARD_TARGET, PLUGBOARD_TARGETS, PLUGBOARD_PROBES=0|1, PLUGBOARD_ISOLATE=0|1,
// PLUGBOARD_ISOLATE_TIMEOUT_MS=N, PLUGBOARD_REHASH=0|1 read into options (what the caller set
// explicitly wins: pass it in `base`). Each is read with secure_getenv (ignored in setuid/setgid
// processes) and parsed strictly: a flag is 1/true/yes/on or 0/false/no/off, the time limit a whole
// number of milliseconds in [1, kMaxIsolateTimeoutMs]. Anything else is an error naming the variable.
inline constexpr int64_t kMaxIsolateTimeoutMs = 86'400'000;  // a day
Expected<SelectOptions> read_environment(SelectOptions base = {});
// The same, for callers that hand the options on: an error is kept in `problem`, and fails the boot.
SelectOptions options_from_environment(SelectOptions base = {});

// Whether a candidate must pass its device probe even with probes off: a platform whose traits say
// so (platforms/registry.h: TPU, whose libtpu start-up reaches for cloud metadata and can hang on a
// machine without a TPU) is never loaded without one.
bool probe_is_mandatory(const Candidate& candidate);
// The probe a candidate gets: its own, or its platform's mandatory probe when it names none.
ProbeKind effective_probe(const Candidate& candidate);

struct Selection {
  BootReport report;
  std::shared_ptr<Client> client;  // null when nothing could start (or examine_all)
  // The boot's failure, with the report's reasons in it; ok() when a client was started.
  Status status() const;
};

Selection select_target(const std::vector<Candidate>& candidates, const SelectOptions& options);

}  // namespace plugboard::select
