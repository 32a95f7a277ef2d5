// plugboard's LAPACK kernels (src/lapack) as an embedder meets them: Client::declare_lapack, then a
// program calling plugboard_lapack_{s,d}syevd and _{s,d}gesdd through stablehlo.custom_call, on the
// three real CPU plugins; answers against known eigenvalues and singular values, the decompositions'
// residuals and orthogonality, batched, full and reduced, tall and wide; frames with the wrong shapes
// refused with the target named; a plugin without the FFI extension refused at declaration.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "plugboard/plugboard.h"
#include "real_plugins.h"

namespace plugboard::api {
namespace {

using plugboard::testing::cpu_plugins;
using plugboard::testing::RealPlugin;

// Two symmetric 3x3 matrices (eigenvalues 1, 3, 5 and -1, 2, 4): w ascending, v as columns.
constexpr char kEigh[] = R"mlir(
module @lapack_eigh attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%a: tensor<2x3x3xf64>) -> (tensor<2x3xf64>, tensor<2x3x3xf64>) {
    %w, %v = stablehlo.custom_call @plugboard_lapack_dsyevd(%a) {api_version = 4 : i32} : (tensor<2x3x3xf64>) -> (tensor<2x3xf64>, tensor<2x3x3xf64>)
    return %w, %v : tensor<2x3xf64>, tensor<2x3x3xf64>
  }
}
)mlir";

// A 3x2 matrix, full and reduced, and its 2x3 transpose (reduced).
constexpr char kSvd[] = R"mlir(
module @lapack_svd attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%a: tensor<3x2xf32>, %b: tensor<2x3xf32>) -> (tensor<3x3xf32>, tensor<2xf32>, tensor<2x2xf32>, tensor<3x2xf32>, tensor<2xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<2xf32>, tensor<2x3xf32>) {
    %u, %s, %vt = stablehlo.custom_call @plugboard_lapack_sgesdd(%a) {api_version = 4 : i32} : (tensor<3x2xf32>) -> (tensor<3x3xf32>, tensor<2xf32>, tensor<2x2xf32>)
    %ru, %rs, %rvt = stablehlo.custom_call @plugboard_lapack_sgesdd(%a) {api_version = 4 : i32} : (tensor<3x2xf32>) -> (tensor<3x2xf32>, tensor<2xf32>, tensor<2x2xf32>)
    %wu, %ws, %wvt = stablehlo.custom_call @plugboard_lapack_sgesdd(%b) {api_version = 4 : i32} : (tensor<2x3xf32>) -> (tensor<2x2xf32>, tensor<2xf32>, tensor<2x3xf32>)
    return %u, %s, %vt, %ru, %rs, %rvt, %wu, %ws, %wvt : tensor<3x3xf32>, tensor<2xf32>, tensor<2x2xf32>, tensor<3x2xf32>, tensor<2xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<2xf32>, tensor<2x3xf32>
  }
}
)mlir";

// w declared with 2 values for a 3x3 matrix.
constexpr char kWrongShape[] = R"mlir(
module @lapack_wrong attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%a: tensor<3x3xf64>) -> (tensor<2xf64>, tensor<3x3xf64>) {
    %w, %v = stablehlo.custom_call @plugboard_lapack_dsyevd(%a) {api_version = 4 : i32} : (tensor<3x3xf64>) -> (tensor<2xf64>, tensor<3x3xf64>)
    return %w, %v : tensor<2xf64>, tensor<3x3xf64>
  }
}
)mlir";

template <class T>
std::vector<T> values(const Buffer& b) {
  std::vector<T> out(b.byte_size() / sizeof(T));
  EXPECT_TRUE(b.to_host(std::as_writable_bytes(std::span(out))));
  return out;
}

// Row-major r x c matrices.
template <class T>
std::vector<double> matmul(const std::vector<T>& x, const std::vector<T>& y, int r, int k, int c) {
  std::vector<double> z(r * c, 0.0);
  for (int i = 0; i < r; ++i)
    for (int j = 0; j < c; ++j)
      for (int l = 0; l < k; ++l) z[i * c + j] += double(x[i * k + l]) * double(y[l * c + j]);
  return z;
}

template <class T>
std::vector<T> transpose(const std::vector<T>& x, int r, int c) {
  std::vector<T> t(r * c);
  for (int i = 0; i < r; ++i)
    for (int j = 0; j < c; ++j) t[j * r + i] = x[i * c + j];
  return t;
}

double max_diff(const std::vector<double>& x, const std::vector<double>& y) {
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

std::vector<double> identity(int n) {
  std::vector<double> e(n * n, 0.0);
  for (int i = 0; i < n; ++i) e[i * n + i] = 1;
  return e;
}

class LapackTest : public ::testing::TestWithParam<RealPlugin> {
 protected:
  void SetUp() override {
    auto opened = Client::open(GetParam().path);
    ASSERT_TRUE(opened) << opened.error().to_string();
    client_ = *opened;
    auto declared = client_->declare_lapack();
    ASSERT_TRUE(declared) << declared.error().to_string();
  }

  Executable compile(const char* text) {
    auto program = Program::from_bytes(text, "lapack_test.mlir");
    EXPECT_TRUE(program) << program.error().to_string();
    auto exe = client_->compile(*program);
    EXPECT_TRUE(exe) << exe.error().to_string();
    return std::move(*exe);
  }

  std::shared_ptr<const Client> client_;
};

TEST_P(LapackTest, DeclaringTwiceCostsNothing) { EXPECT_TRUE(client_->declare_lapack()); }

TEST_P(LapackTest, SyevdGivesAscendingEigenvaluesAndOrthonormalEigenvectorsForEachMatrix) {
  const std::vector<double> a = {2, 1, 0, 1, 2, 0, 0, 0, 5,  // 1, 3, 5
                                 4, 0, 0, 0, -1, 0, 0, 0, 2};  // -1, 2, 4
  const int64_t dims[] = {2, 3, 3};
  auto in = client_->copy_to_device(std::as_bytes(std::span(a)), DType::kF64, dims);
  ASSERT_TRUE(in) << in.error().to_string();
  Executable exe = compile(kEigh);
  Buffer* args[] = {&*in};
  auto run = exe.execute(args);
  ASSERT_TRUE(run) << run.error().to_string();
  ASSERT_TRUE(run->await());
  const auto w = values<double>(run->outputs()[0]);
  const auto v = values<double>(run->outputs()[1]);
  const std::vector<std::vector<double>> expected = {{1, 3, 5}, {-1, 2, 4}};
  for (int b = 0; b < 2; ++b) {
    const std::vector<double> ab(a.begin() + 9 * b, a.begin() + 9 * b + 9), vb(v.begin() + 9 * b, v.begin() + 9 * b + 9);
    for (int i = 0; i < 3; ++i) EXPECT_NEAR(w[3 * b + i], expected[b][i], 1e-14);
    // A·V = V·diag(w); VᵀV = I.
    auto av = matmul(ab, vb, 3, 3, 3);
    std::vector<double> vw(9);
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) vw[i * 3 + j] = vb[i * 3 + j] * w[3 * b + j];
    EXPECT_LT(max_diff(av, vw), 1e-14);
    EXPECT_LT(max_diff(matmul(transpose(vb, 3, 3), vb, 3, 3, 3), identity(3)), 1e-15);
  }
}

TEST_P(LapackTest, GesddGivesFullAndReducedFactorsOfTallAndWideMatrices) {
  const std::vector<float> a = {1, 2, 3, 4, 5, 6};  // 3x2; σ = 9.52551809, 0.51430058
  const std::vector<float> b = transpose(a, 3, 2);   // 2x3
  const int64_t a_dims[] = {3, 2}, b_dims[] = {2, 3};
  auto x = client_->copy_to_device(std::as_bytes(std::span(a)), DType::kF32, a_dims);
  auto y = client_->copy_to_device(std::as_bytes(std::span(b)), DType::kF32, b_dims);
  ASSERT_TRUE(x && y);
  Executable exe = compile(kSvd);
  Buffer* args[] = {&*x, &*y};
  auto run = exe.execute(args);
  ASSERT_TRUE(run) << run.error().to_string();
  ASSERT_TRUE(run->await());
  const auto& out = run->outputs();
  // {u, s, vt, m, ucols, vrows, n, the matrix}
  struct Case {
    int u, s, vt, m, ucols, vrows, n;
    const std::vector<float>& a;
  } cases[] = {{0, 1, 2, 3, 3, 2, 2, a}, {3, 4, 5, 3, 2, 2, 2, a}, {6, 7, 8, 2, 2, 2, 3, b}};
  for (const Case& c : cases) {
    const auto u = values<float>(out[c.u]), s = values<float>(out[c.s]), vt = values<float>(out[c.vt]);
    ASSERT_EQ(u.size(), size_t(c.m * c.ucols));
    ASSERT_EQ(vt.size(), size_t(c.vrows * c.n));
    EXPECT_NEAR(s[0], 9.52551809f, 1e-5f);
    EXPECT_NEAR(s[1], 0.51430058f, 1e-5f);
    // U[:, :2]·diag(s)·Vt[:2, :] = A; the columns of U and the rows of Vt orthonormal.
    std::vector<float> us(c.m * 2), vt2(vt.begin(), vt.begin() + 2 * c.n);
    for (int i = 0; i < c.m; ++i)
      for (int j = 0; j < 2; ++j) us[i * 2 + j] = u[i * c.ucols + j] * s[j];
    std::vector<double> ad(c.a.begin(), c.a.end());
    EXPECT_LT(max_diff(matmul(us, vt2, c.m, 2, c.n), ad), 1e-5);
    EXPECT_LT(max_diff(matmul(transpose(u, c.m, c.ucols), u, c.ucols, c.m, c.ucols), identity(c.ucols)), 1e-6);
    EXPECT_LT(max_diff(matmul(vt, transpose(vt, c.vrows, c.n), c.vrows, c.n, c.vrows), identity(c.vrows)), 1e-6);
  }
}

// LAPACK's gesdd refuses a matrix holding a NaN (info -4: "LAPACK refused argument 4" failed the
// run); the in-program route answers NaN, and so must these kernels, for that matrix of the batch only.
TEST_P(LapackTest, AMatrixHoldingANaNOrAnInfinityGivesNaNResultsAndTheOthersOfTheBatchTheirAnswers) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const std::vector<double> a = {2, 1, 0, 1, 2, 0, 0, 0, 5,       // 1, 3, 5
                                 4, 0, 0, 0, -1, nan, 0, 0, 2};   // a NaN
  const int64_t dims[] = {2, 3, 3};
  auto in = client_->copy_to_device(std::as_bytes(std::span(a)), DType::kF64, dims);
  ASSERT_TRUE(in) << in.error().to_string();
  Executable eigh = compile(kEigh);
  Buffer* eigh_args[] = {&*in};
  auto run = eigh.execute(eigh_args);
  ASSERT_TRUE(run) << run.error().to_string();
  Status done = run->await();
  ASSERT_TRUE(done) << done.error().to_string();
  const auto w = values<double>(run->outputs()[0]);
  const auto v = values<double>(run->outputs()[1]);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(w[i], 1.0 + 2 * i, 1e-14);
  for (int i = 3; i < 6; ++i) EXPECT_TRUE(std::isnan(w[i])) << i;
  for (int i = 9; i < 18; ++i) EXPECT_TRUE(std::isnan(v[i])) << i;

  for (float bad : {float(nan), float(inf)}) {
    const std::vector<float> x = {1, 2, 3, bad, 5, 6};  // 3x2
    const std::vector<float> y = {1, 3, 5, 2, 4, 6};    // 2x3, finite
    const int64_t x_dims[] = {3, 2}, y_dims[] = {2, 3};
    auto bx = client_->copy_to_device(std::as_bytes(std::span(x)), DType::kF32, x_dims);
    auto by = client_->copy_to_device(std::as_bytes(std::span(y)), DType::kF32, y_dims);
    ASSERT_TRUE(bx && by);
    Executable svd = compile(kSvd);
    Buffer* svd_args[] = {&*bx, &*by};
    auto svd_run = svd.execute(svd_args);
    ASSERT_TRUE(svd_run) << svd_run.error().to_string();
    Status svd_done = svd_run->await();
    ASSERT_TRUE(svd_done) << bad << ": " << svd_done.error().to_string();
    const auto& out = svd_run->outputs();
    for (int r = 0; r < 6; ++r)
      for (float f : values<float>(out[r])) EXPECT_TRUE(std::isnan(f)) << "result " << r << " for " << bad;
    const auto s = values<float>(out[7]);
    EXPECT_NEAR(s[0], 9.52551809f, 1e-5f);
    EXPECT_NEAR(s[1], 0.51430058f, 1e-5f);
  }
}

TEST_P(LapackTest, AResultOfTheWrongShapeFailsTheRunNamingTheTarget) {
  const std::vector<double> a = {2, 1, 0, 1, 2, 0, 0, 0, 5};
  const int64_t dims[] = {3, 3};
  auto in = client_->copy_to_device(std::as_bytes(std::span(a)), DType::kF64, dims);
  ASSERT_TRUE(in);
  Executable exe = compile(kWrongShape);
  Buffer* args[] = {&*in};
  auto run = exe.execute(args);
  Status done = run ? run->await() : Status(std::unexpected(run.error()));
  ASSERT_FALSE(done);
  EXPECT_NE(done.error().message().find("plugboard_lapack_dsyevd: result 0 is {2}, expected {3}"), std::string::npos)
      << done.error().to_string();
}

INSTANTIATE_TEST_SUITE_P(CpuPlugins, LapackTest, ::testing::ValuesIn(cpu_plugins()),
                         [](const auto& info) { return info.param.name; });

TEST(LapackDeclare, APluginWithoutTheFfiExtensionIsRefusedNamingIt) {
  auto opened = Client::open(PLUGBOARD_FIXTURE_FAULT_CPU_NO_FFI);
  ASSERT_TRUE(opened) << opened.error().to_string();
  auto declared = (*opened)->declare_lapack();
  ASSERT_FALSE(declared);
  EXPECT_EQ(declared.error().code(), Code::kUnimplemented);
  EXPECT_NE(declared.error().message().find("FFI extension"), std::string::npos) << declared.error().to_string();
}

}  // namespace
}  // namespace plugboard::api
