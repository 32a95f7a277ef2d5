// Our protobuf wire format (src/runtime/protobuf_wire.h) and what is written and read with it: the
// compile options byte for byte as protobuf 3.21's generated code wrote them (the bytes are part of
// compile-cache keys, and a plugin parses them), the optimized program's fields through unknown
// fields, groups, packed and unpacked numbers and merged fields, and malformed bytes refused.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/compile_options.h"
#include "runtime/hlo_module_proto.h"
#include "runtime/protobuf_wire.h"
#include "test_env.h"

namespace plugboard {
namespace {

using protobuf_wire::ProtoField;
using protobuf_wire::ProtoReader;
using protobuf_wire::ProtoWriter;
using protobuf_wire::WireType;

// The bytes of a string literal, NULs included.
#define BYTES(literal) std::string(literal, sizeof(literal) - 1)

TEST(ProtobufWire, WritesTheEncodingsProtobufDoes) {
  ProtoWriter w;
  w.add_varint(1, 150);            // the encoding guide's example: 08 96 01
  w.add_int64(2, -1);              // ten bytes
  w.add_bytes(3, "testing");       // 1a 07 ...
  w.add_double(4, 1.5);            // 21, then the IEEE bits little-endian
  w.add_varint(19, 1);             // a two-byte tag: 98 01
  const uint64_t packed[] = {3, 270, 86942};
  w.add_packed_varints(5, packed);  // the guide's packed example: 2a 06 03 8e 02 9e a7 05
  w.add_packed_varints(6, {});      // nothing at all
  EXPECT_EQ(w.bytes(), BYTES("\x08\x96\x01"
                             "\x10\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"
                             "\x1a\x07testing"
                             "\x21\x00\x00\x00\x00\x00\x00\xf8\x3f"
                             "\x98\x01\x01"
                             "\x2a\x06\x03\x8e\x02\x9e\xa7\x05"));
}

TEST(ProtobufWire, ReadsEveryWireTypeAndSkipsGroupsWhole) {
  const std::string message = BYTES("\x08\x96\x01"                      // 1: varint 150
                                    "\x11\x01\x02\x03\x04\x05\x06\x07\x08"  // 2: fixed64
                                    "\x1d\x01\x00\x00\x80"                  // 3: fixed32
                                    "\x23\x08\x01\x2b\x10\x02\x2c\x24"      // 4: a group holding a group
                                    "\x2a\x03" "abc");                         // 5: bytes
  ProtoReader r(message);
  ProtoField f;
  std::vector<uint32_t> numbers;
  ASSERT_TRUE(r.next(f).value());
  EXPECT_EQ(f.number, 1u);
  EXPECT_EQ(f.value, 150u);
  ASSERT_TRUE(r.next(f).value());
  EXPECT_EQ(f.type, WireType::kFixed64);
  EXPECT_EQ(f.value, 0x0807060504030201u);
  ASSERT_TRUE(r.next(f).value());
  EXPECT_EQ(f.type, WireType::kFixed32);
  EXPECT_EQ(f.value, 0x80000001u);
  ASSERT_TRUE(r.next(f).value());  // the group is passed over
  EXPECT_EQ(f.number, 5u);
  EXPECT_EQ(f.bytes, "abc");
  EXPECT_FALSE(r.next(f).value());
}

TEST(ProtobufWire, MalformedMessagesAreDataLoss) {
  const std::vector<std::string> bad = {
      BYTES("\x08"),                                          // a varint cut short
      BYTES("\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"),  // longer than ten bytes
      BYTES("\x0a\x05" "abc"),                                // a length past the end
      BYTES("\x09\x01\x02"),                                  // a fixed64 cut short
      BYTES("\x00\x01"),                                      // field number 0
      BYTES("\x0e"),                                          // wire type 6
      BYTES("\x0c"),                                          // an end of group without its start
      BYTES("\x0b\x08\x01"),                                  // a group that does not end
      BYTES("\x0b\x14"),                                      // a group ended with another number
  };
  for (const std::string& b : bad) {
    ProtoReader r(b);
    ProtoField f;
    Expected<bool> more = true;
    while (more && *more) more = r.next(f);
    ASSERT_FALSE(more) << "accepted " << ::testing::PrintToString(b);
    EXPECT_EQ(more.error().code(), Code::kDataLoss);
  }
  // Groups nested 100 deep (protobuf's limit) are read past; 101 deep are refused as too deep, each
  // one closed (so that nothing but the limit refuses them).
  for (const int depth : {1, 100, 101}) {
    const std::string nested = std::string(depth, '\x0b') + std::string(depth, '\x0c') + BYTES("\x10\x07");
    ProtoReader r(nested);
    ProtoField f;
    Expected<bool> more = r.next(f);
    if (depth <= ProtoReader::kMaxDepth) {
      ASSERT_TRUE(more && *more) << depth << " deep: " << (more ? "no field" : more.error().to_string());
      EXPECT_EQ(f.number, 2u);  // the field after the groups
      EXPECT_EQ(f.value, 7u);
      EXPECT_FALSE(r.next(f).value());
    } else {
      ASSERT_FALSE(more) << depth << " deep: accepted";
      EXPECT_EQ(more.error().code(), Code::kDataLoss);
      EXPECT_NE(more.error().to_string().find("groups nested too deep"), std::string::npos) << more.error().to_string();
    }
  }
  // A packed run cut inside a varint.
  // (The field's bytes are a view: what it views must outlive it, as a reader's data does.)
  std::vector<uint64_t> out;
  const std::string cut = BYTES("\x01\x80");
  ProtoField packed{.number = 3, .type = WireType::kLengthDelimited, .bytes = cut};
  EXPECT_FALSE(protobuf_wire::append_varints(packed, out));
}

// protobuf 3.21's generated code (the xla_subset.proto plugboard used before) wrote these bytes for
// these options; ours must write the same.
TEST(ProtobufWire, CompileOptionsAreTheBytesProtobufWrote) {
  EXPECT_EQ(CompileOptions::plugin_defaults().serialize(), BYTES("\x1a\x04\x20\x01\x28\x01"));
  CompileOptions gspmd;
  gspmd.num_replicas = 2;
  gspmd.num_partitions = 4;
  gspmd.partitioner = Partitioner::kGspmd;
  gspmd.device_ids = {7, 6, 5, 4, 3, 2, 1, 0};
  gspmd.xla_options = {{"a", true}, {"b", false}, {"c", int64_t{0}}, {"d", int64_t{-5}},
                       {"e", 0.0},  {"f", 1.5},   {"g", std::string()}, {"h", std::string("xyz")}};
  EXPECT_EQ(gspmd.serialize(),
            BYTES("\x1a\x27\x20\x02\x28\x04\x30\x01\x4a\x1c\x08\x02\x10\x04\x1a\x04\x0a\x02\x07\x03\x1a\x04\x0a\x02"
                  "\x06\x02\x1a\x04\x0a\x02\x05\x01\x1a\x04\x0a\x02\x04\x00\x62\x01\x01\x3a\x07\x0a\x01\x61\x12\x02"
                  "\x10\x01\x3a\x07\x0a\x01\x62\x12\x02\x10\x00\x3a\x07\x0a\x01\x63\x12\x02\x18\x00\x3a\x10\x0a\x01"
                  "\x64\x12\x0b\x18\xfb\xff\xff\xff\xff\xff\xff\xff\xff\x01\x3a\x0e\x0a\x01\x65\x12\x09\x21\x00\x00"
                  "\x00\x00\x00\x00\x00\x00\x3a\x0e\x0a\x01\x66\x12\x09\x21\x00\x00\x00\x00\x00\x00\xf8\x3f\x3a\x07"
                  "\x0a\x01\x67\x12\x02\x0a\x00\x3a\x0a\x0a\x01\x68\x12\x05\x0a\x03\x78\x79\x7a"));
  CompileOptions shardy = CompileOptions::plugin_defaults();
  shardy.num_partitions = 2;
  shardy.partitioner = Partitioner::kShardy;
  EXPECT_EQ(shardy.serialize(), BYTES("\x1a\x0c\x20\x01\x28\x02\x30\x01\x62\x01\x01\x98\x01\x01"));
  CompileOptions portable = CompileOptions::plugin_defaults();
  portable.portable = true;
  EXPECT_EQ(portable.serialize(), BYTES("\x1a\x04\x20\x01\x28\x01\x20\x01"));
  CompileOptions zero = CompileOptions::plugin_defaults();  // proto3 leaves a 0 out; -1 takes ten bytes
  zero.num_replicas = 0;
  zero.num_partitions = -1;
  EXPECT_EQ(zero.serialize(), BYTES("\x1a\x0b\x28\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"));
}

// A module as XLA writes one, with fields plugboard does not read around the ones it does.
std::string shape(int32_t type, std::vector<int64_t> dims, bool packed, std::vector<std::string> tuple = {},
                  std::vector<uint64_t> dynamic = {}) {
  ProtoWriter s;
  s.add_varint(2, static_cast<uint64_t>(static_cast<int64_t>(type)));
  std::vector<uint64_t> d(dims.begin(), dims.end());
  if (packed) {
    s.add_packed_varints(3, d);
  } else {
    for (uint64_t v : d) s.add_varint(3, v);
  }
  for (const std::string& t : tuple) s.add_bytes(4, t);
  s.add_packed_varints(6, dynamic);
  s.add_bytes(7, "layout, unread");
  return s.bytes();
}

TEST(HloModuleProto, ReadsTheFieldsPlugboardUsesThroughEverythingElse) {
  ProtoWriter program_shape;
  program_shape.add_bytes(1, shape(11, {2, 3}, true));
  program_shape.add_bytes(1, shape(5, {-1, 4}, false));
  program_shape.add_bytes(2, shape(13, {}, true, {shape(11, {8}, true, {}, {1}), shape(1, {}, true)}));
  program_shape.add_bytes(3, "x");
  ProtoWriter custom_call;
  custom_call.add_bytes(1, "cc.1");  // name, unread
  custom_call.add_bytes(2, "custom-call");
  custom_call.add_bytes(28, "my_target");
  ProtoWriter add;
  add.add_bytes(2, "add");
  ProtoWriter computation;
  computation.add_bytes(1, "main");
  computation.add_message(2, custom_call);
  computation.add_message(2, add);
  computation.add_bytes(4, program_shape.bytes());
  computation.add_varint(5, 7);
  computation.add_varint(99, 12345);  // unknown
  ProtoWriter module;
  module.add_bytes(1, "jit_f");
  module.add_bytes(2, "main");
  module.add_message(3, computation);
  module.add_varint(6, 7);
  module.add_bytes(2, "main.2");  // a scalar seen twice: the last wins
  std::string bytes = module.bytes() + BYTES("\x9b\x06\x08\x01\x9c\x06");  // and a group (field 99)

  auto m = internal::parse_hlo_module(bytes);
  PB_ASSERT_OK(m);
  EXPECT_EQ(m->name, "jit_f");
  EXPECT_EQ(m->entry_computation_name, "main.2");
  EXPECT_EQ(m->entry_computation_id, 7);
  EXPECT_FALSE(m->host_program_shape);
  ASSERT_EQ(m->computations.size(), 1u);
  const internal::HloComputationProto& c = m->computations[0];
  EXPECT_EQ(c.name, "main");
  EXPECT_EQ(c.id, 7);
  ASSERT_EQ(c.instructions.size(), 2u);
  EXPECT_EQ(c.instructions[0].opcode, "custom-call");
  EXPECT_EQ(c.instructions[0].custom_call_target, "my_target");
  EXPECT_EQ(c.instructions[1].opcode, "add");
  ASSERT_TRUE(c.program_shape);
  ASSERT_EQ(c.program_shape->parameters.size(), 2u);
  EXPECT_EQ(c.program_shape->parameters[0].element_type, 11);
  EXPECT_EQ(c.program_shape->parameters[0].dimensions, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(c.program_shape->parameters[1].dimensions, (std::vector<int64_t>{-1, 4}));  // unpacked
  ASSERT_TRUE(c.program_shape->result);
  EXPECT_EQ(c.program_shape->result->element_type, 13);
  ASSERT_EQ(c.program_shape->result->tuple_shapes.size(), 2u);
  EXPECT_EQ(c.program_shape->result->tuple_shapes[0].is_dynamic_dimension, std::vector<bool>{true});
  EXPECT_EQ(c.program_shape->parameter_names, std::vector<std::string>{"x"});

  // Inside an HloModuleProtoWithConfig (field 1), with its config (field 2) beside it.
  ProtoWriter with_config;
  with_config.add_bytes(1, bytes);
  with_config.add_bytes(2, "config, unread");
  auto w = internal::parse_hlo_module_with_config(with_config.bytes());
  PB_ASSERT_OK(w);
  EXPECT_EQ(w->entry_computation_name, "main.2");
  EXPECT_EQ(w->computations.at(0).instructions.at(0).custom_call_target, "my_target");
}

TEST(HloModuleProto, ASubMessageSeenTwiceIsMerged) {
  ProtoWriter first, second;
  first.add_bytes(1, shape(11, {2}, true));
  second.add_bytes(1, shape(5, {3}, true));
  second.add_bytes(2, shape(11, {}, true));
  ProtoWriter module;
  module.add_message(4, first);
  module.add_message(4, second);
  auto m = internal::parse_hlo_module(module.bytes());
  PB_ASSERT_OK(m);
  ASSERT_TRUE(m->host_program_shape);
  EXPECT_EQ(m->host_program_shape->parameters.size(), 2u);
  EXPECT_TRUE(m->host_program_shape->result);
}

TEST(HloModuleProto, MalformedOrTooDeepIsDataLoss) {
  // A computation whose length runs past the module.
  auto cut = internal::parse_hlo_module(BYTES("\x1a\x10\x0a\x04main"));
  ASSERT_FALSE(cut);
  EXPECT_EQ(cut.error().code(), Code::kDataLoss);
  // A malformed instruction deep inside.
  ProtoWriter computation;
  computation.add_bytes(2, BYTES("\x12\x09" "add"));
  ProtoWriter module;
  module.add_message(3, computation);
  EXPECT_FALSE(internal::parse_hlo_module(module.bytes()));
  // Tuple shapes nested 101 deep: refused, not a stack overflow.
  std::string nested = shape(11, {}, true);
  for (int i = 0; i < 101; ++i) nested = shape(13, {}, true, {nested});
  ProtoWriter program_shape;
  program_shape.add_bytes(2, nested);
  ProtoWriter deep;
  deep.add_message(4, program_shape);
  auto d = internal::parse_hlo_module(deep.bytes());
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message().find("nested"), std::string::npos) << d.error().to_string();
  // 100 deep is fine.
  nested = shape(11, {}, true);
  for (int i = 0; i < 98; ++i) nested = shape(13, {}, true, {nested});
  ProtoWriter ok_shape;
  ok_shape.add_bytes(2, nested);
  ProtoWriter ok_module;
  ok_module.add_message(4, ok_shape);
  PB_ASSERT_OK(internal::parse_hlo_module(ok_module.bytes()));
}

}  // namespace
}  // namespace plugboard
