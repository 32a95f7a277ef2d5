#include "callback/registry.h"

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/no_throw.h"
#include "abi/ffi.h"
#include "callback/device_bridge.h"
#include "callback/execute.h"
#include "callback/ffi_dispatch.h"
#include "callback/plugin_ffi.h"
#include "platforms/registry.h"

namespace plugboard {

namespace {

constexpr char kUserDataType[] = "plugboard.ContextSlot.v1";  // what the user data points at
constexpr char kSelfTestTarget[] = "plugboard_self_test";

std::mutex g_mutex;  // guards g_plugins and every PluginFfi in it
// Never destroyed, like the plugins it describes: an execution finishing as the process exits may
// still give its execute context back to a PluginFfi's pool.
auto& g_plugins = *new std::map<const Plugin*, std::unique_ptr<internal::PluginFfi>>();

Status register_target_locked(internal::PluginFfi& ffi, std::string_view name) {
  if (ffi.targets.contains(name)) return ok();
  if (!valid_callback_name(name))
    return invalid_argument("'" + std::string(name) + "' cannot name a host callback target");
  auto slot = std::make_unique<internal::TargetSlot>();
  slot->name = std::string(name);
  slot->plugin = ffi.plugin->path().string();
  slot->type_id = ffi.type_id;
  slot->bridge = ffi.bridge;
  PB_ASSIGN_OR_RETURN(internal::SlotBinding binding, internal::bind_target_slot(std::move(slot)));
  // A refused registration gives the slot back (binding's destructor); an accepted one keeps it for
  // the life of the process, as the plugin keeps the handler.
  PB_RETURN_IF_ERROR(annotate(
      abi::ffi_register_handler(ffi.plugin->api(), *ffi.extension, name, ffi.platform, binding.handler()),
      "registering host callback '" + std::string(name) + "' on platform " + ffi.platform + " of " +
          ffi.plugin->path().string()));
  binding.keep();
  ffi.targets.emplace(name);
  return ok();
}

// A program that is one blocking callback: f32[2] -> f32[2].
constexpr const char* kSelfTestProgram = R"mlir(
module @plugboard_self_test attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<2xf32>) -> tensor<2xf32> {
    %0 = stablehlo.custom_call @plugboard_self_test(%x) {api_version = 4 : i32} : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
}
)mlir";

Status run_self_test(const Client& client) {
  auto receiver = std::make_shared<HostCallbacks>();
  PB_RETURN_IF_ERROR(receiver->add_blocking(kSelfTestTarget, [](const BlockingCall& call) -> Status {
    const TensorView& in = call.operands()[0];
    float v[2];
    std::memcpy(v, in.bytes.data(), sizeof(v));
    v[0] = -v[0] * 2, v[1] = -v[1] * 2;
    return call.set_result(0, TensorView{DType::kF32, in.dims, std::as_bytes(std::span(v))});
  }));
  PB_ASSIGN_OR_RETURN(auto program, Program::from_bytes(kSelfTestProgram, "plugboard_self_test.mlir"));
  PB_ASSIGN_OR_RETURN(auto exe, client.compile(program));
  const float input[2] = {1.5f, -3.0f};
  const int64_t dims[1] = {2};
  PB_ASSIGN_OR_RETURN(Buffer x, client.buffer_from_host(std::as_bytes(std::span(input)), DType::kF32, dims));
  Buffer* args[1] = {&x};
  PB_ASSIGN_OR_RETURN(auto outputs, execute_with_callbacks(*exe, args, receiver));
  PB_ASSIGN_OR_RETURN(auto bytes, outputs.at(0).to_host());
  float got[2];
  if (bytes.size() != sizeof(got)) return make_error(Code::kInternal, "the probe returned the wrong size");
  std::memcpy(got, bytes.data(), sizeof(got));
  if (got[0] != -3.0f || got[1] != 6.0f)
    return make_error(Code::kInternal, "the probe program returned [" + std::to_string(got[0]) + ", " +
                                           std::to_string(got[1]) + "], not [-3, 6]: the callback did not run");
  return ok();
}

// The callback path of `client`'s platform (platforms/registry.h), or an error naming the platforms
// that have one.
Expected<const platforms::CallbackPath*> callback_path(const Client& client) {
  const platforms::PlatformTraits* platform = platforms::platform_for_client(client.platform_name());
  if (platform && platform->callbacks) return &*platform->callbacks;
  std::vector<std::string> served;
  for (const platforms::PlatformTraits& p : platforms::platforms())
    if (p.callbacks) served.push_back(p.name);
  std::string list;
  for (size_t i = 0; i < served.size(); ++i) list += (i == 0 ? "" : i + 1 == served.size() ? " and " : ", ") + served[i];
  return make_error(Code::kUnimplemented, "host callbacks have no path for platform '" + client.platform_name() +
                                              "' of " + client.plugin().path().string() + " (plugboard serves " + list + ")");
}

}  // namespace

Expected<std::string> callback_platform(const Client& client) {
  PB_ASSIGN_OR_RETURN(const platforms::CallbackPath* path, callback_path(client));
  return path->ffi_platform;
}

namespace internal {

Expected<PluginFfi*> plugin_ffi(const Client& client) {
  const Plugin& plugin = client.plugin();
  // Entries are never removed or moved, so the last one this thread found stays valid.
  thread_local const Plugin* last_plugin = nullptr;
  thread_local PluginFfi* last_ffi = nullptr;
  if (last_plugin == &plugin) return last_ffi;
  std::lock_guard lock(g_mutex);
  if (auto it = g_plugins.find(&plugin); it != g_plugins.end()) {
    last_plugin = &plugin;
    last_ffi = it->second.get();
    return last_ffi;
  }
  const std::string doing = "setting up host callbacks on " + plugin.path().string();
  auto ffi = std::make_unique<PluginFfi>();
  ffi->plugin = &plugin;
  PB_ASSIGN_OR_RETURN(const platforms::CallbackPath* path, annotate(callback_path(client), doing));
  ffi->platform = path->ffi_platform;
  if (!PB_PJRT_HAS(plugin.api(), PJRT_ExecuteContext_Create))
    return make_error(Code::kUnimplemented, "plugin " + plugin.path().string() + " (PJRT " +
                                                plugin.version().to_string() +
                                                ") has no PJRT_ExecuteContext_Create: it cannot pass per-execution "
                                                "data to host callbacks");
  PB_ASSIGN_OR_RETURN(ffi->extension, annotate(abi::find_ffi_extension(plugin.api()), doing));
  if (path->bridge) {
    PB_ASSIGN_OR_RETURN(ffi->bridge, annotate(load_device_bridge(ffi->platform, plugin.path()), doing));
    char why[512] = {0};
    if (ffi->bridge->available(why, sizeof(why)) != 0)
      return make_error(Code::kFailedPrecondition, doing + ": the " + ffi->platform + " device bridge cannot run here: " + why);
  }
  PB_ASSIGN_OR_RETURN(ffi->type_id, annotate(abi::ffi_register_type(plugin.api(), *ffi->extension, kUserDataType), doing));
  plugin.require_execute_context();
  PluginFfi* out = ffi.get();
  g_plugins.emplace(&plugin, std::move(ffi));
  return out;
}

}  // namespace internal

Status self_test_callbacks(const Client& client) {
  PB_ASSIGN_OR_RETURN(internal::PluginFfi * ffi, internal::plugin_ffi(client));
  {
    std::lock_guard lock(g_mutex);
    if (ffi->self_test) return *ffi->self_test;
    PB_RETURN_IF_ERROR(register_target_locked(*ffi, kSelfTestTarget));
  }
  // Compiling and running happen outside the lock: the probe's own callback runs on a plugin thread.
  Status result = run_self_test(client);
  if (!result)
    result = std::unexpected(std::move(result).error().annotate("host callbacks do not work on " +
                                                               client.plugin().path().string() + " (self-test)"));
  std::lock_guard lock(g_mutex);
  if (!ffi->self_test) ffi->self_test = result;
  return *ffi->self_test;
}

Status declare_callback_target(const Client& client, std::string_view name) {
  PB_RETURN_IF_ERROR(self_test_callbacks(client));
  PB_ASSIGN_OR_RETURN(internal::PluginFfi * ffi, internal::plugin_ffi(client));
  std::lock_guard lock(g_mutex);
  return register_target_locked(*ffi, name);
}

Status declare_builtin_target(const Client& client, std::string_view name,
                              XLA_FFI_Error* (*handler)(XLA_FFI_CallFrame*)) {
  PB_ASSIGN_OR_RETURN(internal::PluginFfi * ffi, internal::plugin_ffi(client));
  std::lock_guard lock(g_mutex);
  if (ffi->builtins.contains(name)) return ok();
  if (ffi->targets.contains(name))
    return make_error(Code::kAlreadyExists, "'" + std::string(name) + "' is a host callback target on " + ffi->plugin->path().string());
  PB_RETURN_IF_ERROR(annotate(abi::ffi_register_handler(ffi->plugin->api(), *ffi->extension, name, ffi->platform, handler),
                              "registering '" + std::string(name) + "' on platform " + ffi->platform + " of " +
                                  ffi->plugin->path().string()));
  ffi->builtins.emplace(name);
  return ok();
}

Status declare_callbacks(const Client& client, const HostCallbacks& callbacks) noexcept {
  return no_throw("declaring host callbacks", [&]() -> Status {
    for (const std::string& name : callbacks.names()) PB_RETURN_IF_ERROR(declare_callback_target(client, name));
    return ok();
  });
}

std::vector<std::string> declared_callback_targets(const Client& client) {
  std::lock_guard lock(g_mutex);
  std::vector<std::string> out;
  if (auto it = g_plugins.find(&client.plugin()); it != g_plugins.end())
    for (const std::string& name : it->second->targets)
      if (name != kSelfTestTarget) out.push_back(name);
  return out;
}

}  // namespace plugboard
