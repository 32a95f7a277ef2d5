#include "callback/execute.h"

#include "abi/ffi.h"
#include "base/no_throw.h"
#include "base/thread_pool.h"
#include "callback/execution_state.h"
#include "base/happens_before.h"
#include "callback/ordered_delivery.h"
#include "callback/plugin_ffi.h"
#include "runtime/client.h"

namespace plugboard {

CallbackExecution::CallbackExecution(CallbackExecution&&) noexcept = default;
CallbackExecution& CallbackExecution::operator=(CallbackExecution&& other) noexcept {
  if (this != &other) {
    // The execution this one held may still be running: it is dropped unfinished, as by the destructor.
    if (state_ && !result_) queue_completion();
    done_ = std::move(other.done_);
    state_ = std::move(other.state_);
    result_ = std::move(other.result_);
    completion_queued_ = std::exchange(other.completion_queued_, false);
    outputs = std::move(other.outputs);
  }
  return *this;
}

CallbackExecution::~CallbackExecution() {
  if (state_ && !result_) queue_completion();
}

Status CallbackExecution::await() {
  if (result_) return *result_;
  if (!state_) return make_error(Code::kFailedPrecondition, "await() on an execution that was moved from");
  // Its completion needs the receiver's queue and a delivery thread: waiting on either would wait for
  // itself.
  if (state_->receiver->delivery().running_here() || delivery_pool().on_worker())
    return make_error(Code::kFailedPrecondition, "await() on " + state_->name +
                                                     " from a host callback or a completion function would wait for "
                                                     "itself: use on_complete there");
  Status executed = done_.await();
  PB_HAPPENS_AFTER(state_.get());
  finish_span(state_->device_span, executed);
  // Every ordered call of this execution was posted before the plugin's event fired (the handler
  // posts before it returns), so waiting for the latest ticket covers them all.
  state_->receiver->delivery().wait_for(state_->last_ticket.load());
  if (completion_queued_) {
    // The queued completion runs on_complete's function: await returns after it, and after that
    // completion let go of the state, so that the last reference is the caller's.
    state_->completed->wait();
    std::lock_guard lock(state_->mutex);
    result_ = *state_->outcome;
    return *result_;
  }
  // Nobody else completes this execution: the outcome is computed here, on the caller's thread.
  Status outcome = state_->outcome_of(std::move(executed));
  std::lock_guard lock(state_->mutex);
  state_->outcome = outcome;
  result_ = std::move(outcome);
  return *result_;
}

Status CallbackExecution::wait_executed() const {
  if (result_) return *result_;
  Status executed = done_.await();
  if (state_) PB_HAPPENS_AFTER(state_.get());
  return annotate(std::move(executed), "executing " + (state_ ? state_->name : std::string("a moved-from execution")));
}

Status CallbackExecution::on_complete(std::function<void(Status)> done) {
  return no_throw("asking for an execution's completion", [&]() -> Status {
    if (!state_) return make_error(Code::kFailedPrecondition, "on_complete on an execution that was moved from");
    if (!done) return invalid_argument("on_complete needs a function");
    std::unique_lock lock(state_->mutex);
    if (state_->on_complete_taken)
      return make_error(Code::kFailedPrecondition, "on_complete was set already for this execution of " + state_->name);
    state_->on_complete_taken = true;
    if (!state_->outcome) {
      state_->on_complete = std::move(done);
      lock.unlock();
      queue_completion();
      return ok();
    }
    Status known = *state_->outcome;
    lock.unlock();
    deliver_on_pool(std::move(done), std::move(known));
    return ok();
  });
}

uint64_t CallbackExecution::blocking_calls() const { return state_ ? state_->blocking_calls.load() : 0; }
uint64_t CallbackExecution::ordered_calls() const { return state_ ? state_->next_sequence.load() : 0; }

namespace {

// From the plugin's event, on its thread (or on the thread that queued the completion, when the
// event had fired already): the completion goes behind the execution's ordered calls in the
// receiver's queue. The queued task takes this thread's reference along, so the plugin's thread
// keeps none once it is queued. Nothing may escape into the plugin: if the task cannot even be made
// or queued, it runs here.
void complete_after_ordered_calls(std::shared_ptr<internal::ExecutionState> state, Status executed) noexcept {
  PB_HAPPENS_AFTER(state.get());
  finish_span(state->device_span, executed);
  const std::shared_ptr<std::latch> completed = state->completed;
  OrderedDelivery& queue = state->receiver->delivery();  // the task keeps the receiver alive
  std::function<void()> task;
  try {
    task = [state, executed]() mutable { internal::ExecutionState::complete(std::move(state), std::move(executed)); };
  } catch (...) {
    internal::ExecutionState::complete(std::move(state), std::move(executed));
    completed->count_down();
    return;
  }
  state.reset();
  try {
    queue.post(std::move(task));
  } catch (...) {
    task();  // `task` was given back
  }
  completed->count_down();
}

}  // namespace

void CallbackExecution::queue_completion() noexcept {
  if (completion_queued_) return;
  completion_queued_ = true;
  bool registered = false;
  try {
    registered = done_.on_ready([state = state_](Status executed) mutable {
                        complete_after_ordered_calls(std::move(state), std::move(executed));
                      }).has_value();
  } catch (...) {
  }
  // No continuation (no memory for it, or the plugin's PJRT_Event_OnReady failed): the program may
  // be running and use the state, so it must not be released now. Waited for here instead: the one
  // case where dropping an execution or asking for on_complete waits.
  if (!registered) complete_after_ordered_calls(state_, done_.await());
}

namespace internal {

void ExecutionState::complete(std::shared_ptr<ExecutionState> self, Status executed) noexcept {
  const std::shared_ptr<std::latch> completed = self->completed;
  std::function<void(Status)> tell;
  Status result = ok();
  try {
    result = self->outcome_of(std::move(executed));
    std::lock_guard lock(self->mutex);
    self->outcome = result;
    tell = std::move(self->on_complete);
  } catch (...) {
    std::lock_guard lock(self->mutex);
    if (!self->outcome) self->outcome = make_error(Code::kResourceExhausted, "completing an execution: out of memory");
  }
  // The caller's function, the release and the count-down on a pool thread: never on the thread that
  // happened to run the queue (a plugin's, an awaiting caller's, or a delivery thread inside the
  // receiver's queue, where the function would hold up the receiver's other calls and see itself
  // as running that queue).
  auto finish = [](std::function<void(Status)>& tell, Status& result, std::shared_ptr<ExecutionState>& s,
                   const std::shared_ptr<std::latch>& done) {
    if (tell) {
      try {
        tell(std::move(result));
      } catch (...) {
        // A caller's function that throws has nobody to throw to on a delivery thread.
      }
    }
    s.reset();
    done->count_down();
  };
  std::function<void()> handoff;
  try {
    handoff = [finish, tell = std::move(tell), result, s = self, completed]() mutable { finish(tell, result, s, completed); };
    self.reset();
    delivery_pool().post(std::move(handoff));
  } catch (...) {
    if (handoff) {
      self.reset();
      handoff();
    } else {
      finish(tell, result, self, completed);
    }
  }
}

}  // namespace internal

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
    state->executable = executable.weak_from_this().lock();
    state->name = executable.name();
    state->id = state->receiver->next_execution();
    auto context = (*ffi)->contexts.acquire(client, *(*ffi)->extension, (*ffi)->type_id);
    if (!context) return failed(std::move(context).error());
    state->context = std::move(*context);
    state->context.slot().state.store(state.get(), std::memory_order_release);
    options.context = state->context.raw();

    CallbackExecution run;
    run.state_ = state;
    PB_HAPPENS_BEFORE(state.get());  // published to the plugin's threads (the FFI handler reads it)
    auto started = executable.execute_async(args, options);
    if (!started) {
      // Whatever ordered calls it made before failing are still delivered first. execute_async
      // returns an error only for an execution that is not running (refused, or failed after its
      // launch and awaited there): the state goes with this function, and nothing is queued.
      state->receiver->delivery().wait_for(state->last_ticket.load());
      run.state_.reset();
      return std::unexpected(std::move(started).error());
    }
    run.outputs = std::move(started->outputs);
    run.done_ = std::move(started->done);
    state->device_span = std::move(started->device_span);
    // The execution holds the state (context, receiver, program). Awaited, it completes on the
    // caller's thread; dropped unfinished or given an on_complete, it queues its completion behind
    // its ordered calls, and the plugin's event keeps the state until it fires.
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
