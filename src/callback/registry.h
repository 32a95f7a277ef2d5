// Making host callbacks callable on a client's plugin: each plugin carries its own FFI registry, so a
// target name is registered once per plugin (under its platform's FFI platform, platforms/registry.h:
// "Host" on CPU, "CUDA" on the CUDA plugin, with the CUDA device bridge), and
// plugboard's per-execution user-data type once per plugin. Registrations last as long as the plugin,
// which is never unloaded. Thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "callback/host_callbacks.h"
#include "runtime/client.h"

// The XLA FFI's handler type (xla/ffi/api/c_api.h), declared here so that this header needs no FFI
// include path.
extern "C" {
struct XLA_FFI_Error;
struct XLA_FFI_CallFrame;
}

namespace plugboard {

// Registers every name `callbacks` binds as a custom-call target on `client`'s plugin; names already
// registered there by plugboard cost nothing. Must come before compiling the programs that call them
// (the plugin refuses to compile a call to a target it does not know). Fails with the self-test's
// error where host callbacks do not work on the plugin (see self_test_callbacks: a client opened
// through the facade has run it already, at open; on a runtime client no one has, the first use runs
// it, on this client's device 0, after whatever the device has in flight). Errors name the plugin and
// the target.
Status declare_callbacks(const Client& client, const HostCallbacks& callbacks) noexcept;
Status declare_callback_target(const Client& client, std::string_view name);

// Registers `handler`, one of plugboard's own kernels (it runs on the plugin's thread, calls nothing
// back and needs no per-execution data), as target `name` on `client`'s plugin, once per plugin.
Status declare_builtin_target(const Client& client, std::string_view name,
                              XLA_FFI_Error* (*handler)(XLA_FFI_CallFrame*));

// Whether host callbacks work on `client`'s plugin, found by trying: registers a target, compiles and
// runs a program that calls back once, the first time for each plugin, and remembers the outcome. The
// error says why (no FFI extension, a registry that ignored the handler, no device bridge for the
// platform, ...).
Status self_test_callbacks(const Client& client);

// The names registered so far as host-callback targets on `client`'s plugin (by declare_callbacks;
// the self-test's own target left out).
std::vector<std::string> declared_callback_targets(const Client& client);

// The FFI platform name plugboard registers under for this client ("Host", "CUDA"), or an error
// for a platform it has no callback path for.
Expected<std::string> callback_platform(const Client& client);

}  // namespace plugboard
