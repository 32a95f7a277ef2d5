#include "runtime/execute_context.h"

#include "abi/api.h"
#include "runtime/client.h"

namespace plugboard {

Expected<ExecuteContext> ExecuteContext::create(const Client& client) {
  const abi::Api& api = client.plugin().api();
  auto args = PB_PJRT_ARGS(PJRT_ExecuteContext_Create_Args);
  if (auto st = PB_PJRT_CALL(api, PJRT_ExecuteContext_Create, args); !st)  // messages built on failure only
    return std::unexpected(std::move(st).error().annotate("creating an execute context on " + client.label()));
  ExecuteContext context;
  context.api_ = &api;
  context.context_ = args.context;
  return context;
}

ExecuteContext& ExecuteContext::operator=(ExecuteContext&& other) noexcept {
  if (this != &other) {
    this->~ExecuteContext();
    api_ = other.api_;
    context_ = other.context_;
    other.context_ = nullptr;
  }
  return *this;
}

ExecuteContext::~ExecuteContext() {
  if (!context_) return;
  auto args = PB_PJRT_ARGS(PJRT_ExecuteContext_Destroy_Args);
  args.context = context_;
  (void)PB_PJRT_CALL(*api_, PJRT_ExecuteContext_Destroy, args);
  context_ = nullptr;
}

}  // namespace plugboard
