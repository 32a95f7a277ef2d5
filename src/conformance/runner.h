// Runs conformance cases on a client: compile the program (text or bytecode), upload the inputs,
// execute, download, and compare with JAX's outputs.
#pragma once

#include <string>
#include <vector>

#include "conformance/case_spec.h"
#include "runtime/client.h"

namespace plugboard::conformance {

enum class Outcome { kPass, kFail, kLimitation };
std::string outcome_name(Outcome o);  // "pass", "FAIL", "limitation"

struct CaseResult {
  std::string name;
  ProgramFormat format = ProgramFormat::kMlirText;
  Outcome outcome = Outcome::kFail;
  std::string reason;  // why it failed (or the limitation's reason); empty on a pass
  double seconds = 0;  // compile + run + compare
};

// The program file of a case in one format: program.mlir or program.mlirbc.
std::filesystem::path program_path(const CaseSpec& c, ProgramFormat format);

CaseResult run_case(const Client& client, const CaseSpec& c, ProgramFormat format,
                    const CompileOptions& options = CompileOptions());

}  // namespace plugboard::conformance
