// Which candidates a boot tries, in which order: the explicit target alone; the preference list in its
// order; or all by priority (highest first, discovery order among equals). Those left out are
// reported as excluded, with the reason.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "select/candidate.h"

namespace plugboard::select {

struct Ordering {
  std::string policy;            // for the report
  std::vector<size_t> to_try;    // indexes into the candidates, in order
  std::vector<std::pair<size_t, std::string>> excluded;  // index, why
  std::optional<Error> problem;  // e.g. the explicit target matches no candidate
};

// A name matches a candidate's target name, or its platform ("cuda" matches "cuda13").
Ordering order_candidates(const std::vector<Candidate>& candidates, const std::optional<std::string>& target,
                          const std::vector<std::string>& preference, const std::string& policy_source);

}  // namespace plugboard::select
