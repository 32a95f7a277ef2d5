#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "callback/registry.h"
#include "base/terminal_text.h"
#include "commands.h"
#include "json_output.h"
#include "runtime/client.h"

namespace plugboard::cli {
namespace {

struct Options {
  std::vector<std::string> paths;
  bool json = false;
};

nlohmann::json attribute_json(const NamedValueData& v) {
  return std::visit([](const auto& x) { return nlohmann::json(x); }, v);
}

nlohmann::json error_json(const Error& e) { return {{"code", code_name(e.code())}, {"message", e.to_string()}}; }

// One plugin's report; `ok` says whether it loaded and created a client.
nlohmann::json inspect(const std::string& path, bool& ok) {
  nlohmann::json j = {{"path", path}};
  auto plugin = load_plugin(path);
  if (!plugin) {
    j["load_error"] = error_json(plugin.error());
    ok = false;
    return j;
  }
  const Plugin& p = **plugin;
  j["path"] = p.path().string();
  j["pjrt_version"] = p.version().to_string();
  for (const auto& a : p.attributes()) j["attributes"][a.name] = attribute_json(a.value);
  j["extensions"] = nlohmann::json::array();
  for (const auto& e : p.extensions()) j["extensions"].push_back({{"type", e.type}, {"name", e.name}, {"struct_size", e.struct_size}});
  auto client = Client::create(*plugin);
  if (!client) {
    j["client_error"] = error_json(client.error());
    ok = false;
    return j;
  }
  j["platform"] = (*client)->platform_name();
  j["platform_version"] = (*client)->platform_version();
  j["devices"] = nlohmann::json::array();
  for (const auto& d : (*client)->devices())
    j["devices"].push_back({{"id", d.id}, {"kind", d.kind}, {"local_hardware_id", d.local_hardware_id}, {"description", d.description}});
  // A capability found by trying it: register, compile and run a one-callback program.
  const auto t0 = Clock::now();
  Status callbacks = self_test_callbacks(**client);
  const double ms = ms_since(t0);
  j["host_callbacks"] = {{"works", callbacks.has_value()}, {"self_test_ms", ms}};
  if (!callbacks) j["host_callbacks"]["error"] = error_json(callbacks.error());
  return j;
}

// Every string shown comes from the plugin or the command line: printed with control characters spelled out.
std::string shown(const nlohmann::json& v) { return terminal_safe(v.is_string() ? v.get<std::string>() : json_text(v)); }

void print_text(const nlohmann::json& j) {
  std::printf("%s\n", shown(j["path"]).c_str());
  if (j.contains("load_error")) {
    std::printf("  not loaded: %s\n", shown(j["load_error"]["message"]).c_str());
    return;
  }
  std::printf("  PJRT API     %s\n", shown(j["pjrt_version"]).c_str());
  if (j.contains("attributes"))
    for (const auto& [k, v] : j["attributes"].items()) std::printf("  %-12s %s\n", terminal_safe(k).c_str(), shown(v).c_str());
  std::string ext;
  for (const auto& e : j["extensions"])
    ext += (ext.empty() ? "" : ", ") + shown(e["name"]) + " (" + std::to_string(e["struct_size"].get<size_t>()) + " B)";
  std::printf("  extensions   %s\n", ext.empty() ? "none" : ext.c_str());
  if (j.contains("client_error")) {
    std::printf("  client       failed: %s\n", shown(j["client_error"]["message"]).c_str());
    return;
  }
  std::printf("  platform     %s (%s)\n", shown(j["platform"]).c_str(), shown(j["platform_version"]).c_str());
  std::printf("  devices      %zu\n", j["devices"].size());
  for (const auto& d : j["devices"])
    std::printf("    #%d %s  %s\n", d["id"].get<int>(), shown(d["kind"]).c_str(), shown(d["description"]).c_str());
  const auto& cb = j["host_callbacks"];
  if (cb["works"].get<bool>())
    std::printf("  callbacks    work (self-test %.1f ms)\n", cb["self_test_ms"].get<double>());
  else
    std::printf("  callbacks    do not work: %s\n", shown(cb["error"]["message"]).c_str());
}

}  // namespace

Command add_plugins_command(CLI::App& app) {
  auto opts = std::make_shared<Options>();
  auto* sub = app.add_subcommand("plugins", "load plugins and show their version, attributes, extensions, devices and whether host callbacks work");
  sub->add_option("paths", opts->paths, "plugin shared libraries")->required();
  sub->add_flag("--json", opts->json, "print JSON");
  return {sub, [opts] {
    bool all_ok = true;
    nlohmann::json reports = nlohmann::json::array();
    for (const auto& path : opts->paths) reports.push_back(inspect(path, all_ok));
    if (opts->json) {
      std::printf("%s\n", json_text(reports, 2).c_str());
    } else {
      for (const auto& r : reports) print_text(r);
    }
    return all_ok ? 0 : 1;
  }};
}

}  // namespace plugboard::cli
