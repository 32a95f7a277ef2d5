// The boot-time entry point, for the CLI and for bindings (the Elixir NIF): discover candidates, choose
// one by the policy in the environment (or the options), start it, and hand back the client with the
// report. Reports are values; nothing here keeps global state beyond the loaded-plugin table.
#pragma once

#include "bundle/discovery.h"
#include "select/select.h"

namespace plugboard::bundle {

struct BootOptions {
  // The selection settings from the environment (in the body: see SelectOptions()).
  BootOptions();
  DiscoveryOptions discovery;
  select::SelectOptions select;
};

struct Boot {
  std::vector<std::string> notes;  // discovery's
  select::Selection selection;
};

// Fails when the settings are malformed (select.problem: a PLUGBOARD_* variable that does not parse,
// named) or discovery itself fails (an explicit bundle that cannot be read or has no targets); a boot
// in which no target starts is a Boot whose selection.status() says why.
Expected<Boot> boot(const BootOptions& options) noexcept;

}  // namespace plugboard::bundle
