#include "callback/execute.h"

#include "base/no_throw.h"
#include "abi/ffi.h"
#include "callback/execution_state.h"
#include "callback/happens_before.h"
#include "callback/ordered_delivery.h"
#include "callback/plugin_ffi.h"
#include "runtime/client.h"

namespace plugboard {

CallbackExecution::CallbackExecution(CallbackExecution&&) noexcept = default;

CallbackExecution& CallbackExecution::operator=(CallbackExecution&& other) noexcept {
  if (this != &other) {
    if (state_ && !awaited_) (void)await();
    outputs = std::move(other.outputs);
    done_ = std::move(other.done_);
    state_ = std::move(other.state_);
    name_ = std::move(other.name_);
    awaited_ = other.awaited_;
    result_ = std::move(other.result_);
    other.awaited_ = true;
  }
  return *this;
}

CallbackExecution::~CallbackExecution() {
  if (state_ && !awaited_) (void)await();
}

Status CallbackExecution::await() {
  if (result_) return *result_;
  awaited_ = true;
  Status executed = done_.await();
  if (state_) PB_HAPPENS_AFTER(state_.get());
  // Every ordered call of this execution was posted before the plugin's event fired (the handler
  // posts before it returns), so waiting for the latest ticket covers them all.
  if (state_) {
    state_->receiver->delivery().wait_for(state_->last_ticket.load());
    state_->receiver->delivery().end_execution();
  }
  if (!executed) {
    result_ = std::unexpected(std::move(executed).error().annotate("executing " + name_));
  } else if (state_) {
    std::lock_guard lock(state_->mutex);
    if (state_->ordered_error) result_ = std::unexpected(Error(*state_->ordered_error).annotate("executing " + name_));
  }
  if (!result_) result_ = ok();
  return *result_;
}

Status CallbackExecution::wait_executed() const {
  if (result_) return *result_;
  Status executed = done_.await();
  if (state_) PB_HAPPENS_AFTER(state_.get());
  return annotate(std::move(executed), "executing " + name_);
}

uint64_t CallbackExecution::blocking_calls() const { return state_ ? state_->blocking_calls.load() : 0; }
uint64_t CallbackExecution::ordered_calls() const { return state_ ? state_->next_sequence.load() : 0; }

Expected<CallbackExecution> execute_with_callbacks_async(const Executable& executable, std::span<Buffer* const> args,
                                                         std::shared_ptr<const HostCallbacks> callbacks,
                                                         ExecuteOptions options) noexcept {
  return no_throw("executing with host callbacks", [&]() -> Expected<CallbackExecution> {
    // On the execute path: the message is built only when something fails.
    auto doing = [&] { return "executing " + executable.name() + " with host callbacks"; };
    auto failed = [&](Error e) { return std::unexpected(std::move(e).annotate(doing())); };
    if (!callbacks) return invalid_argument(doing() + ": no receiver (HostCallbacks) given");
    if (options.context)
      return invalid_argument(doing() + ": ExecuteOptions.context is set; host callbacks bring their own context");
    const Client& client = *executable.client();
    auto ffi = internal::plugin_ffi(client);
    if (!ffi) return failed(std::move(ffi).error());

    auto state = std::make_shared<internal::ExecutionState>();
    state->receiver = std::move(callbacks);
    state->receiver->freeze();
    state->id = state->receiver->next_execution();
    auto context = ExecuteContext::create(client);
    if (!context) return failed(std::move(context).error());
    state->context = std::move(*context);
    if (auto added = abi::ffi_add_user_data(client.plugin().api(), *(*ffi)->extension, state->context.raw(),
                                            (*ffi)->type_id, state.get());
        !added)
      return failed(std::move(added).error());
    options.context = state->context.raw();

    CallbackExecution run;
    run.name_ = executable.name();
    run.state_ = state;
    state->receiver->delivery().begin_execution();
    auto started = executable.execute_async(args, options);
    if (!started) {
      run.awaited_ = true;
      // Whatever ordered calls it made before failing are still delivered first.
      state->receiver->delivery().wait_for(state->last_ticket.load());
      state->receiver->delivery().end_execution();
      return std::unexpected(std::move(started).error());
    }
    run.outputs = std::move(started->outputs);
    run.done_ = std::move(started->done);
    return run;
  });
}

Expected<std::vector<Buffer>> execute_with_callbacks(const Executable& executable, std::span<Buffer* const> args,
                                                     std::shared_ptr<const HostCallbacks> callbacks,
                                                     ExecuteOptions options) noexcept {
  return no_throw("executing with host callbacks", [&]() -> Expected<std::vector<Buffer>> {
    PB_ASSIGN_OR_RETURN(CallbackExecution run,
                        execute_with_callbacks_async(executable, args, std::move(callbacks), std::move(options)));
    PB_RETURN_IF_ERROR(run.await());
    return std::move(run.outputs);
  });
}

}  // namespace plugboard
