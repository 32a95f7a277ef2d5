// Isolation: the load and create stages of a candidate run in a child process (the plugboard-isolate
// helper, spawned with posix_spawn, never fork alone: plugins start threads), under a time limit. A
// plugin that crashes or hangs in its start-up is then a line in the report — "client: the child
// process died of SIGSEGV", "client: did not finish within 5000 ms" — and the host goes on.
//
// The child prints one JSON line per stage on stdout (the protocol in isolate_protocol.h); the parent
// reads them as they come, so a hang or crash is pinned to the stage it happened in.
#pragma once

#include <chrono>
#include <filesystem>

#include "select/start.h"

namespace plugboard::select {

struct IsolationOptions {
  std::filesystem::path helper;  // "" = find_isolation_helper()
  std::chrono::milliseconds timeout{30000};
};

// The helper: $PLUGBOARD_ISOLATE_HELPER, else plugboard-isolate next to the running executable, else
// the one this build made. NOT_FOUND naming the places looked in.
Expected<std::filesystem::path> find_isolation_helper();

// Runs loaded..devices in a child; the outcome never has a client (it lived in the child).
StartOutcome start_isolated(const Candidate& candidate, const IsolationOptions& options);

}  // namespace plugboard::select
