#include "run_counts.h"

#include "nif_functions.h"
#include "terms.h"

namespace plugboard::nif {

RunCounts& run_counts() noexcept {
  static RunCounts counts;  // constant-initialized atomics: never destroyed before a late completion
  return counts;
}

// %{count, errors, total_ns, last_ns, in_flight}: the runs this VM started through the NIF.
PB_NIF(nif_run_counts) {
  (void)argc;
  (void)argv;
  const RunCounts& c = run_counts();
  ERL_NIF_TERM map = enif_make_new_map(env);
  const std::pair<const char*, int64_t> values[] = {
      {"count", static_cast<int64_t>(c.finished.load(std::memory_order_relaxed))},
      {"errors", static_cast<int64_t>(c.errors.load(std::memory_order_relaxed))},
      {"total_ns", c.total_ns.load(std::memory_order_relaxed)},
      {"last_ns", c.last_ns.load(std::memory_order_relaxed)},
      {"in_flight", c.in_flight.load(std::memory_order_relaxed)}};
  for (const auto& [name, value] : values) enif_make_map_put(env, map, atom(env, name), enif_make_int64(env, value), &map);
  return map;
}

}  // namespace plugboard::nif
