#include "bundle/boot.h"

#include "base/no_throw.h"

namespace plugboard::bundle {

BootOptions::BootOptions() { select = select::options_from_environment(); }

Expected<Boot> boot(const BootOptions& options) noexcept {
  return no_throw("boot", [&]() -> Expected<Boot> {
    // A malformed PLUGBOARD_* variable fails the boot itself, before anything is looked at or loaded.
    if (options.select.problem) return std::unexpected(Error(*options.select.problem).annotate("reading the boot settings"));
    PB_ASSIGN_OR_RETURN(Discovery d, discover(options.discovery));
    Boot b;
    b.notes = std::move(d.notes);
    b.selection = select::select_target(d.candidates, options.select);
    return b;
  });
}

}  // namespace plugboard::bundle
