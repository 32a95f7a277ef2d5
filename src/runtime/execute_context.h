// An owned PJRT_ExecuteContext: data that travels with one execution to the plugin's FFI handlers
// (host callbacks attach their per-execution receiver to it). Create one per execution; it must
// outlive the execution it is passed to.
#pragma once

#include <utility>

#include "base/status.h"
#include "runtime/pjrt_handles.h"

namespace plugboard {

namespace abi {
class Api;
}
class Client;

class ExecuteContext {
 public:
  // UNIMPLEMENTED (naming the plugin) when its PJRT_Api has no PJRT_ExecuteContext_Create.
  static Expected<ExecuteContext> create(const Client& client);
  ExecuteContext() = default;
  ExecuteContext(ExecuteContext&& other) noexcept : api_(other.api_), context_(other.context_) { other.context_ = nullptr; }
  ExecuteContext& operator=(ExecuteContext&& other) noexcept;
  ExecuteContext(const ExecuteContext&) = delete;
  ExecuteContext& operator=(const ExecuteContext&) = delete;
  ~ExecuteContext();

  PJRT_ExecuteContext* raw() const { return context_; }
  // Gives up ownership: the caller keeps the context (never destroyed, or destroyed by hand).
  PJRT_ExecuteContext* release() { return std::exchange(context_, nullptr); }

 private:
  const abi::Api* api_ = nullptr;  // plugins are never unloaded
  PJRT_ExecuteContext* context_ = nullptr;
};

}  // namespace plugboard
