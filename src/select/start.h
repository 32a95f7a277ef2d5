// The stages that touch the plugin itself — loaded, initialized, client, devices — run in this
// process. Each stage's outcome and time is appended to the report; the client is handed back when
// every stage passed.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "runtime/client.h"
#include "select/report.h"

namespace plugboard::select {

struct StartOutcome {
  std::vector<StageResult> stages;
  std::optional<Stage> failed_stage;
  std::optional<Error> error;
  std::shared_ptr<Client> client;  // set when every stage passed
};

// `on_stage` (optional) hears of each stage as soon as it ends: the isolation child reports through it.
using StageListener = std::function<void(const StageResult&, const Error*)>;
StartOutcome start_in_process(const Candidate& candidate, const StageListener& on_stage = {});

// "1 device: cpu" / "8 devices: NVIDIA H200"
std::string describe_devices(const Client& client);

}  // namespace plugboard::select
