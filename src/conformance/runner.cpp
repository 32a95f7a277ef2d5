#include "conformance/runner.h"

#include <chrono>

#include "io/npy.h"

namespace plugboard::conformance {

std::string outcome_name(Outcome o) {
  switch (o) {
    case Outcome::kPass: return "pass";
    case Outcome::kFail: return "FAIL";
    case Outcome::kLimitation: return "limitation";
  }
  return "?";
}

std::filesystem::path program_path(const CaseSpec& c, ProgramFormat format) {
  return c.dir / (format == ProgramFormat::kMlirBytecode ? "program.mlirbc" : "program.mlir");
}

namespace {

Expected<io::HostArray> read_array(const CaseSpec& c, const ArraySpec& spec) {
  PB_ASSIGN_OR_RETURN(io::HostArray a, io::read_npy(c.dir / spec.file, spec.dtype));
  if (a.dims != spec.dims)
    return invalid_argument((c.dir / spec.file).string() + " holds " + shape_string(a.dtype, a.dims) +
                            " but case.json says " + shape_string(spec.dtype, spec.dims));
  return a;
}

// Everything that can fail; the reason of a mismatch comes back as an error too.
Status run(const Client& client, const CaseSpec& c, ProgramFormat format, const CompileOptions& options) {
  PB_ASSIGN_OR_RETURN(Program program, Program::from_file(program_path(c, format)));
  PB_ASSIGN_OR_RETURN(auto exe, client.compile(program, options));

  std::vector<Buffer> inputs;
  for (const auto& spec : c.inputs) {
    PB_ASSIGN_OR_RETURN(io::HostArray a, read_array(c, spec));
    PB_ASSIGN_OR_RETURN(Buffer b, client.buffer_from_host(a.data, a.dtype, a.dims));
    inputs.push_back(std::move(b));
  }
  std::vector<Buffer*> args;
  for (auto& b : inputs) args.push_back(&b);
  PB_ASSIGN_OR_RETURN(std::vector<Buffer> outputs, exe->execute(args));

  if (outputs.size() != c.outputs.size())
    return make_error(Code::kFailedPrecondition, "the program produced " + std::to_string(outputs.size()) +
                                                     " outputs, case.json lists " + std::to_string(c.outputs.size()));
  for (size_t i = 0; i < outputs.size(); ++i) {
    PB_ASSIGN_OR_RETURN(io::HostArray expected, read_array(c, c.outputs[i]));
    io::HostArray actual;
    actual.dtype = outputs[i].dtype();
    actual.dims.assign(outputs[i].dims().begin(), outputs[i].dims().end());
    PB_ASSIGN_OR_RETURN(actual.data, outputs[i].to_host());
    CompareResult r = compare_arrays(actual, expected, c.tolerance);
    if (!r.ok) return make_error(Code::kFailedPrecondition, "output " + std::to_string(i) + ": " + r.reason);
  }
  return ok();
}

}  // namespace

CaseResult run_case(const Client& client, const CaseSpec& c, ProgramFormat format, const CompileOptions& options) {
  CaseResult result;
  result.name = c.name;
  result.format = format;
  const auto start = std::chrono::steady_clock::now();
  Status status = run(client, c, format, options);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (status) {
    result.outcome = Outcome::kPass;
    return result;
  }
  result.reason = status.error().to_string();
  result.outcome = Outcome::kFail;
  const std::string plugin_file = client.plugin().path().filename().string();
  for (const auto& l : c.limitations)
    if (l.plugin == plugin_file) {
      result.outcome = Outcome::kLimitation;
      result.reason = l.reason + " (" + result.reason + ")";
    }
  return result;
}

}  // namespace plugboard::conformance
