#include "report_terms.h"

#include "terms.h"

namespace plugboard::nif {
namespace {

ERL_NIF_TERM make_stage(ErlNifEnv* env, const api::StageReport& s) {
  return make_struct(env, "Elixir.Plugboard.Report.Stage",
                     {{"stage", atom(env, s.stage)},
                      {"passed", atom(env, s.passed ? "true" : "false")},
                      {"ms", enif_make_double(env, s.ms)},
                      {"detail", make_string(env, s.detail)}});
}

ERL_NIF_TERM make_candidate(ErlNifEnv* env, const api::CandidateReport& c) {
  std::vector<ERL_NIF_TERM> stages;
  for (const auto& s : c.stages) stages.push_back(make_stage(env, s));
  std::string verdict = c.verdict;
  for (char& ch : verdict)
    if (ch == ' ') ch = '_';  // "not tried" → :not_tried
  return make_struct(env, "Elixir.Plugboard.Report.Candidate",
                     {{"name", make_string(env, c.name)},
                      {"platform", make_string(env, c.platform)},
                      {"source", make_string(env, c.source)},
                      {"origin", c.origin.empty() ? make_nil(env) : atom(env, c.origin)},
                      {"path", make_string(env, c.path.string())},
                      {"verdict", atom(env, verdict)},
                      {"failed_stage", c.failed_stage ? atom(env, *c.failed_stage) : make_nil(env)},
                      {"error", c.error ? make_error_struct(env, *c.error) : make_nil(env)},
                      {"excluded_because", c.excluded_because.empty() ? make_nil(env) : make_string(env, c.excluded_because)},
                      {"isolated", atom(env, c.isolated ? "true" : "false")},
                      {"precompiled_mismatch", c.precompiled_mismatch.empty() ? make_nil(env) : make_string(env, c.precompiled_mismatch)},
                      {"stages", make_list(env, stages)}});
}

}  // namespace

ERL_NIF_TERM make_report(ErlNifEnv* env, const api::Report& report) {
  std::vector<ERL_NIF_TERM> candidates, notes;
  for (const auto& c : report.candidates) candidates.push_back(make_candidate(env, c));
  for (const auto& n : report.notes) notes.push_back(make_string(env, n));
  ERL_NIF_TERM chosen = report.chosen ? make_string(env, report.candidates[*report.chosen].name) : make_nil(env);
  return make_struct(env, "Elixir.Plugboard.Report",
                     {{"policy", make_string(env, report.policy)},
                      {"chosen", chosen},
                      {"candidates", make_list(env, candidates)},
                      {"notes", make_list(env, notes)},
                      {"text", make_string(env, report.text)}});
}

}  // namespace plugboard::nif
