// The facade's Execution: a runtime execution, with or without host callbacks, whose completion can
// be waited for or reported on a delivery thread, and which is never waited for when dropped.
#include "base/no_throw.h"
#include "base/thread_pool.h"
#include "callback/ordered_delivery.h"
#include "embed/handles.h"

namespace plugboard::api {

namespace {
// The program's last reference, if it is the last, is let go of on a delivery thread: never on the
// plugin thread that fires an event (destroying an executable from inside its own completion).
void release_on_delivery_thread(std::shared_ptr<plugboard::Executable> keep) {
  try {
    delivery_pool().post([keep = std::move(keep)]() mutable { keep.reset(); });
  } catch (...) {
  }
}

}  // namespace

bool await_deliveries(std::chrono::milliseconds limit) noexcept {
  try {
    return !delivery_pool().on_worker() && delivery_pool().await_idle(limit);
  } catch (...) {
    return false;
  }
}

Execution::Impl::~Impl() {
  // A plain execution dropped unfinished: the program stays alive until the plugin is done with it.
  // (A callback execution's state does that for itself.)
  if (with_callbacks || result || done.empty() || done.is_ready()) return;
  try {
    (void)done.on_ready([keep = executable](Status) mutable { release_on_delivery_thread(std::move(keep)); });
  } catch (...) {
  }
}

Execution::Execution(std::unique_ptr<Impl> impl) noexcept : impl_(std::move(impl)) {}
Execution::Execution(Execution&&) noexcept = default;
Execution& Execution::operator=(Execution&&) noexcept = default;
Execution::~Execution() = default;

std::vector<Buffer>& Execution::outputs() noexcept {
  static thread_local std::vector<Buffer> none;  // a moved-from execution has no outputs
  return impl_ ? impl_->outputs : none;
}

Status Execution::await() noexcept {
  return no_throw("waiting for an execution", [&]() -> Status {
    if (!impl_) return make_error(Code::kFailedPrecondition, "await() on an execution that was moved from");
    if (impl_->result) return *impl_->result;
    if (impl_->with_callbacks) {
      impl_->result = impl_->with_callbacks->await();
    } else {
      Status executed = impl_->done.await();
      finish_span(impl_->device_span, executed);
      impl_->result = annotate(std::move(executed), "executing " + impl_->executable->name());
    }
    return *impl_->result;
  });
}

Status Execution::on_complete(std::function<void(Status)> done) noexcept {
  return no_throw("asking for an execution's completion", [&]() -> Status {
    if (!impl_) return make_error(Code::kFailedPrecondition, "on_complete on an execution that was moved from");
    if (!done) return invalid_argument("on_complete needs a function");
    if (impl_->with_callbacks) return impl_->with_callbacks->on_complete(std::move(done));
    if (impl_->on_complete_taken)
      return make_error(Code::kFailedPrecondition, "on_complete was set already for this execution of " +
                                                       impl_->executable->name());
    impl_->on_complete_taken = true;
    if (impl_->result) {
      deliver_on_pool(std::move(done), *impl_->result);
      return ok();
    }
    // The event's callback keeps the program alive and hands the outcome to a delivery thread.
    return impl_->done.on_ready([done = std::move(done), keep = impl_->executable, span = impl_->device_span](Status s) mutable {
      finish_span(span, s);
      try {
        deliver_on_pool(std::move(done), annotate(std::move(s), "executing " + keep->name()));
      } catch (...) {
      }
      release_on_delivery_thread(std::move(keep));
    });
  });
}

uint64_t Execution::blocking_calls() const noexcept {
  return impl_ && impl_->with_callbacks ? impl_->with_callbacks->blocking_calls() : 0;
}
uint64_t Execution::ordered_calls() const noexcept {
  return impl_ && impl_->with_callbacks ? impl_->with_callbacks->ordered_calls() : 0;
}

bool Execution::finished() const noexcept {
  if (!impl_) return false;
  if (impl_->result) return true;
  if (impl_->with_callbacks) return false;  // its ordered calls may still be in delivery
  try {
    return impl_->done.empty() || impl_->done.is_ready();
  } catch (...) {
    return false;
  }
}

}  // namespace plugboard::api
