#include "runtime/traced_event.h"

#include <memory>
#include <string>

namespace plugboard {

void finish_when_ready(const Event& event, trace::Deferred span, trace::Track track) noexcept {
  if (!span) return;
  try {
    auto held = std::make_shared<trace::Deferred>(std::move(span));  // std::function needs a copyable callable
    const Status registered = event.on_ready([held, track](Status s) {
      held->arg("status", s ? std::string("ok") : code_name(s.error().code()));
      held->finish(track);
    });
    if (!registered) held->finish(track);
  } catch (...) {
  }
}

}  // namespace plugboard
