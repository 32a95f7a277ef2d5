// Internal to the facade: what each public handle of plugboard.h holds (the runtime's objects).
#pragma once

#include <memory>
#include <optional>
#include <vector>
#include <string>

#include "callback/execute.h"
#include "callback/host_callbacks.h"
#include "compile_cache/cached_compile.h"
#include "plugboard/plugboard.h"
#include "runtime/buffer.h"
#include "runtime/client.h"
#include "runtime/executable.h"
#include "runtime/program.h"

namespace plugboard::api {

struct Program::Impl {
  plugboard::Program program;
};

struct HostCallbacks::Impl {
  std::shared_ptr<plugboard::HostCallbacks> receiver;
};

struct Buffer::Impl {
  plugboard::Buffer buffer;
};

struct Executable::Impl {
  std::shared_ptr<plugboard::Executable> executable;
  std::string name;
  CompileReport report;
};

struct Execution::Impl {
  std::vector<Buffer> outputs;
  std::shared_ptr<plugboard::Executable> executable;
  std::optional<plugboard::CallbackExecution> with_callbacks;  // or, without callbacks:
  plugboard::Event done;
  std::shared_ptr<plugboard::SpanUntilReady> device_span;  // ended before the outcome is handed on
  std::optional<Status> result;
  bool on_complete_taken = false;
  ~Impl();
};

struct Client::Impl {
  std::shared_ptr<plugboard::Client> client;
  std::string platform, platform_version;
  // The precompiled programs of the bundle target this client was booted from.
  std::vector<compile_cache::PrecompiledFile> precompiled;
};

// Wraps a runtime client (for boot() and Client::open). `self_test`: runs the plugin's host-callback
// self-test now (once per plugin), before the client is handed out and anything runs on it.
std::shared_ptr<const Client> wrap_client(std::shared_ptr<plugboard::Client> client,
                                          std::vector<compile_cache::PrecompiledFile> precompiled = {},
                                          bool self_test = true);
// A facade Buffer owning a runtime one.
Buffer wrap_buffer(plugboard::Buffer buffer);

}  // namespace plugboard::api
