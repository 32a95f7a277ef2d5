#include "select/policy.h"

#include <algorithm>
#include <numeric>
#include <set>

namespace plugboard::select {
namespace {

bool matches(const Candidate& c, const std::string& name) { return c.name == name || c.platform == name; }

std::string names(const std::vector<Candidate>& candidates) {
  std::string out;
  for (const auto& c : candidates) out += (out.empty() ? "" : ", ") + c.name;
  return out.empty() ? "none" : out;
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}

}  // namespace

Ordering order_candidates(const std::vector<Candidate>& candidates, const std::optional<std::string>& target,
                          const std::vector<std::string>& preference, const std::string& policy_source) {
  Ordering o;
  const std::string from = policy_source.empty() ? "" : " (" + policy_source + ")";
  std::set<size_t> chosen;
  if (target) {
    o.policy = "explicit target " + *target + from;
    for (size_t i = 0; i < candidates.size(); ++i)
      if (matches(candidates[i], *target)) {
        o.to_try.push_back(i);
        chosen.insert(i);
      }
    if (o.to_try.empty())
      o.problem = Error(Code::kNotFound, "no candidate is named " + *target + from + "; the candidates are: " + names(candidates));
    for (size_t i = 0; i < candidates.size(); ++i)
      if (!chosen.count(i)) o.excluded.push_back({i, "not the explicit target " + *target});
    return o;
  }
  if (!preference.empty()) {
    o.policy = "preference " + join(preference) + from;
    for (const auto& name : preference) {
      std::vector<size_t> group;
      for (size_t i = 0; i < candidates.size(); ++i)
        if (!chosen.count(i) && matches(candidates[i], name)) group.push_back(i);
      std::stable_sort(group.begin(), group.end(),
                       [&](size_t a, size_t b) { return candidates[a].priority > candidates[b].priority; });
      for (size_t i : group) {
        o.to_try.push_back(i);
        chosen.insert(i);
      }
    }
    if (o.to_try.empty())
      o.problem = Error(Code::kNotFound, "no candidate matches the preference " + join(preference) + from +
                                             "; the candidates are: " + names(candidates));
    for (size_t i = 0; i < candidates.size(); ++i)
      if (!chosen.count(i)) o.excluded.push_back({i, "not in the preference " + join(preference)});
    return o;
  }
  o.policy = "priority (accelerators before CPU)";
  o.to_try.resize(candidates.size());
  std::iota(o.to_try.begin(), o.to_try.end(), size_t{0});
  std::stable_sort(o.to_try.begin(), o.to_try.end(),
                   [&](size_t a, size_t b) { return candidates[a].priority > candidates[b].priority; });
  if (o.to_try.empty()) o.problem = Error(Code::kNotFound, "no PJRT plugin was found (no bundle, PLUGBOARD_PLUGIN_PATH or PJRT_NAMES_AND_LIBRARY_PATHS)");
  return o;
}

}  // namespace plugboard::select
