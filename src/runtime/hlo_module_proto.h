// What plugboard reads of an optimized program (PJRT_Executable_OptimizedProgram): the fields of
// xla.HloModuleProto (and xla.HloModuleProtoWithConfig around it) that give the entry computation's
// parameter and result shapes and the custom-call targets, with XLA's field numbers, parsed with
// runtime/protobuf_wire.h. Every other field is skipped, as a protobuf parser skips unknown fields; a
// field seen twice is merged as protobuf merges it (the last scalar wins, sub-messages merge, repeated
// fields append).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace plugboard::internal {

// xla.ShapeProto (xla_data.proto); element_type is an xla.PrimitiveType number.
struct ShapeProto {
  int32_t element_type = 0;                // 2
  std::vector<int64_t> dimensions;         // 3
  std::vector<ShapeProto> tuple_shapes;    // 4
  std::vector<bool> is_dynamic_dimension;  // 6
};

// xla.ProgramShapeProto
struct ProgramShapeProto {
  std::vector<ShapeProto> parameters;        // 1
  std::optional<ShapeProto> result;          // 2
  std::vector<std::string> parameter_names;  // 3
};

// xla.HloInstructionProto: only what names a custom call.
struct HloInstructionProto {
  std::string opcode;              // 2
  std::string custom_call_target;  // 28
};

// xla.HloComputationProto
struct HloComputationProto {
  std::string name;                               // 1
  std::vector<HloInstructionProto> instructions;  // 2
  std::optional<ProgramShapeProto> program_shape;  // 4
  int64_t id = 0;                                 // 5
};

// xla.HloModuleProto
struct HloModuleProto {
  std::string name;                                     // 1
  std::string entry_computation_name;                   // 2
  std::vector<HloComputationProto> computations;        // 3
  std::optional<ProgramShapeProto> host_program_shape;  // 4
  int64_t entry_computation_id = 0;                     // 6
};

// The module in `bytes`, a serialized xla.HloModuleProto ("hlo") or xla.HloModuleProtoWithConfig
// ("hlo_with_config", its field 1). DATA_LOSS for malformed bytes or shapes nested past 100 levels.
Expected<HloModuleProto> parse_hlo_module(std::string_view bytes);
Expected<HloModuleProto> parse_hlo_module_with_config(std::string_view bytes);

}  // namespace plugboard::internal
