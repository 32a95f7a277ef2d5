// Spans that end when a PJRT event fires: an execution's or a copy's time on its device's track,
// from the call that started it until the plugin says it is done (base/trace.h).
#pragma once

#include "base/trace.h"
#include "runtime/event.h"

namespace plugboard {

// Ends `span` on `track` when `event` fires (now, for an empty or fired event), with its outcome
// ("status": "ok" or the error's code), on the thread that fires it. Nothing when the span is not
// recording; an event the plugin cannot continue ends the span now.
void finish_when_ready(const Event& event, trace::Deferred span, trace::Track track) noexcept;

}  // namespace plugboard
