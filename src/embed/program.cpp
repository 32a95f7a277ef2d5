// The facade's Program: the runtime's, shared read-only between handles.
#include "base/no_throw.h"
#include "embed/handles.h"

namespace plugboard::api {

Expected<Program> Program::from_bytes(std::string bytes, std::string name) noexcept {
  return no_throw("reading a program", [&]() -> Expected<Program> {
    PB_ASSIGN_OR_RETURN(plugboard::Program p, plugboard::Program::from_bytes(std::move(bytes), std::move(name)));
    return Program(std::make_shared<const Impl>(Impl{std::move(p)}));
  });
}

Expected<Program> Program::from_file(const std::filesystem::path& path) noexcept {
  return no_throw("reading a program", [&]() -> Expected<Program> {
    PB_ASSIGN_OR_RETURN(plugboard::Program p, plugboard::Program::from_file(path));
    return Program(std::make_shared<const Impl>(Impl{std::move(p)}));
  });
}

const std::string& Program::name() const noexcept { return impl_->program.name(); }
bool Program::is_bytecode() const noexcept { return impl_->program.format() == ProgramFormat::kMlirBytecode; }

}  // namespace plugboard::api
