// One parse function per message: each walks its fields, takes the ones it knows when their wire type
// is the declared one, and leaves the rest (a known number with another wire type is an unknown field
// to protobuf too).
#include "runtime/hlo_module_proto.h"

#include "runtime/protobuf_wire.h"

namespace plugboard::internal {
namespace {

using protobuf_wire::ProtoField;
using protobuf_wire::ProtoReader;
using protobuf_wire::WireType;

bool is(const ProtoField& f, uint32_t number, WireType type) { return f.number == number && f.type == type; }

// The walk every parse below shares: each field of `bytes`, in order, to `take` (a Status: an error
// stops the walk), until the end of the message or a malformed field.
template <typename Take>
Status for_each_field(std::string_view bytes, Take take) {
  ProtoReader reader(bytes);
  ProtoField f;
  for (;;) {
    PB_ASSIGN_OR_RETURN(const bool more, reader.next(f));
    if (!more) return ok();
    PB_RETURN_IF_ERROR(take(f));
  }
}

Status parse_shape(std::string_view bytes, ShapeProto& out, int depth) {
  if (depth > ProtoReader::kMaxDepth)
    return make_error(Code::kDataLoss, "malformed protobuf message: shapes nested past " +
                                           std::to_string(ProtoReader::kMaxDepth) + " levels");
  std::vector<uint64_t> values;
  return for_each_field(bytes, [&](const ProtoField& f) -> Status {
    if (is(f, 2, WireType::kVarint)) {
      out.element_type = static_cast<int32_t>(f.value);
    } else if (f.number == 3 || f.number == 6) {  // repeated int64 / bool, packed or not
      values.clear();
      PB_RETURN_IF_ERROR(protobuf_wire::append_varints(f, values));
      for (uint64_t v : values) {
        if (f.number == 3) out.dimensions.push_back(static_cast<int64_t>(v));
        else out.is_dynamic_dimension.push_back(v != 0);
      }
    } else if (is(f, 4, WireType::kLengthDelimited)) {
      return parse_shape(f.bytes, out.tuple_shapes.emplace_back(), depth + 1);
    }
    return ok();
  });
}

Status parse_program_shape(std::string_view bytes, ProgramShapeProto& out) {
  return for_each_field(bytes, [&](const ProtoField& f) -> Status {
    if (is(f, 1, WireType::kLengthDelimited)) return parse_shape(f.bytes, out.parameters.emplace_back(), 1);
    if (is(f, 2, WireType::kLengthDelimited)) {
      if (!out.result) out.result.emplace();
      return parse_shape(f.bytes, *out.result, 1);
    }
    if (is(f, 3, WireType::kLengthDelimited)) out.parameter_names.emplace_back(f.bytes);
    return ok();
  });
}

Status parse_instruction(std::string_view bytes, HloInstructionProto& out) {
  return for_each_field(bytes, [&](const ProtoField& f) -> Status {
    if (is(f, 2, WireType::kLengthDelimited)) out.opcode = f.bytes;
    else if (is(f, 28, WireType::kLengthDelimited)) out.custom_call_target = f.bytes;
    return ok();
  });
}

Status parse_computation(std::string_view bytes, HloComputationProto& out) {
  return for_each_field(bytes, [&](const ProtoField& f) -> Status {
    if (is(f, 1, WireType::kLengthDelimited)) out.name = f.bytes;
    if (is(f, 2, WireType::kLengthDelimited)) return parse_instruction(f.bytes, out.instructions.emplace_back());
    if (is(f, 4, WireType::kLengthDelimited)) {
      if (!out.program_shape) out.program_shape.emplace();
      return parse_program_shape(f.bytes, *out.program_shape);
    }
    if (is(f, 5, WireType::kVarint)) out.id = static_cast<int64_t>(f.value);
    return ok();
  });
}

Status parse_module(std::string_view bytes, HloModuleProto& out) {
  return for_each_field(bytes, [&](const ProtoField& f) -> Status {
    if (is(f, 1, WireType::kLengthDelimited)) out.name = f.bytes;
    if (is(f, 2, WireType::kLengthDelimited)) out.entry_computation_name = f.bytes;
    if (is(f, 3, WireType::kLengthDelimited)) return parse_computation(f.bytes, out.computations.emplace_back());
    if (is(f, 4, WireType::kLengthDelimited)) {
      if (!out.host_program_shape) out.host_program_shape.emplace();
      return parse_program_shape(f.bytes, *out.host_program_shape);
    }
    if (is(f, 6, WireType::kVarint)) out.entry_computation_id = static_cast<int64_t>(f.value);
    return ok();
  });
}

}  // namespace

Expected<HloModuleProto> parse_hlo_module(std::string_view bytes) {
  HloModuleProto module;
  PB_RETURN_IF_ERROR(parse_module(bytes, module));
  return module;
}

// xla.HloModuleProtoWithConfig: hlo_module = 1 (its config, field 2, is not read).
Expected<HloModuleProto> parse_hlo_module_with_config(std::string_view bytes) {
  HloModuleProto module;
  PB_RETURN_IF_ERROR(for_each_field(bytes, [&](const ProtoField& f) -> Status {
    return is(f, 1, WireType::kLengthDelimited) ? parse_module(f.bytes, module) : ok();
  }));
  return module;
}

}  // namespace plugboard::internal
