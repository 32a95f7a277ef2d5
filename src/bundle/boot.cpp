#include "bundle/boot.h"

namespace plugboard::bundle {

Expected<Boot> boot(const BootOptions& options) {
  PB_ASSIGN_OR_RETURN(Discovery d, discover(options.discovery));
  Boot b;
  b.notes = std::move(d.notes);
  b.selection = select::select_target(d.candidates, options.select);
  return b;
}

}  // namespace plugboard::bundle
