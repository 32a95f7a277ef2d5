#include "runtime/event.h"

#include <memory>

#include "abi/api.h"
#include "base/happens_before.h"
#include "runtime/client.h"

namespace plugboard {

Event::Event(std::shared_ptr<const Client> client, PJRT_Event* event) : event_(event) {
  if (event_) {
    api_ = &client->plugin().api();
    client_ = std::move(client);
  }
}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    reset();
    client_ = std::move(other.client_);
    api_ = other.api_;
    event_ = other.event_;
    other.event_ = nullptr;
  }
  return *this;
}

Event::~Event() { reset(); }

void Event::reset() {
  if (event_) {
    auto args = PB_PJRT_ARGS(PJRT_Event_Destroy_Args);
    args.event = event_;
    (void)PB_PJRT_CALL(*api_, PJRT_Event_Destroy, args);
    event_ = nullptr;
  }
  client_.reset();  // the last reference to the client may go only once its event is gone
}

Status Event::await() const {
  if (!event_) return ok();
  auto args = PB_PJRT_ARGS(PJRT_Event_Await_Args);
  args.event = event_;
  return PB_PJRT_CALL(*api_, PJRT_Event_Await, args);
}

bool Event::is_ready() const {
  if (!event_) return true;
  auto args = PB_PJRT_ARGS(PJRT_Event_IsReady_Args);
  args.event = event_;
  return PB_PJRT_CALL(*api_, PJRT_Event_IsReady, args) && args.is_ready;
}

namespace {
struct Continuation {
  const abi::Api* api;
  std::function<void(Status)> done;
};

void fire(PJRT_Error* error, void* user_arg) {
  PB_HAPPENS_AFTER(user_arg);  // made by the registering thread, run on the plugin's
  std::unique_ptr<Continuation> c(static_cast<Continuation*>(user_arg));
  Status status = error ? Status(std::unexpected(c->api->take_error(error, "PJRT_Event"))) : ok();
  try {
    c->done(std::move(status));
  } catch (...) {
    // Never let an exception unwind into the plugin.
  }
}
}  // namespace

Status Event::on_ready(std::function<void(Status)> done) const {
  if (!event_) {
    done(ok());
    return ok();
  }
  auto c = std::make_unique<Continuation>(Continuation{api_, std::move(done)});
  auto args = PB_PJRT_ARGS(PJRT_Event_OnReady_Args);
  args.event = event_;
  args.callback = &fire;
  args.user_arg = c.get();
  PB_HAPPENS_BEFORE(c.get());
  PB_RETURN_IF_ERROR(PB_PJRT_CALL(*api_, PJRT_Event_OnReady, args));
  c.release();  // owned by the callback now
  return ok();
}

}  // namespace plugboard
