// The wire format as protobuf's encoding guide states it: a tag (field number << 3 | wire type) as a
// varint, then the value: a varint (7 bits a byte, low first, the high bit saying more follow), 8 or
// 4 little-endian bytes, or a varint length and that many bytes.
#include "runtime/protobuf_wire.h"

#include <bit>

namespace plugboard::protobuf_wire {
namespace {

constexpr size_t kMaxVarintBytes = 10;
constexpr uint32_t kMaxFieldNumber = (uint32_t{1} << 29) - 1;

std::unexpected<Error> malformed(const std::string& what) {
  return make_error(Code::kDataLoss, "malformed protobuf message: " + what);
}

// A varint at `pos` in `data`, `pos` moved past it.
Expected<uint64_t> read_varint(std::string_view data, size_t& pos) {
  uint64_t value = 0;
  for (size_t i = 0; i < kMaxVarintBytes; ++i) {
    if (pos >= data.size()) return malformed("a varint runs past the end");
    const auto byte = static_cast<uint8_t>(data[pos++]);
    value |= uint64_t{byte & 0x7fu} << (7 * i);
    if (!(byte & 0x80)) return value;
  }
  return malformed("a varint longer than ten bytes");
}

}  // namespace

void ProtoWriter::varint(uint64_t value) {
  while (value >= 0x80) {
    out_.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out_.push_back(static_cast<char>(value));
}

void ProtoWriter::tag(uint32_t field, WireType type) {
  varint((uint64_t{field} << 3) | static_cast<uint64_t>(type));
}

void ProtoWriter::add_varint(uint32_t field, uint64_t value) {
  tag(field, WireType::kVarint);
  varint(value);
}

void ProtoWriter::add_double(uint32_t field, double value) {
  tag(field, WireType::kFixed64);
  const uint64_t bits = std::bit_cast<uint64_t>(value);
  for (int i = 0; i < 8; ++i) out_.push_back(static_cast<char>(bits >> (8 * i)));
}

void ProtoWriter::add_bytes(uint32_t field, std::string_view value) {
  tag(field, WireType::kLengthDelimited);
  varint(value.size());
  out_.append(value);
}

void ProtoWriter::add_packed_varints(uint32_t field, std::span<const uint64_t> values) {
  if (values.empty()) return;
  ProtoWriter run;
  for (uint64_t v : values) run.varint(v);
  add_bytes(field, run.bytes());
}

Expected<uint64_t> ProtoReader::varint() { return read_varint(data_, pos_); }

// One field, whatever its wire type, groups included (handed out as they come).
Expected<bool> ProtoReader::read_field(ProtoField& field) {
  if (pos_ == data_.size()) return false;
  PB_ASSIGN_OR_RETURN(const uint64_t tag, varint());
  const uint64_t number = tag >> 3;
  if (number == 0 || number > kMaxFieldNumber) return malformed("field number " + std::to_string(number));
  field = ProtoField{};
  field.number = static_cast<uint32_t>(number);
  field.type = static_cast<WireType>(tag & 7);
  switch (field.type) {
    case WireType::kVarint: {
      PB_ASSIGN_OR_RETURN(field.value, varint());
      return true;
    }
    case WireType::kFixed64:
    case WireType::kFixed32: {
      const size_t n = field.type == WireType::kFixed64 ? 8 : 4;
      if (data_.size() - pos_ < n) return malformed("a fixed-size value runs past the end");
      for (size_t i = 0; i < n; ++i) field.value |= uint64_t{static_cast<uint8_t>(data_[pos_ + i])} << (8 * i);
      pos_ += n;
      return true;
    }
    case WireType::kLengthDelimited: {
      PB_ASSIGN_OR_RETURN(const uint64_t length, varint());
      if (length > data_.size() - pos_)
        return malformed("field " + std::to_string(number) + " declares " + std::to_string(length) +
                         " bytes, " + std::to_string(data_.size() - pos_) + " are left");
      field.bytes = data_.substr(pos_, static_cast<size_t>(length));
      pos_ += static_cast<size_t>(length);
      return true;
    }
    case WireType::kStartGroup:
    case WireType::kEndGroup:
      return true;
  }
  return malformed("wire type " + std::to_string(tag & 7));
}

Expected<bool> ProtoReader::next(ProtoField& field) {
  for (;;) {
    PB_ASSIGN_OR_RETURN(const bool more, read_field(field));
    if (!more) return false;
    if (field.type == WireType::kEndGroup) return malformed("an end of group without its start");
    if (field.type != WireType::kStartGroup) return true;
    // A group: read past its fields, nested groups included, to the end of group of the same number.
    std::vector<uint32_t> open = {field.number};
    ProtoField inner;
    while (!open.empty()) {
      PB_ASSIGN_OR_RETURN(const bool any, read_field(inner));
      if (!any) return malformed("a group that does not end");
      if (inner.type == WireType::kStartGroup) {
        if (open.size() >= static_cast<size_t>(kMaxDepth)) return malformed("groups nested too deep");
        open.push_back(inner.number);
      } else if (inner.type == WireType::kEndGroup) {
        if (inner.number != open.back()) return malformed("a group ends with another's number");
        open.pop_back();
      }
    }
  }
}

Status append_varints(const ProtoField& field, std::vector<uint64_t>& out) {
  if (field.type == WireType::kVarint) {
    out.push_back(field.value);
    return ok();
  }
  if (field.type != WireType::kLengthDelimited) return ok();
  for (size_t pos = 0; pos < field.bytes.size();) {
    PB_ASSIGN_OR_RETURN(const uint64_t v, read_varint(field.bytes, pos));
    out.push_back(v);
  }
  return ok();
}

}  // namespace plugboard::protobuf_wire
