// An owned PJRT_Event: awaitable, pollable, or continued with a callback on the plugin's thread.
// Like a buffer, an event keeps the client it belongs to alive: awaiting or destroying an execution's
// event after every other reference to the client is gone never reaches a destroyed PJRT_Client.
#pragma once

#include <functional>
#include <memory>

#include "base/status.h"
#include "runtime/pjrt_handles.h"

namespace plugboard {

namespace abi {
class Api;
}
class Client;

class Event {
 public:
  Event() = default;
  // Takes ownership of `event` (may be null: an empty event is ready and OK), which belongs to `client`.
  Event(std::shared_ptr<const Client> client, PJRT_Event* event);
  Event(Event&& other) noexcept
      : client_(std::move(other.client_)), api_(other.api_), event_(other.event_) {
    other.event_ = nullptr;
  }
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event();

  bool empty() const { return event_ == nullptr; }
  // Blocks until the event fires; returns the error it carries, if any.
  Status await() const;
  bool is_ready() const;
  // Calls `done` once the event fires, on whichever thread fires it (possibly this one, now).
  // `done` must not block or call back into PJRT for long: it runs on a plugin thread.
  Status on_ready(std::function<void(Status)> done) const;

  PJRT_Event* raw() const { return event_; }
  // The client the event belongs to (null for an empty event).
  const std::shared_ptr<const Client>& client() const { return client_; }

 private:
  // Destroys the PJRT_Event now, then lets go of the client.
  void reset();

  std::shared_ptr<const Client> client_;  // destroyed after the event (see reset)
  const abi::Api* api_ = nullptr;         // client_->plugin().api(), cached: plugins are never unloaded
  PJRT_Event* event_ = nullptr;
};

}  // namespace plugboard
