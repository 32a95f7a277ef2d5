// Runtime-internal: compilation and the signature query, shared by client.cpp and executable.cpp.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "abi/api.h"
#include "runtime/compile_options.h"
#include "runtime/executable.h"
#include "runtime/program.h"

namespace plugboard::internal {

Expected<std::shared_ptr<Executable>> compile(std::shared_ptr<const Client> client, const Program& program,
                                              const CompileOptions& options);

// The program as PJRT_Compile and PJRT_Client_Compile take it (format "mlir": text and bytecode
// alike), pointing into `program`.
PJRT_Program pjrt_program_of(const Program& program);

// An executable serialized by the same plugin build (PJRT_Executable_DeserializeAndLoad), loaded on
// `client`. `what` names it in messages ("compile-cache entry ..."). `portable` as it was compiled.
Expected<std::shared_ptr<Executable>> deserialize(std::shared_ptr<const Client> client, std::string_view serialized,
                                                  bool portable, const std::string& what, const Description* known);

// Takes ownership of `loaded` (destroyed on error too) and reads its name and signature, or takes
// them from `known` (a description stored with the serialized executable) without asking the plugin.
Expected<std::shared_ptr<Executable>> adopt_loaded(std::shared_ptr<const Client> client, PJRT_LoadedExecutable* loaded,
                                                   bool portable, const std::string& doing, const Description* known);

// Asks the plugin for the executable's name and signature.
Status describe(const abi::Api& api, Executable& exe, const std::string& doing);

// An owned PJRT_Executable (the unloaded view of a loaded one, or what PJRT_Compile makes).
class UnloadedExecutable {
 public:
  UnloadedExecutable(const abi::Api& api, PJRT_Executable* exe) : api_(&api), exe_(exe) {}
  UnloadedExecutable(UnloadedExecutable&& o) noexcept : api_(o.api_), exe_(std::exchange(o.exe_, nullptr)) {}
  UnloadedExecutable& operator=(UnloadedExecutable&&) = delete;
  UnloadedExecutable(const UnloadedExecutable&) = delete;
  ~UnloadedExecutable();
  PJRT_Executable* get() const { return exe_; }

 private:
  const abi::Api* api_;
  PJRT_Executable* exe_;
};
Expected<UnloadedExecutable> unloaded_executable(const abi::Api& api, PJRT_LoadedExecutable* loaded);

// PJRT_Executable_Serialize: the bytes PJRT_Executable_DeserializeAndLoad takes back.
Expected<std::string> serialize(const abi::Api& api, PJRT_Executable* executable);

// The parameter and result types of a compiled executable, from the plugin's optimized HLO module
// (PJRT_Executable_OptimizedProgram) and PJRT_Executable_Output{ElementTypes,Dimensions}.
Expected<Signature> query_signature(const abi::Api& api, PJRT_Executable* executable);

}  // namespace plugboard::internal
