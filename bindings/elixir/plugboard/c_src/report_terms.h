// The selection report as Elixir structs: %Plugboard.Report{}, %Plugboard.Report.Candidate{},
// %Plugboard.Report.Stage{} (lib/plugboard/report.ex documents the fields).
#pragma once

#include <erl_nif.h>

#include "plugboard/plugboard.h"

namespace plugboard::nif {

ERL_NIF_TERM make_report(ErlNifEnv* env, const api::Report& report);

}  // namespace plugboard::nif
