#include "select/start.h"

#include <map>

#include "base/clock.h"

namespace plugboard::select {

std::string describe_devices(const Client& client) {
  std::map<std::string, int> kinds;
  for (const auto& d : client.devices()) kinds[d.kind.empty() ? "?" : d.kind]++;
  std::string out = std::to_string(client.devices().size()) + (client.devices().size() == 1 ? " device" : " devices");
  std::string sep = ": ";
  for (const auto& [kind, n] : kinds) {
    out += sep + (n > 1 ? std::to_string(n) + "× " : "") + kind;
    sep = ", ";
  }
  return out;
}

StartOutcome start_in_process(const Candidate& candidate, const StageListener& on_stage) {
  StartOutcome out;
  auto passed = [&](Stage stage, double ms, std::string detail) {
    out.stages.push_back({stage, true, ms, std::move(detail)});
    if (on_stage) on_stage(out.stages.back(), nullptr);
  };
  auto fail = [&](Stage stage, double ms, Error error) {
    out.stages.push_back({stage, false, ms, ""});
    out.failed_stage = stage;
    out.error = std::move(error);
    if (on_stage) on_stage(out.stages.back(), &*out.error);
    return std::move(out);
  };

  LoadTrace trace = load_plugin_traced(candidate.path);
  const std::string again = trace.remembered ? "already loaded in this process" : "";
  if (!trace.plugin) {
    if (trace.failed_step == LoadStep::kLoad) return fail(Stage::kLoaded, trace.load_ms, trace.plugin.error());
    passed(Stage::kLoaded, trace.load_ms, "");
    return fail(Stage::kInitialized, trace.initialize_ms, trace.plugin.error());
  }
  const std::shared_ptr<const Plugin>& plugin = *trace.plugin;
  passed(Stage::kLoaded, trace.load_ms, again.empty() ? "PJRT API " + plugin->version().to_string() : again);
  passed(Stage::kInitialized, trace.initialize_ms, "");

  auto t0 = Clock::now();
  auto client = Client::create(plugin, ClientOptions{candidate.create_options});
  const double client_ms = ms_since(t0);
  if (!client) return fail(Stage::kClient, client_ms, client.error());
  passed(Stage::kClient, client_ms, "platform " + (*client)->platform_name());

  if ((*client)->devices().empty())
    return fail(Stage::kDevices, 0,
                Error(Code::kUnavailable, "the client of " + plugin->path().string() + " has no addressable device"));
  passed(Stage::kDevices, 0, describe_devices(**client));
  out.client = std::move(*client);
  return out;
}

}  // namespace plugboard::select
