#include "runtime/traced_event.h"

#include <string>

namespace plugboard {

void SpanUntilReady::finish(const Status& outcome) noexcept {
  if (finished_.exchange(true, std::memory_order_acq_rel)) return;
  try {
    span_.arg("status", outcome ? std::string("ok") : code_name(outcome.error().code()));
  } catch (...) {
  }
  span_.finish(track_);
}

std::shared_ptr<SpanUntilReady> finish_when_ready(const Event& event, trace::Deferred span, trace::Track track) noexcept {
  if (!span) return nullptr;
  try {
    auto held = std::make_shared<SpanUntilReady>(std::move(span), track);
    const Status registered = event.on_ready([held](Status s) { held->finish(s); });
    if (!registered) held->finish(registered);
    return held;
  } catch (...) {
    return nullptr;
  }
}

}  // namespace plugboard
