// A conformance case as case.json describes it (see tests/conformance/README.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/status.h"
#include "conformance/compare.h"

namespace plugboard::conformance {

struct ArraySpec {
  std::string file;  // relative to the case folder
  DType dtype = DType::kInvalid;
  std::vector<int64_t> dims;
};

// A plugin on which the case is known to fail, written in case.json as
// "limitations": [{"plugin": "<file name of the plugin>", "reason": "..."}]: the runner reports
// such a failure as a limitation instead of a failure, with its reason.
struct Limitation {
  std::string plugin;
  std::string reason;
};

struct CaseSpec {
  std::string name;
  std::filesystem::path dir;
  std::string description;
  std::vector<ArraySpec> inputs;
  std::vector<ArraySpec> outputs;
  Tolerance tolerance;
  std::string notes;
  std::vector<Limitation> limitations;
};

// Reads <dir>/case.json. Errors name the file and the field at fault.
Expected<CaseSpec> load_case(const std::filesystem::path& dir);
// Every case folder (one holding case.json) under `cases_dir`, sorted by name.
Expected<std::vector<CaseSpec>> load_cases(const std::filesystem::path& cases_dir);

}  // namespace plugboard::conformance
