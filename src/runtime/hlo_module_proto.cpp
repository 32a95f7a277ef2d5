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

Status parse_shape(std::string_view bytes, ShapeProto& out, int depth) {
  if (depth > ProtoReader::kMaxDepth)
    return make_error(Code::kDataLoss, "malformed protobuf message: shapes nested past " +
                                           std::to_string(ProtoReader::kMaxDepth) + " levels");
  ProtoReader reader(bytes);
  ProtoField f;
  std::vector<uint64_t> values;
  for (;;) {
    PB_ASSIGN_OR_RETURN(const bool more, reader.next(f));
    if (!more) return ok();
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
      PB_RETURN_IF_ERROR(parse_shape(f.bytes, out.tuple_shapes.emplace_back(), depth + 1));
    }
  }
}

Status parse_program_shape(std::string_view bytes, ProgramShapeProto& out) {
  ProtoReader reader(bytes);
  ProtoField f;
  for (;;) {
    PB_ASSIGN_OR_RETURN(const bool more, reader.next(f));
    if (!more) return ok();
    if (is(f, 1, WireType::kLengthDelimited)) {
      PB_RETURN_IF_ERROR(parse_shape(f.bytes, out.parameters.emplace_back(), 1));
    } else if (is(f, 2, WireType::kLengthDelimited)) {
      if (!out.result) out.result.emplace();
      PB_RETURN_IF_ERROR(parse_shape(f.bytes, *out.result, 1));
    } else if (is(f, 3, WireType::kLengthDelimited)) {
      out.parameter_names.emplace_back(f.bytes);
    }
  }
}

Status parse_instruction(std::string_view bytes, HloInstructionProto& out) {
  ProtoReader reader(bytes);
  ProtoField f;
  for (;;) {
    PB_ASSIGN_OR_RETURN(const bool more, reader.next(f));
    if (!more) return ok();
    if (is(f, 2, WireType::kLengthDelimited)) out.opcode = f.bytes;
    else if (is(f, 28, WireType::kLengthDelimited)) out.custom_call_target = f.bytes;
  }
}

Status parse_computation(std::string_view bytes, HloComputationProto& out) {
  ProtoReader reader(bytes);
  ProtoField f;
  for (;;) {
    PB_ASSIGN_OR_RETURN(const bool more, reader.next(f));
    if (!more) return ok();
    if (is(f, 1, WireType::kLengthDelimited)) {
      out.name = f.bytes;
    } else if (is(f, 2, WireType::kLengthDelimited)) {
      PB_RETURN_IF_ERROR(parse_instruction(f.bytes, out.instructions.emplace_back()));
    } else if (is(f, 4, WireType::kLengthDelimited)) {
      if (!out.program_shape) out.program_shape.emplace();
      PB_RETURN_IF_ERROR(parse_program_shape(f.bytes, *out.program_shape));
    } else if (is(f, 5, WireType::kVarint)) {
      out.id = static_cast<int64_t>(f.value);
    }
  }
}

Status parse_module(std::string_view bytes, HloModuleProto& out) {
  ProtoReader reader(bytes);
  ProtoField f;
  for (;;) {
    PB_ASSIGN_OR_RETURN(const bool more, reader.next(f));
    if (!more) return ok();
    if (is(f, 1, WireType::kLengthDelimited)) {
      out.name = f.bytes;
    } else if (is(f, 2, WireType::kLengthDelimited)) {
      out.entry_computation_name = f.bytes;
    } else if (is(f, 3, WireType::kLengthDelimited)) {
      PB_RETURN_IF_ERROR(parse_computation(f.bytes, out.computations.emplace_back()));
    } else if (is(f, 4, WireType::kLengthDelimited)) {
      if (!out.host_program_shape) out.host_program_shape.emplace();
      PB_RETURN_IF_ERROR(parse_program_shape(f.bytes, *out.host_program_shape));
    } else if (is(f, 6, WireType::kVarint)) {
      out.entry_computation_id = static_cast<int64_t>(f.value);
    }
  }
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
  ProtoReader reader(bytes);
  ProtoField f;
  for (;;) {
    PB_ASSIGN_OR_RETURN(const bool more, reader.next(f));
    if (!more) return module;
    if (is(f, 1, WireType::kLengthDelimited)) PB_RETURN_IF_ERROR(parse_module(f.bytes, module));
  }
}

}  // namespace plugboard::internal
