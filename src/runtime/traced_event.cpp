#include "runtime/traced_event.h"

namespace plugboard {

std::string trace_status(const Status& outcome) { return outcome ? std::string("ok") : code_name(outcome.error().code()); }

void SpanUntilReady::finish(const Status& outcome) noexcept {
  int open = kOpen;
  if (!state_.compare_exchange_strong(open, kFinishing, std::memory_order_acq_rel)) {
    state_.wait(kFinishing, std::memory_order_acquire);  // the other thread's record, then done
    return;
  }
  try {
    span_.arg("status", trace_status(outcome));
  } catch (...) {
  }
  span_.finish(track_);
  state_.store(kFinished, std::memory_order_release);
  state_.notify_all();
}

std::shared_ptr<SpanUntilReady> finish_when_ready(const Event& event, trace::Deferred span, trace::Track track) noexcept {
  if (!span) return nullptr;
  std::shared_ptr<SpanUntilReady> held;
  try {
    held = std::make_shared<SpanUntilReady>(std::move(span), track);
    const Status registered = event.on_ready([held](Status s) { held->finish(s); });
    if (!registered) held->finish(ok());  // no continuation: ended now (its outcome unknown)
    return held;
  } catch (...) {
    if (held) held->finish(ok());
    return held;
  }
}

}  // namespace plugboard
