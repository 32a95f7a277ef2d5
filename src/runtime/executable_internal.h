// Runtime-internal: compilation and the signature query, shared by client.cpp and executable.cpp.
#pragma once

#include <memory>

#include "abi/api.h"
#include "runtime/compile_options.h"
#include "runtime/executable.h"
#include "runtime/program.h"

namespace plugboard::internal {

Expected<std::shared_ptr<Executable>> compile(std::shared_ptr<const Client> client, const Program& program,
                                              const CompileOptions& options);

// The parameter and result types of a compiled executable, from the plugin's optimized HLO module
// (PJRT_Executable_OptimizedProgram) and PJRT_Executable_Output{ElementTypes,Dimensions}.
Expected<Signature> query_signature(const abi::Api& api, PJRT_Executable* executable);

}  // namespace plugboard::internal
