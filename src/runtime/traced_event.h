// Spans that end when a PJRT event fires: an execution's or a copy's time on its device's track,
// from the call that started it until the plugin says it is done (base/trace.h).
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "base/status.h"
#include "base/trace.h"
#include "runtime/event.h"

namespace plugboard {

// A span that ends once: when its event fires, or before that when the code handing the event's
// outcome on ends it first. A plugin may run an event's callbacks in any order (XLA runs the last
// registered first), so an execution's outcome could reach its caller, and the caller stop the
// trace, before the span's own callback ran: whoever delivers the outcome ends the span first.
// (Executions only: a copy's span on the device track still ends from its event alone.)
class SpanUntilReady {
 public:
  SpanUntilReady(trace::Deferred span, trace::Track track) : span_(std::move(span)), track_(track) {}
  SpanUntilReady(const SpanUntilReady&) = delete;
  SpanUntilReady& operator=(const SpanUntilReady&) = delete;

  // Ends it with `outcome` (trace_status) and returns once it is recorded: a call that finds another
  // thread ending it waits for that thread to finish recording, so that whoever returns from here
  // may stop the trace and find the span in it. Later calls do nothing.
  void finish(const Status& outcome) noexcept;

 private:
  enum : int { kOpen, kFinishing, kFinished };
  std::atomic<int> state_{kOpen};
  trace::Deferred span_;
  trace::Track track_;
};

// A span's "status" argument: "ok", or the error's code name.
std::string trace_status(const Status& outcome);

// Ends `span` on `track` when `event` fires (now, for an empty or fired event), on the thread that
// fires it, unless the returned handle ended it first. Null (and nothing recorded) when the span is
// not recording; an event the plugin cannot continue ends the span now.
std::shared_ptr<SpanUntilReady> finish_when_ready(const Event& event, trace::Deferred span, trace::Track track) noexcept;

// Ends `span` (null: nothing) with `outcome`, if it has not ended yet.
inline void finish_span(const std::shared_ptr<SpanUntilReady>& span, const Status& outcome) noexcept {
  if (span) span->finish(outcome);
}

}  // namespace plugboard
