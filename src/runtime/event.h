// An owned PJRT_Event: awaitable, pollable, or continued with a callback on the plugin's thread.
#pragma once

#include <functional>

#include "base/status.h"
#include "runtime/pjrt_handles.h"

namespace plugboard {

namespace abi {
class Api;
}

class Event {
 public:
  Event() = default;
  // Takes ownership of `event` (may be null: an empty event is ready and OK).
  Event(const abi::Api* api, PJRT_Event* event) : api_(api), event_(event) {}
  Event(Event&& other) noexcept : api_(other.api_), event_(other.event_) { other.event_ = nullptr; }
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

 private:
  const abi::Api* api_ = nullptr;  // plugins are never unloaded, so this stays valid
  PJRT_Event* event_ = nullptr;
};

}  // namespace plugboard
