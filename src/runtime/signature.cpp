#include <algorithm>
#include <string>

#include "plugin/plugin_output.h"
#include "runtime/executable_internal.h"
#include "runtime/hlo_module_proto.h"

namespace plugboard::internal {
namespace {

// xla.PrimitiveType numbers -> DType (different numbering from PJRT_Buffer_Type).
DType from_primitive_type(int t) {
  switch (t) {
    case 1: return DType::kBool;
    case 2: return DType::kI8;
    case 3: return DType::kI16;
    case 4: return DType::kI32;
    case 5: return DType::kI64;
    case 6: return DType::kU8;
    case 7: return DType::kU16;
    case 8: return DType::kU32;
    case 9: return DType::kU64;
    case 10: return DType::kF16;
    case 11: return DType::kF32;
    case 12: return DType::kF64;
    case 15: return DType::kC64;
    case 16: return DType::kBF16;
    case 18: return DType::kC128;
    case 19: return DType::kF8E5M2;
    case 20: return DType::kF8E4M3FN;
    default: return DType::kInvalid;
  }
}

ArrayType to_array_type(const ShapeProto& s) {
  ArrayType t;
  t.dtype = from_primitive_type(s.element_type);
  t.dims = Dims(std::span<const int64_t>(s.dimensions));
  return t;
}

// What the optimized program says of the entry computation: its parameters' types, and for each result
// whether a dimension of it is dynamic (its buffer's dims are then the sizes of the run).
struct EntryShapes {
  std::vector<ArrayType> parameters;
  std::vector<bool> results_dynamic;
  std::vector<std::string> custom_call_targets;  // of every computation, each once
};

std::vector<std::string> custom_call_targets(const HloModuleProto& m) {
  std::vector<std::string> out;
  for (const auto& c : m.computations)
    for (const auto& instruction : c.instructions)
      if (instruction.opcode == "custom-call" && !instruction.custom_call_target.empty() &&
          std::find(out.begin(), out.end(), instruction.custom_call_target) == out.end())
        out.push_back(instruction.custom_call_target);
  return out;
}

bool any_dynamic(const ShapeProto& s) {
  for (bool d : s.is_dynamic_dimension)
    if (d) return true;
  return false;
}

// host_program_shape, or else the program_shape of the entry computation.
std::optional<EntryShapes> entry_shapes(const HloModuleProto& m) {
  const ProgramShapeProto* shape = nullptr;
  if (m.host_program_shape) shape = &*m.host_program_shape;
  for (const auto& c : m.computations)
    if (!shape && (c.id == m.entry_computation_id || c.name == m.entry_computation_name) && c.program_shape)
      shape = &*c.program_shape;
  if (!shape) return std::nullopt;
  EntryShapes out;
  for (const auto& p : shape->parameters) out.parameters.push_back(to_array_type(p));
  constexpr int kTuple = 13;  // xla.PrimitiveType TUPLE
  static const ShapeProto kNoResult;
  const ShapeProto& result = shape->result ? *shape->result : kNoResult;
  if (result.element_type == kTuple) {
    for (const auto& r : result.tuple_shapes) out.results_dynamic.push_back(any_dynamic(r));
  } else {
    out.results_dynamic.push_back(any_dynamic(result));
  }
  out.custom_call_targets = custom_call_targets(m);
  return out;
}

std::optional<EntryShapes> shapes_from_optimized_program(const abi::Api& api, PJRT_Executable* exe) {
  if (!PB_PJRT_HAS(api, PJRT_Executable_OptimizedProgram)) return std::nullopt;
  // First call: the size; second call: the bytes.
  auto program = PB_PJRT_ARGS(PJRT_Program);
  auto args = PB_PJRT_ARGS(PJRT_Executable_OptimizedProgram_Args);
  args.executable = exe;
  args.program = &program;
  if (!PB_PJRT_CALL(api, PJRT_Executable_OptimizedProgram, args)) return std::nullopt;
  std::string code(program.code_size, '\0');
  program.code = code.data();
  if (!PB_PJRT_CALL(api, PJRT_Executable_OptimizedProgram, args)) return std::nullopt;
  std::string_view format = abi::view(program.format, program.format_size);
  const Expected<HloModuleProto> module =
      format == "hlo_with_config" ? parse_hlo_module_with_config(code) : parse_hlo_module(code);
  if (!module) return std::nullopt;
  return entry_shapes(*module);
}

}  // namespace

Expected<Signature> query_signature(const abi::Api& api, PJRT_Executable* exe) {
  Signature sig;
  std::optional<EntryShapes> entry = shapes_from_optimized_program(api, exe);
  if (entry) {
    sig.parameters_known = true;
    sig.parameters = std::move(entry->parameters);
    sig.custom_call_targets = std::move(entry->custom_call_targets);
  }
  auto num = PB_PJRT_ARGS(PJRT_Executable_NumOutputs_Args);
  num.executable = exe;
  PB_RETURN_IF_ERROR(PB_PJRT_CALL(api, PJRT_Executable_NumOutputs, num));

  auto types = PB_PJRT_ARGS(PJRT_Executable_OutputElementTypes_Args);
  types.executable = exe;
  PB_RETURN_IF_ERROR(PB_PJRT_CALL(api, PJRT_Executable_OutputElementTypes, types));
  auto dims = PB_PJRT_ARGS(PJRT_Executable_OutputDimensions_Args);
  dims.executable = exe;
  PB_RETURN_IF_ERROR(PB_PJRT_CALL(api, PJRT_Executable_OutputDimensions, dims));
  if (types.num_output_types != num.num_outputs || dims.num_outputs != num.num_outputs)
    return make_error(Code::kInternal, "the plugin reports " + std::to_string(num.num_outputs) + " outputs but " +
                                           std::to_string(types.num_output_types) + " output types and " +
                                           std::to_string(dims.num_outputs) + " output shapes");
  // What the plugin hands back is checked before it is read: the lists exist, each rank is sane, and
  // the ranks add up to no more than a bounded total.
  PB_ASSIGN_OR_RETURN(auto type_list, plugin_output::list(api, "PJRT_Executable_OutputElementTypes", "output_types",
                                                          types.output_types, types.num_output_types));
  PB_ASSIGN_OR_RETURN(auto rank_list, plugin_output::list(api, "PJRT_Executable_OutputDimensions", "dim_sizes",
                                                          dims.dim_sizes, dims.num_outputs));
  constexpr size_t kMaxRank = 64;
  size_t total_dims = 0;
  for (size_t i = 0; i < rank_list.size(); ++i) {
    if (rank_list[i] > kMaxRank)
      return std::unexpected(plugin_output::bad_output(api, "PJRT_Executable_OutputDimensions",
                                                       "a rank of " + std::to_string(rank_list[i]) + " for output " +
                                                           std::to_string(i)));
    total_dims += rank_list[i];
  }
  PB_ASSIGN_OR_RETURN(auto dim_list, plugin_output::list(api, "PJRT_Executable_OutputDimensions", "dims", dims.dims,
                                                         total_dims));
  const int64_t* d = dim_list.data();
  for (size_t i = 0; i < num.num_outputs; ++i) {
    ArrayType t;
    const int type = abi::enum_value(type_list[i]);
    t.dtype = abi::from_pjrt(type);
    if (t.dtype == DType::kInvalid)
      return make_error(Code::kUnimplemented, "output " + std::to_string(i) + " has element type " +
                                                  abi::pjrt_type_name(type) +
                                                  ", which plugboard does not handle");
    t.dims = Dims(std::span<const int64_t>(d, rank_list[i]));
    d += rank_list[i];
    sig.results.push_back(std::move(t));
  }
  // Trusted only when the program's results line up with the outputs the plugin reports.
  if (entry && entry->results_dynamic.size() == sig.results.size()) sig.results_dynamic = std::move(entry->results_dynamic);
  return sig;
}

}  // namespace plugboard::internal
