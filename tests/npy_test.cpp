// .npy reading and writing: the conformance files round-trip byte for byte, every dtype survives a
// write and a read, and each kind of bad file gives an error that names the file and the problem.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <unistd.h>

#include "base/dtype.h"
#include "io/array_format.h"
#include "io/npy.h"

#ifndef PLUGBOARD_CONFORMANCE_DIR
#error "the build must define PLUGBOARD_CONFORMANCE_DIR"
#endif

namespace plugboard::io {
namespace {

namespace fs = std::filesystem;

std::vector<std::byte> to_bytes(std::string_view s) {
  std::vector<std::byte> out(s.size());
  if (!s.empty()) std::memcpy(out.data(), s.data(), s.size());
  return out;
}

std::vector<std::byte> read_raw(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return to_bytes(s);
}

// A .npy file with an arbitrary header dict, laid out like numpy's (for versions 1.0 and 2.0).
std::vector<std::byte> make_npy(std::string dict, std::string_view data, int major = 1) {
  const size_t preamble = major == 1 ? 10 : 12;
  dict.append(64 - (preamble + dict.size() + 1) % 64, ' ');
  dict += '\n';
  std::string file = "\x93NUMPY";
  file += static_cast<char>(major);
  file += '\0';
  for (size_t i = 0; i < preamble - 8; ++i) file += static_cast<char>((dict.size() >> (8 * i)) & 0xFF);
  return to_bytes(file + dict + std::string(data));
}

HostArray make_array(DType dtype, std::vector<int64_t> dims) {
  HostArray a{dtype, std::move(dims), {}};
  a.data.resize(a.byte_size());
  for (size_t i = 0; i < a.data.size(); ++i) a.data[i] = static_cast<std::byte>(i * 37 + 1);
  return a;
}

std::string header_text(const std::vector<std::byte>& file) {
  const size_t hlen = std::to_integer<size_t>(file[8]) | std::to_integer<size_t>(file[9]) << 8;
  return std::string(reinterpret_cast<const char*>(file.data()) + 10, hlen);
}

// Parses bytes that must be rejected and returns the error; the message must name the source.
Error parse_error(const std::vector<std::byte>& bytes, std::optional<DType> expected = std::nullopt) {
  auto result = parse_npy(bytes, "bad/input.npy", expected);
  EXPECT_FALSE(result.has_value());
  if (result) return Error(Code::kOk, "");
  EXPECT_NE(result.error().message().find("bad/input.npy"), std::string::npos) << result.error().message();
  return result.error();
}

const std::string kF32Dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
const std::string k24Bytes(24, '\0');

class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("plugboard_npy_test_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  size_t files_in_dir() const {
    return static_cast<size_t>(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()));
  }
  fs::path dir_;
};

TEST(NpyDescr, MatchesTheConformanceTable) {
  EXPECT_EQ(npy_descr(DType::kBool), "|b1");
  EXPECT_EQ(npy_descr(DType::kI8), "|i1");
  EXPECT_EQ(npy_descr(DType::kI16), "<i2");
  EXPECT_EQ(npy_descr(DType::kI32), "<i4");
  EXPECT_EQ(npy_descr(DType::kI64), "<i8");
  EXPECT_EQ(npy_descr(DType::kU8), "|u1");
  EXPECT_EQ(npy_descr(DType::kU16), "<u2");
  EXPECT_EQ(npy_descr(DType::kU32), "<u4");
  EXPECT_EQ(npy_descr(DType::kU64), "<u8");
  EXPECT_EQ(npy_descr(DType::kF16), "<f2");
  EXPECT_EQ(npy_descr(DType::kBF16), "<u2");
  EXPECT_EQ(npy_descr(DType::kF8E5M2), "|u1");
  EXPECT_EQ(npy_descr(DType::kF8E4M3FN), "|u1");
  EXPECT_EQ(npy_descr(DType::kF32), "<f4");
  EXPECT_EQ(npy_descr(DType::kF64), "<f8");
  EXPECT_EQ(npy_descr(DType::kC64), "<c8");
  EXPECT_EQ(npy_descr(DType::kC128), "<c16");
  EXPECT_EQ(npy_descr(DType::kInvalid), "");
}

TEST(NpyConformance, EveryFileRoundTripsByteForByte) {
  const fs::path cases = fs::path(PLUGBOARD_CONFORMANCE_DIR) / "cases";
  ASSERT_TRUE(fs::is_directory(cases)) << cases;
  size_t files = 0;
  for (const auto& entry : fs::directory_iterator(cases)) {
    const fs::path case_json = entry.path() / "case.json";
    if (!fs::exists(case_json)) continue;
    std::ifstream in(case_json);
    const auto meta = nlohmann::json::parse(in);
    for (const char* list : {"inputs", "outputs"}) {
      for (const auto& spec : meta.at(list)) {
        const fs::path file = entry.path() / spec.at("file").get<std::string>();
        SCOPED_TRACE(file.string());
        const auto dtype = dtype_from_name(spec.at("dtype").get<std::string>());
        ASSERT_TRUE(dtype.has_value());
        const auto original = read_raw(file);
        auto array = read_npy(file, *dtype);
        ASSERT_TRUE(array.has_value()) << array.error().to_string();
        EXPECT_EQ(array->dtype, *dtype);
        EXPECT_EQ(array->dims, spec.at("shape").get<std::vector<int64_t>>());
        EXPECT_EQ(array->data.size(), array->byte_size());
        EXPECT_TRUE(encode_npy(*array) == original) << "encode_npy differs from the stored file";
        ++files;
      }
    }
  }
  EXPECT_GT(files, 200u);  // 48 cases with several files each
}

TEST_F(TempDir, EveryDtypeIsWrittenAndReadBack) {
  for (DType dtype : all_dtypes()) {
    SCOPED_TRACE(dtype_name(dtype));
    const HostArray array = make_array(dtype, {2, 3});
    const fs::path path = dir_ / (dtype_name(dtype) + ".npy");
    ASSERT_TRUE(write_npy(path, array).has_value());
    auto back = read_npy(path, dtype);
    ASSERT_TRUE(back.has_value()) << back.error().to_string();
    EXPECT_EQ(back->dtype, dtype);
    EXPECT_EQ(back->dims, array.dims);
    EXPECT_EQ(back->data, array.data);
    EXPECT_EQ(read_raw(path), encode_npy(array));

    // Without an expected dtype, bf16 and f8 read as the integers they are stored as.
    auto plain = read_npy(path);
    ASSERT_TRUE(plain.has_value());
    const DType storage = dtype == DType::kBF16                                    ? DType::kU16
                          : dtype == DType::kF8E5M2 || dtype == DType::kF8E4M3FN ? DType::kU8
                                                                                    : dtype;
    EXPECT_EQ(plain->dtype, storage);
    EXPECT_EQ(plain->data, array.data);
  }
  EXPECT_EQ(files_in_dir(), all_dtypes().size());  // no temporary files left behind
}

TEST(NpyEncode, HeaderIsNumpysLayout) {
  const auto file = encode_npy(make_array(DType::kF32, {2, 3}));
  const std::string header = header_text(file);
  EXPECT_EQ((10 + header.size()) % 64, 0u);
  EXPECT_EQ(header.substr(0, kF32Dict.size()), kF32Dict);
  EXPECT_EQ(header.back(), '\n');
  EXPECT_EQ(header.find_first_not_of(' ', kF32Dict.size()), header.size() - 1);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(file.data()), 8), std::string("\x93NUMPY\x01\x00", 8));
  EXPECT_EQ(file.size(), 10 + header.size() + 24);

  EXPECT_TRUE(header_text(encode_npy(make_array(DType::kI32, {5}))).starts_with(
      "{'descr': '<i4', 'fortran_order': False, 'shape': (5,), }"));
  EXPECT_TRUE(header_text(encode_npy(make_array(DType::kBool, {}))).starts_with(
      "{'descr': '|b1', 'fortran_order': False, 'shape': (), }"));
  EXPECT_TRUE(header_text(encode_npy(make_array(DType::kC128, {0, 4}))).starts_with(
      "{'descr': '<c16', 'fortran_order': False, 'shape': (0, 4), }"));
}

TEST_F(TempDir, RankZeroAndZeroSize) {
  for (const auto& dims : {std::vector<int64_t>{}, {0}, {2, 0, 3}}) {
    const HostArray array = make_array(DType::kF64, dims);
    EXPECT_EQ(array.data.size(), dims.empty() ? 8u : 0u);
    const fs::path path = dir_ / "a.npy";
    ASSERT_TRUE(write_npy(path, array).has_value());
    auto back = read_npy(path, DType::kF64);
    ASSERT_TRUE(back.has_value()) << back.error().to_string();
    EXPECT_EQ(back->dims, dims);
    EXPECT_EQ(back->data, array.data);
  }
}

TEST(NpyParse, AcceptsAnyKeyOrderAndSpacing) {
  for (const std::string dict : {
           "{'shape': (2, 3), 'fortran_order': False, 'descr': '<f4'}",
           "{ \"descr\" : \"<f4\" , 'shape':(2,3,),'fortran_order':False }",
           "{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }",
       }) {
    SCOPED_TRACE(dict);
    auto array = parse_npy(make_npy(dict, k24Bytes), "x.npy");
    ASSERT_TRUE(array.has_value()) << array.error().to_string();
    EXPECT_EQ(array->dtype, DType::kF32);
    EXPECT_EQ(array->dims, (std::vector<int64_t>{2, 3}));
  }
}

TEST(NpyParse, AcceptsVersion2And3Headers) {
  for (int major : {2, 3}) {
    auto array = parse_npy(make_npy(kF32Dict, k24Bytes, major), "x.npy");
    ASSERT_TRUE(array.has_value()) << array.error().to_string();
    EXPECT_EQ(array->dims, (std::vector<int64_t>{2, 3}));
  }
}

TEST(NpyParse, ExpectedDtypeResolvesRawBits) {
  const auto u2 = make_npy("{'descr': '<u2', 'fortran_order': False, 'shape': (3,), }", std::string(6, '\1'));
  EXPECT_EQ(parse_npy(u2, "x.npy", DType::kBF16)->dtype, DType::kBF16);
  EXPECT_EQ(parse_npy(u2, "x.npy", DType::kU16)->dtype, DType::kU16);
  EXPECT_EQ(parse_npy(u2, "x.npy")->dtype, DType::kU16);
  const auto u1 = make_npy("{'descr': '|u1', 'fortran_order': False, 'shape': (3,), }", "abc");
  EXPECT_EQ(parse_npy(u1, "x.npy", DType::kF8E5M2)->dtype, DType::kF8E5M2);
  EXPECT_EQ(parse_npy(u1, "x.npy", DType::kF8E4M3FN)->dtype, DType::kF8E4M3FN);

  const Error wrong = parse_error(u2, DType::kF8E5M2);
  EXPECT_EQ(wrong.code(), Code::kInvalidArgument);
  EXPECT_NE(wrong.message().find("u16"), std::string::npos) << wrong.message();
  EXPECT_NE(wrong.message().find("f8e5m2"), std::string::npos) << wrong.message();
  const Error f32_as_i32 = parse_error(make_npy(kF32Dict, k24Bytes), DType::kI32);
  EXPECT_NE(f32_as_i32.message().find("'<f4' is f32 but i32 was expected"), std::string::npos) << f32_as_i32.message();
}

TEST(NpyParse, BadMagic) {
  auto bytes = make_npy(kF32Dict, k24Bytes);
  bytes[5] = std::byte{'Z'};
  const Error e = parse_error(bytes);
  EXPECT_EQ(e.code(), Code::kInvalidArgument);
  EXPECT_NE(e.message().find("bad magic"), std::string::npos) << e.message();
  EXPECT_NE(parse_error(to_bytes("PK\3\4 a zip file")).message().find("bad magic"), std::string::npos);
}

TEST(NpyParse, UnsupportedVersion) {
  auto bytes = make_npy(kF32Dict, k24Bytes);
  bytes[6] = std::byte{4};
  const Error e = parse_error(bytes);
  EXPECT_NE(e.message().find("unsupported .npy version 4.0"), std::string::npos) << e.message();
}

TEST(NpyParse, TruncatedHeader) {
  const auto full = make_npy(kF32Dict, k24Bytes);
  for (size_t keep : {0, 7, 9, 40, 127}) {
    SCOPED_TRACE(keep);
    const Error e = parse_error(std::vector<std::byte>(full.begin(), full.begin() + keep));
    EXPECT_EQ(e.code(), Code::kInvalidArgument);
    EXPECT_NE(e.message().find("header truncated"), std::string::npos) << e.message();
  }
}

TEST(NpyParse, TruncatedData) {
  const Error e = parse_error(make_npy(kF32Dict, std::string(23, '\0')));
  EXPECT_EQ(e.code(), Code::kDataLoss);
  EXPECT_NE(e.message().find("expects 24 bytes for f32[2,3], file has 23"), std::string::npos) << e.message();
}

TEST(NpyParse, TrailingBytes) {
  const Error e = parse_error(make_npy(kF32Dict, std::string(25, '\0')));
  EXPECT_EQ(e.code(), Code::kInvalidArgument);
  EXPECT_NE(e.message().find("trailing bytes"), std::string::npos) << e.message();
  EXPECT_NE(e.message().find("expects 24 bytes for f32[2,3], file has 25"), std::string::npos) << e.message();
}

TEST(NpyParse, UnknownDescr) {
  for (const char* descr : {"<V2", "<U4", "|O", "<f16", "<M8", "|S3"}) {
    SCOPED_TRACE(descr);
    const Error e = parse_error(
        make_npy(std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (1,), }", "ab"));
    EXPECT_EQ(e.code(), Code::kInvalidArgument);
    EXPECT_NE(e.message().find(std::string("unsupported descr '") + descr + "'"), std::string::npos) << e.message();
  }
  const Error structured =
      parse_error(make_npy("{'descr': [('x', '<f4')], 'fortran_order': False, 'shape': (1,), }", "abcd"));
  EXPECT_NE(structured.message().find("structured"), std::string::npos) << structured.message();
}

TEST(NpyParse, BigEndian) {
  const Error e = parse_error(make_npy("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", k24Bytes));
  EXPECT_EQ(e.code(), Code::kInvalidArgument);
  EXPECT_NE(e.message().find("big-endian"), std::string::npos) << e.message();
  EXPECT_NE(e.message().find("'>f4'"), std::string::npos) << e.message();
  // Byte order means nothing for one-byte types.
  EXPECT_TRUE(parse_npy(make_npy("{'descr': '>u1', 'fortran_order': False, 'shape': (2,), }", "ab"), "x").has_value());
}

TEST(NpyParse, FortranOrder) {
  const Error e = parse_error(make_npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", k24Bytes));
  EXPECT_EQ(e.code(), Code::kInvalidArgument);
  EXPECT_NE(e.message().find("fortran_order is True"), std::string::npos) << e.message();
}

TEST(NpyParse, MalformedShape) {
  for (const char* shape : {"(2, -3)", "(5)", "[2, 3]", "(2, 'a')", "(99999999999999999999,)", "2"}) {
    SCOPED_TRACE(shape);
    const Error e = parse_error(
        make_npy(std::string("{'descr': '<f4', 'fortran_order': False, 'shape': ") + shape + ", }", ""));
    EXPECT_EQ(e.code(), Code::kInvalidArgument);
    EXPECT_NE(e.message().find("malformed shape"), std::string::npos) << e.message();
  }
  const Error huge = parse_error(make_npy(
      "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }", ""));
  EXPECT_NE(huge.message().find("too many elements"), std::string::npos) << huge.message();
}

TEST(NpyParse, MalformedHeaderDict) {
  struct Case {
    const char* dict;
    const char* says;
  };
  for (const Case& c : {
           Case{"{'descr': '<f4', 'fortran_order': False}", "no 'shape' key"},
           Case{"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': 1}", "unexpected key 'extra'"},
           Case{"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}", "repeats the key 'descr'"},
           Case{"{'descr': '<f4' 'fortran_order': False, 'shape': (1,)}", "malformed header"},
           Case{"{'descr': '<f4, 'fortran_order': False, 'shape': (1,)}", "malformed header"},
           Case{"'descr': '<f4'", "malformed header"},
           Case{"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} junk", "malformed header"},
           Case{"{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}", "fortran_order is 0"},
           Case{"{'descr': '<f4', 'fortran_order': False, 'shape': ((((((((((((((((((((1,),),),),),),),),),),),),),),),),),),),)}",
                "nested too deeply"},
       }) {
    SCOPED_TRACE(c.dict);
    const Error e = parse_error(make_npy(c.dict, "abcd"));
    EXPECT_EQ(e.code(), Code::kInvalidArgument);
    EXPECT_NE(e.message().find(c.says), std::string::npos) << e.message();
  }
}

TEST_F(TempDir, MissingFile) {
  const fs::path path = dir_ / "does_not_exist.npy";
  auto result = read_npy(path);
  ASSERT_FALSE(result.has_value());
  EXPECT_EQ(result.error().code(), Code::kNotFound);
  EXPECT_NE(result.error().message().find(path.string()), std::string::npos) << result.error().message();
}

TEST_F(TempDir, DirectoryIsNotAFile) {
  auto result = read_npy(dir_);
  ASSERT_FALSE(result.has_value());
  EXPECT_NE(result.error().message().find(dir_.string()), std::string::npos) << result.error().message();
}

TEST_F(TempDir, ReadErrorsNameThePath) {
  const fs::path path = dir_ / "short.npy";
  std::ofstream(path, std::ios::binary) << "\x93NUMPY\x01";
  auto result = read_npy(path);
  ASSERT_FALSE(result.has_value());
  EXPECT_NE(result.error().message().find(path.string()), std::string::npos) << result.error().message();
}

TEST_F(TempDir, WriteFailuresLeaveNoFile) {
  const HostArray good = make_array(DType::kI32, {4});
  auto missing_dir = write_npy(dir_ / "no_such_dir" / "a.npy", good);
  ASSERT_FALSE(missing_dir.has_value());
  EXPECT_EQ(missing_dir.error().code(), Code::kNotFound);
  EXPECT_NE(missing_dir.error().message().find("no_such_dir"), std::string::npos);

  HostArray short_data = good;
  short_data.data.pop_back();
  auto bad = write_npy(dir_ / "a.npy", short_data);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code(), Code::kInvalidArgument);
  EXPECT_NE(bad.error().message().find("i32[4] needs 16 bytes"), std::string::npos) << bad.error().message();
  EXPECT_EQ(files_in_dir(), 0u);

  // Overwriting replaces the old file whole.
  ASSERT_TRUE(write_npy(dir_ / "a.npy", make_array(DType::kF64, {100})).has_value());
  ASSERT_TRUE(write_npy(dir_ / "a.npy", good).has_value());
  EXPECT_EQ(read_raw(dir_ / "a.npy"), encode_npy(good));
  EXPECT_EQ(files_in_dir(), 1u);
}

// ---- array_format --------------------------------------------------------------------------------------

template <class T>
HostArray from_values(DType dtype, const std::vector<T>& values) {
  HostArray a{dtype, {static_cast<int64_t>(values.size() * sizeof(T) / dtype_size(dtype))}, {}};
  a.data.resize(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(a.data.data(), values.data(), a.data.size());
  return a;
}

TEST(ArrayFormat, LeadingValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(format_leading_values(from_values<float>(DType::kF32, {1, 2.5, nan, -inf, 0.1f, -0.0f}), 4),
            "[1, 2.5, nan, -inf, ...]");
  EXPECT_EQ(format_leading_values(from_values<float>(DType::kF32, {0.1f, -0.0f, 1e20f})), "[0.1, -0, 1e+20]");
  EXPECT_EQ(format_leading_values(from_values<int32_t>(DType::kI32, {-7, 0, 2147483647})), "[-7, 0, 2147483647]");
  EXPECT_EQ(format_leading_values(from_values<uint64_t>(DType::kU64, {18446744073709551615u})),
            "[18446744073709551615]");
  EXPECT_EQ(format_leading_values(from_values<int8_t>(DType::kI8, {-128, 5})), "[-128, 5]");
  EXPECT_EQ(format_leading_values(from_values<uint8_t>(DType::kBool, {1, 0})), "[true, false]");
  EXPECT_EQ(format_leading_values(from_values<float>(DType::kC64, {1, 2, 1.5, -0.5})), "[1+2j, 1.5-0.5j]");
  EXPECT_EQ(format_leading_values(from_values<uint16_t>(DType::kBF16, {0x3FC0, 0xFF80, 0x7FC1})), "[1.5, -inf, nan]");
  EXPECT_EQ(format_leading_values(from_values<uint16_t>(DType::kF16, {0x7BFF, 0x2E66})), "[65504, 0.099976]");
  EXPECT_EQ(format_leading_values(from_values<uint8_t>(DType::kF8E4M3FN, {0x7E, 0x7F, 0x01})), "[448, nan, 0.00195]");
  EXPECT_EQ(format_leading_values(from_values<uint8_t>(DType::kF8E5M2, {0x7B, 0xFC})), "[57344, -inf]");
  EXPECT_EQ(format_leading_values(HostArray{DType::kF32, {0}, {}}), "[]");
  EXPECT_EQ(format_leading_values(from_values<double>(DType::kF64, {0.1, 1.0 / 3})), "[0.1, 0.3333333333333333]");
}

TEST(ArrayFormat, ElementAccess) {
  const auto c = from_values<double>(DType::kC128, {1, 2, 3, -4});
  EXPECT_EQ(complex_element(c, 1), (std::pair<double, double>{3, -4}));
  EXPECT_EQ(element_as_double(c, 1), 3);
  const auto i = from_values<int16_t>(DType::kI16, {-300});
  EXPECT_EQ(element_as_double(i, 0), -300);
  EXPECT_EQ(complex_element(i, 0), (std::pair<double, double>{-300, 0}));
  EXPECT_TRUE(std::isnan(element_as_double(i, 1)));  // out of range
}

}  // namespace
}  // namespace plugboard::io
