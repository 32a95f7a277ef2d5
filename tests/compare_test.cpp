// compare_arrays against conformance/README.md, "Comparing outputs", and the exact narrow-float decoders
// it relies on.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "conformance/compare.h"
#include "io/float_decode.h"

namespace plugboard::conformance {
namespace {

using io::HostArray;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// An array of `dtype` whose elements' storage is `values` (raw bits for bf16/f8, pairs for complex).
template <class T>
HostArray make(DType dtype, std::vector<int64_t> dims, const std::vector<T>& values) {
  HostArray a{dtype, std::move(dims), {}};
  a.data.resize(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(a.data.data(), values.data(), a.data.size());  // memcpy(null, ...) is UB
  EXPECT_EQ(a.data.size(), a.byte_size()) << "test array of the wrong size";
  return a;
}
HostArray f32(std::vector<float> v) { return make(DType::kF32, {static_cast<int64_t>(v.size())}, v); }
HostArray f64(std::vector<double> v) { return make(DType::kF64, {static_cast<int64_t>(v.size())}, v); }

bool passes(const HostArray& a, const HostArray& e, Tolerance tol = {}) { return compare_arrays(a, e, tol).ok; }

TEST(CompareFloat, NaNMatchesOnlyNaN) {
  const float quiet = std::numeric_limits<float>::quiet_NaN();
  float other_payload;
  const uint32_t bits = 0xFFC00123u;  // negative NaN with a payload
  std::memcpy(&other_payload, &bits, 4);
  EXPECT_TRUE(passes(f32({quiet}), f32({quiet})));
  EXPECT_TRUE(passes(f32({other_payload}), f32({quiet})));
  EXPECT_FALSE(passes(f32({quiet}), f32({1}), {1e9, 1e9}));
  EXPECT_FALSE(passes(f32({1}), f32({quiet}), {1e9, 1e9}));
}

TEST(CompareFloat, InfinitiesMatchOnlyThemselves) {
  EXPECT_TRUE(passes(f64({kInf, -kInf}), f64({kInf, -kInf})));
  EXPECT_FALSE(passes(f64({-kInf}), f64({kInf}), {1e300, 1e300}));
  EXPECT_FALSE(passes(f64({kInf}), f64({1e308}), {1, kInf}));  // infinite a where e is finite
  EXPECT_FALSE(passes(f64({1e308}), f64({kInf}), {1, kInf}));
  EXPECT_FALSE(passes(f64({kNaN}), f64({kInf})));
}

TEST(CompareFloat, SignedZerosAreEqual) {
  EXPECT_TRUE(passes(f32({-0.0f}), f32({0.0f})));
  EXPECT_TRUE(passes(f32({0.0f}), f32({-0.0f})));
}

TEST(CompareFloat, ToleranceEdges) {
  // Bound atol + rtol*|e| with values exact in binary.
  EXPECT_TRUE(passes(f64({5}), f64({4}), {0.25, 0}));  // |1| <= 0.25*4
  EXPECT_TRUE(passes(f64({3}), f64({4}), {0.25, 0}));
  EXPECT_FALSE(passes(f64({std::nextafter(5.0, 6.0)}), f64({4}), {0.25, 0}));
  EXPECT_TRUE(passes(f64({0.5}), f64({0}), {0, 0.5}));
  EXPECT_TRUE(passes(f64({-0.5}), f64({0}), {0, 0.5}));
  EXPECT_FALSE(passes(f64({std::nextafter(0.5, 1.0)}), f64({0}), {0, 0.5}));
  EXPECT_TRUE(passes(f64({5.5}), f64({4}), {0.25, 0.5}));
  EXPECT_FALSE(passes(f64({std::nextafter(5.5, 6.0)}), f64({4}), {0.25, 0.5}));
  // rtol scales with the expected value, not the actual one.
  EXPECT_FALSE(passes(f64({-4}), f64({-3}), {0.25, 0}));
  EXPECT_TRUE(passes(f64({-3}), f64({-4}), {0.25, 0}));
  // Exact tolerance: one f32 ulp fails.
  EXPECT_FALSE(passes(f32({std::nextafter(1.0f, 2.0f)}), f32({1.0f})));
  EXPECT_TRUE(passes(f32({1.0f, 2.0f}), f32({1.0f, 2.0f})));
}

TEST(CompareFloat, ReasonNamesTheFirstMismatch) {
  const auto expected = make<float>(DType::kF32, {2, 3}, {0, 1, 2, 3, 4, 5});
  const auto actual = make<float>(DType::kF32, {2, 3}, {0, 1, 2, 3, 4.5f, 6});
  const CompareResult r = compare_arrays(actual, expected, {0, 0.1});
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.mismatches, 2u);
  EXPECT_DOUBLE_EQ(r.max_abs_error, 1.0);
  EXPECT_NE(r.reason.find("2 of 6"), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find("flat index 4 [1,1]"), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find("actual 4.5, expected 4"), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find("f32[2,3]"), std::string::npos) << r.reason;

  const CompareResult good = compare_arrays(expected, expected, {});
  EXPECT_TRUE(good.ok);
  EXPECT_EQ(good.mismatches, 0u);
  EXPECT_EQ(good.reason, "");
}

TEST(CompareFloat, RankZero) {
  const auto e = make<float>(DType::kF32, {}, {2});
  const auto a = make<float>(DType::kF32, {}, {3});
  const CompareResult r = compare_arrays(a, e, {});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.reason.find("flat index 0 []"), std::string::npos) << r.reason;
  EXPECT_TRUE(passes(e, e));
}

TEST(CompareStructure, DtypeMismatch) {
  const CompareResult r = compare_arrays(f32({1}), make<uint16_t>(DType::kF16, {1}, {0x3C00}), {1, 1});
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.reason, "dtype f32 vs expected f16");
}

TEST(CompareStructure, ShapeMismatch) {
  const CompareResult r = compare_arrays(f32({1, 2, 3, 4}), make<float>(DType::kF32, {2, 2}, {1, 2, 3, 4}), {});
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.reason, "shape f32[4] vs expected f32[2,2]");
  EXPECT_FALSE(passes(make<float>(DType::kF32, {2, 0}, {}), make<float>(DType::kF32, {0, 2}, {})));
}

TEST(CompareStructure, ZeroSizePasses) {
  EXPECT_TRUE(passes(make<float>(DType::kF32, {0}, {}), make<float>(DType::kF32, {0}, {})));
  EXPECT_TRUE(passes(make<int32_t>(DType::kI32, {3, 0}, {}), make<int32_t>(DType::kI32, {3, 0}, {})));
}

TEST(CompareStructure, DataSizeDisagreeingWithShapeFails) {
  HostArray broken = f32({1, 2});
  broken.data.resize(7);
  const CompareResult r = compare_arrays(broken, f32({1, 2}), {});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.reason.find("actual data is 7 bytes, f32[2] needs 8"), std::string::npos) << r.reason;
}

TEST(CompareInteger, BitwiseEqualityIgnoresTolerance) {
  const auto e = make<int32_t>(DType::kI32, {4}, {1, 2, 5, 4});
  const auto a = make<int32_t>(DType::kI32, {4}, {1, 2, 3, 4});
  const CompareResult r = compare_arrays(a, e, {1, 100});
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.mismatches, 1u);
  EXPECT_NE(r.reason.find("1 of 4"), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find("flat index 2 [2]: actual 3, expected 5"), std::string::npos) << r.reason;
  EXPECT_TRUE(passes(e, e));

  // Beyond 2^53 a double would not see the difference; the bits do.
  const uint64_t big = (uint64_t{1} << 60) + 1;
  EXPECT_FALSE(passes(make<uint64_t>(DType::kU64, {1}, {big}), make<uint64_t>(DType::kU64, {1}, {big - 1})));
  EXPECT_FALSE(passes(make<uint8_t>(DType::kBool, {2}, {1, 0}), make<uint8_t>(DType::kBool, {2}, {1, 1})));
  EXPECT_TRUE(passes(make<int8_t>(DType::kI8, {2}, {-128, 127}), make<int8_t>(DType::kI8, {2}, {-128, 127})));
}

TEST(CompareComplex, PartsAreComparedSeparately) {
  const auto e = make<float>(DType::kC64, {2}, {1, 2, 3, 4});
  EXPECT_TRUE(passes(e, e));
  const CompareResult r = compare_arrays(make<float>(DType::kC64, {2}, {1, 2, 3, 5}), e, {});
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.mismatches, 1u);
  EXPECT_NE(r.reason.find("flat index 1 [1]: actual 3+5j, expected 3+4j"), std::string::npos) << r.reason;
  // Real part within tolerance, imaginary part not.
  EXPECT_FALSE(passes(make<double>(DType::kC128, {1}, {1.05, 10}), make<double>(DType::kC128, {1}, {1, 1}), {0.1, 0}));
  EXPECT_TRUE(passes(make<double>(DType::kC128, {1}, {1.05, 1.05}), make<double>(DType::kC128, {1}, {1, 1}), {0.1, 0}));
  // NaN and inf rules apply per part.
  EXPECT_TRUE(passes(make<double>(DType::kC128, {1}, {kNaN, -kInf}), make<double>(DType::kC128, {1}, {kNaN, -kInf})));
  EXPECT_FALSE(passes(make<double>(DType::kC128, {1}, {1, kNaN}), make<double>(DType::kC128, {1}, {1, 0})));
}

TEST(FloatDecode, SpotValues) {
  EXPECT_EQ(io::decode_f16(0x3C00), 1.0);
  EXPECT_EQ(io::decode_f16(0x7BFF), 65504.0);
  EXPECT_EQ(io::decode_f16(0x0001), std::ldexp(1.0, -24));
  EXPECT_EQ(io::decode_f16(0xFC00), -kInf);
  EXPECT_TRUE(std::isnan(io::decode_f16(0x7E00)));

  EXPECT_EQ(io::decode_bf16(0x3F80), 1.0);
  EXPECT_EQ(io::decode_bf16(0xC000), -2.0);
  EXPECT_EQ(io::decode_bf16(0x0001), std::ldexp(1.0, -133));
  EXPECT_EQ(io::decode_bf16(0x7F80), kInf);
  EXPECT_TRUE(std::isnan(io::decode_bf16(0x7FC0)));

  EXPECT_EQ(io::decode_f8e4m3fn(0x7E), 448.0);
  EXPECT_TRUE(std::isnan(io::decode_f8e4m3fn(0x7F)));
  EXPECT_TRUE(std::isnan(io::decode_f8e4m3fn(0xFF)));
  EXPECT_EQ(io::decode_f8e4m3fn(0x78), 256.0);  // the all-ones exponent is still finite
  EXPECT_EQ(io::decode_f8e4m3fn(0x08), std::ldexp(1.0, -6));
  EXPECT_EQ(io::decode_f8e4m3fn(0x01), std::ldexp(1.0, -9));
  EXPECT_EQ(io::decode_f8e4m3fn(0x38), 1.0);
  EXPECT_EQ(io::decode_f8e4m3fn(0xFE), -448.0);
  EXPECT_TRUE(std::signbit(io::decode_f8e4m3fn(0x80)));
  EXPECT_EQ(io::decode_f8e4m3fn(0x80), 0.0);

  EXPECT_EQ(io::decode_f8e5m2(0x7B), 57344.0);
  EXPECT_EQ(io::decode_f8e5m2(0x7C), kInf);
  EXPECT_EQ(io::decode_f8e5m2(0xFC), -kInf);
  for (uint8_t b : {0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF}) {
    EXPECT_TRUE(std::isnan(io::decode_f8e5m2(b))) << int{b};
  }
  EXPECT_EQ(io::decode_f8e5m2(0x04), std::ldexp(1.0, -14));
  EXPECT_EQ(io::decode_f8e5m2(0x01), std::ldexp(1.0, -16));
  EXPECT_EQ(io::decode_f8e5m2(0x3C), 1.0);
}

TEST(FloatDecode, WholeTables) {
  int e4m3_nans = 0;
  for (int b = 0; b < 256; ++b) {
    // An f8e5m2 byte is the upper byte of the binary16 with the same value.
    const double e5m2 = io::decode_f8e5m2(static_cast<uint8_t>(b));
    const double f16 = io::decode_f16(static_cast<uint16_t>(b << 8));
    EXPECT_TRUE(e5m2 == f16 || (std::isnan(e5m2) && std::isnan(f16))) << b;
    e4m3_nans += std::isnan(io::decode_f8e4m3fn(static_cast<uint8_t>(b)));
  }
  EXPECT_EQ(e4m3_nans, 2);
  for (int b = 0; b < 0x7E; ++b) {  // positive finite f8e4m3fn values increase with their bits
    EXPECT_LT(io::decode_f8e4m3fn(static_cast<uint8_t>(b)), io::decode_f8e4m3fn(static_cast<uint8_t>(b + 1))) << b;
  }
}

// README rule 7: the tolerances at which a one-ulp f8 difference fails or passes.
void check_one_ulp(DType dtype, int last_finite, Tolerance failing, Tolerance passing) {
  for (int b = 0; b < last_finite; ++b) {
    for (auto [x, y] : {std::pair{b, b + 1}, std::pair{b + 1, b}}) {
      SCOPED_TRACE(dtype_name(dtype) + " actual " + std::to_string(x) + " expected " + std::to_string(y));
      const auto a = make<uint8_t>(dtype, {1}, {static_cast<uint8_t>(x)});
      const auto e = make<uint8_t>(dtype, {1}, {static_cast<uint8_t>(y)});
      EXPECT_FALSE(passes(a, e, {}));
      EXPECT_TRUE(passes(a, e, passing));
      if (b > 0) {  // 0 vs the smallest subnormal needs atol
        EXPECT_FALSE(passes(a, e, failing));
      }
    }
  }
}

TEST(CompareF8, OneUlpDifferences) {
  check_one_ulp(DType::kF8E4M3FN, 0x7E, {0.0624, 0}, {0.125, std::ldexp(1.0, -9)});
  check_one_ulp(DType::kF8E5M2, 0x7B, {0.1249, 0}, {0.25, std::ldexp(1.0, -16)});
}

TEST(CompareF8, SignsOfZeroAndNaNMayDiffer) {
  EXPECT_TRUE(passes(make<uint8_t>(DType::kF8E4M3FN, {2}, {0x80, 0xFF}), make<uint8_t>(DType::kF8E4M3FN, {2}, {0x00, 0x7F})));
  EXPECT_TRUE(passes(make<uint8_t>(DType::kF8E5M2, {2}, {0x80, 0xFD}), make<uint8_t>(DType::kF8E5M2, {2}, {0x00, 0x7F})));
  EXPECT_FALSE(passes(make<uint8_t>(DType::kF8E5M2, {1}, {0xFC}), make<uint8_t>(DType::kF8E5M2, {1}, {0x7C})));
  const CompareResult r =
      compare_arrays(make<uint8_t>(DType::kF8E4M3FN, {1}, {0x7D}), make<uint8_t>(DType::kF8E4M3FN, {1}, {0x7E}), {});
  EXPECT_NE(r.reason.find("actual 416, expected 448"), std::string::npos) << r.reason;
}

TEST(CompareBF16, DecodedNotBitwise) {
  const auto one = make<uint16_t>(DType::kBF16, {1}, {0x3F80});
  const auto next = make<uint16_t>(DType::kBF16, {1}, {0x3F81});  // 1 + 2^-7
  EXPECT_FALSE(passes(next, one));
  EXPECT_TRUE(passes(next, one, {std::ldexp(1.0, -7), 0}));
  EXPECT_TRUE(passes(make<uint16_t>(DType::kBF16, {2}, {0x8000, 0xFFC1}), make<uint16_t>(DType::kBF16, {2}, {0x0000, 0x7FC0})));
  const CompareResult r = compare_arrays(make<uint16_t>(DType::kBF16, {1}, {0x4040}), one, {});
  EXPECT_NE(r.reason.find("actual 3, expected 1"), std::string::npos) << r.reason;
}

}  // namespace
}  // namespace plugboard::conformance
