// Protocol Buffers' wire format, the part plugboard needs to write an xla.CompileOptionsProto and to
// read what it uses of an xla.HloModuleProto: our own, so that nothing plugboard ships needs
// libprotobuf at run time (and no protobuf of ours can meet a plugin's own).
//
// ProtoWriter appends fields in the order it is given them; the caller applies proto3's rules, as
// protoc's generated code does: fields in field-number order, a scalar at its default (0, false, "")
// left out unless it is a oneof member, repeated numbers packed, a present sub-message written even
// when empty. ProtoReader walks the fields of one message, skipping nothing itself: the caller takes
// the fields it knows (by number and wire type) and ignores the rest, as a parser skips unknown fields.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace plugboard::protobuf_wire {

enum class WireType : uint8_t {
  kVarint = 0,
  kFixed64 = 1,
  kLengthDelimited = 2,
  kStartGroup = 3,  // deprecated groups: read past whole, never written
  kEndGroup = 4,
  kFixed32 = 5,
};

class ProtoWriter {
 public:
  // int64, uint64, bool and enum values; an int32 is passed sign-extended (a negative one takes ten
  // bytes, as protobuf writes it).
  void add_varint(uint32_t field, uint64_t value);
  void add_int64(uint32_t field, int64_t value) { add_varint(field, static_cast<uint64_t>(value)); }
  void add_double(uint32_t field, double value);  // fixed64, the IEEE bits
  void add_bytes(uint32_t field, std::string_view value);  // string and bytes
  void add_message(uint32_t field, const ProtoWriter& message) { add_bytes(field, message.bytes()); }
  // A packed repeated varint field: nothing at all when `values` is empty.
  void add_packed_varints(uint32_t field, std::span<const uint64_t> values);

  const std::string& bytes() const { return out_; }

 private:
  void tag(uint32_t field, WireType type);
  void varint(uint64_t value);

  std::string out_;
};

struct ProtoField {
  uint32_t number = 0;
  WireType type = WireType::kVarint;
  uint64_t value = 0;      // kVarint, kFixed64, kFixed32
  std::string_view bytes;  // kLengthDelimited: a view into the reader's data
};

class ProtoReader {
 public:
  explicit ProtoReader(std::string_view data) : data_(data) {}

  // The next field into `field`: true, or false at the end of the message. A group is read past whole
  // (its fields are not handed out). DATA_LOSS for a malformed message: a varint or fixed value cut
  // short or longer than ten bytes, a length past the end, field number 0, wire type 6 or 7, an end
  // of group without its start, groups nested past kMaxDepth.
  Expected<bool> next(ProtoField& field);

  static constexpr int kMaxDepth = 100;  // protobuf's own default recursion limit

 private:
  Expected<uint64_t> varint();
  Expected<bool> read_field(ProtoField& field);

  std::string_view data_;
  size_t pos_ = 0;
};

// The values of a repeated varint field, packed (length-delimited) or one at a time (a varint),
// appended to `out`. DATA_LOSS for a malformed packed run; a field of another wire type adds nothing
// (a parser takes it for an unknown field).
Status append_varints(const ProtoField& field, std::vector<uint64_t>& out);

}  // namespace plugboard::protobuf_wire
