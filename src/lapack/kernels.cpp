#include "lapack/kernels.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <string>
#include <vector>

#include "lapack/library.h"
#include "lapack/workspace.h"

namespace plugboard::lapack {

namespace {

template <class T> constexpr int kFfiType = 0;
template <> constexpr int kFfiType<float> = XLA_FFI_DataType_F32;
template <> constexpr int kFfiType<double> = XLA_FFI_DataType_F64;

template <class T> constexpr const char* kTypeName = "";
template <> constexpr const char* kTypeName<float> = "f32";
template <> constexpr const char* kTypeName<double> = "f64";

// One operand or result of the frame: an array of T of at least `min_rank` dimensions.
struct Array {
  void* data;
  std::vector<int64_t> dims;

  int64_t dim(int from_end) const { return dims[dims.size() - from_end]; }
  std::vector<int64_t> batch(size_t matrix_rank) const { return {dims.begin(), dims.end() - matrix_rank}; }
};

template <class T>
Expected<Array> array_at(const char* target, const char* what, int64_t index, int type, void* raw, size_t min_rank) {
  const std::string name = std::string(what) + " " + std::to_string(index) + " of " + target;
  if (type != XLA_FFI_ArgType_BUFFER || !raw) return invalid_argument(name + " is not an array");
  const auto* b = static_cast<const XLA_FFI_Buffer*>(raw);
  if (b->dtype != kFfiType<T>)
    return invalid_argument(name + " has XLA element type " + std::to_string(b->dtype) + ", not " + kTypeName<T>);
  if (b->rank < static_cast<int64_t>(min_rank) || !b->dims)
    return invalid_argument(name + " has rank " + std::to_string(b->rank) + ", needs at least " + std::to_string(min_rank));
  Array a{b->data, {b->dims, b->dims + b->rank}};
  for (int64_t d : a.dims)
    if (d < 0 || d > INT_MAX) return invalid_argument(name + " has a dimension of " + std::to_string(d));
  return a;
}

template <class T>
Expected<Array> operand(const char* target, const XLA_FFI_CallFrame& f, int64_t i, size_t min_rank) {
  if (i >= f.args.size) return invalid_argument(std::string(target) + " takes " + std::to_string(i + 1) + " operands");
  return array_at<T>(target, "operand", i, f.args.types[i], f.args.args[i], min_rank);
}

template <class T>
Expected<Array> result(const char* target, const XLA_FFI_CallFrame& f, int64_t i, size_t min_rank) {
  if (i >= f.rets.size) return invalid_argument(std::string(target) + " gives " + std::to_string(i + 1) + " results");
  return array_at<T>(target, "result", i, f.rets.types[i], f.rets.rets[i], min_rank);
}

std::string dims_string(const std::vector<int64_t>& dims) {
  std::string s = "{";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "}";
}

Status expect_dims(const char* target, const char* what, const Array& a, std::vector<int64_t> want) {
  if (a.dims == want) return ok();
  return invalid_argument(std::string(target) + ": " + what + " is " + dims_string(a.dims) + ", expected " + dims_string(want));
}

std::vector<int64_t> with(std::vector<int64_t> batch, std::initializer_list<int64_t> tail) {
  batch.insert(batch.end(), tail);
  return batch;
}

int64_t product(const std::vector<int64_t>& dims) {
  int64_t p = 1;
  for (int64_t d : dims) p *= d;
  return p;
}

template <class T>
void fill_nan(T* data, int64_t count) {
  std::fill_n(data, count, std::numeric_limits<T>::quiet_NaN());
}

// LAPACK refuses a matrix holding a NaN (gesdd: info -4) or may not converge on it; jax and the
// in-program route answer NaN, and so do these kernels, without calling LAPACK.
template <class T>
bool all_finite(const T* data, int64_t count) {
  return std::all_of(data, data + count, [](T x) { return std::isfinite(x); });
}

// Eigenvalues (ascending) and eigenvectors of each symmetric matrix of the batch. The row-major
// matrix is, to LAPACK, its (equal) transpose; the eigenvectors come back as LAPACK's columns,
// which row-major reads as rows, and are transposed in place.
template <class T>
Status run_syevd(const char* target, const XLA_FFI_CallFrame& frame) {
  PB_ASSIGN_OR_RETURN(const Functions* fns, functions());
  PB_ASSIGN_OR_RETURN(Array a, operand<T>(target, frame, 0, 2));
  PB_ASSIGN_OR_RETURN(Array w, result<T>(target, frame, 0, 1));
  PB_ASSIGN_OR_RETURN(Array v, result<T>(target, frame, 1, 2));
  const int64_t n = a.dim(1);
  if (a.dim(2) != n) return invalid_argument(std::string(target) + ": operand 0 is " + dims_string(a.dims) + ", not square");
  const std::vector<int64_t> batch = a.batch(2);
  PB_RETURN_IF_ERROR(expect_dims(target, "result 0", w, with(batch, {n})));
  PB_RETURN_IF_ERROR(expect_dims(target, "result 1", v, with(batch, {n, n})));
  const int64_t count = product(batch);
  if (n == 0 || count == 0) return ok();

  const Int ni = static_cast<Int>(n);
  Int info = 0, lwork = -1, liwork = -1, iwork_size = 0;
  T work_size = 0;
  fns->syevd<T>()("V", "L", &ni, nullptr, &ni, nullptr, &work_size, &lwork, &iwork_size, &liwork, &info, 1, 1);
  if (info != 0) return make_error(Code::kInternal, std::string(target) + ": workspace query failed (info " + std::to_string(info) + ")");
  PB_ASSIGN_OR_RETURN(lwork, workspace_size(target, work_size));
  liwork = iwork_size;
  std::vector<T> work(static_cast<size_t>(std::max<Int>(lwork, 1)));
  std::vector<Int> iwork(static_cast<size_t>(std::max<Int>(liwork, 1)));

  const auto* in = static_cast<const T*>(a.data);
  auto* values = static_cast<T*>(w.data);
  auto* vectors = static_cast<T*>(v.data);
  const int64_t nn = n * n;
  for (int64_t b = 0; b < count; ++b) {
    T* vb = vectors + b * nn;
    T* wb = values + b * n;
    if (!all_finite(in + b * nn, nn)) {
      fill_nan(wb, n);
      fill_nan(vb, nn);
      continue;
    }
    std::memcpy(vb, in + b * nn, sizeof(T) * nn);
    fns->syevd<T>()("V", "L", &ni, vb, &ni, wb, work.data(), &lwork, iwork.data(), &liwork, &info, 1, 1);
    if (info < 0) return make_error(Code::kInternal, std::string(target) + ": LAPACK refused argument " + std::to_string(-info));
    if (info > 0) {
      fill_nan(wb, n);
      fill_nan(vb, nn);
      continue;
    }
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = i + 1; j < n; ++j) std::swap(vb[i * n + j], vb[j * n + i]);
  }
  return ok();
}

// The SVD of each matrix of the batch. The row-major m x n matrix is, to LAPACK, its n x m
// transpose B = U_B·S·V_Bᵀ; then A = V_B·S·U_Bᵀ, and LAPACK's column-major U_B (n x n|k) is, read
// row-major, vt, and its V_Bᵀ (m|k x m) is u: both are written straight into the results.
template <class T>
Status run_gesdd(const char* target, const XLA_FFI_CallFrame& frame) {
  PB_ASSIGN_OR_RETURN(const Functions* fns, functions());
  PB_ASSIGN_OR_RETURN(Array a, operand<T>(target, frame, 0, 2));
  PB_ASSIGN_OR_RETURN(Array u, result<T>(target, frame, 0, 2));
  PB_ASSIGN_OR_RETURN(Array s, result<T>(target, frame, 1, 1));
  PB_ASSIGN_OR_RETURN(Array vt, result<T>(target, frame, 2, 2));
  const int64_t m = a.dim(2), n = a.dim(1), k = std::min(m, n);
  const std::vector<int64_t> batch = a.batch(2);
  const bool full = u.dim(1) == m && vt.dim(2) == n;
  const int64_t ucols = full ? m : k, vrows = full ? n : k;
  PB_RETURN_IF_ERROR(expect_dims(target, "result 0", u, with(batch, {m, ucols})));
  PB_RETURN_IF_ERROR(expect_dims(target, "result 1", s, with(batch, {k})));
  PB_RETURN_IF_ERROR(expect_dims(target, "result 2", vt, with(batch, {vrows, n})));
  const int64_t count = product(batch);
  if (count == 0) return ok();
  if (k == 0) {  // nothing to decompose: u and vt are identities
    for (int64_t b = 0; b < count; ++b) {
      T* ub = static_cast<T*>(u.data) + b * m * ucols;
      T* vb = static_cast<T*>(vt.data) + b * vrows * n;
      std::fill_n(ub, m * ucols, T(0));
      std::fill_n(vb, vrows * n, T(0));
      for (int64_t i = 0; i < std::min(m, ucols); ++i) ub[i * ucols + i] = 1;
      for (int64_t i = 0; i < std::min(vrows, n); ++i) vb[i * n + i] = 1;
    }
    return ok();
  }

  // LAPACK's view: B is n x m (rows x columns), leading dimension n.
  const char* jobz = full ? "A" : "S";
  const Int rows = static_cast<Int>(n), cols = static_cast<Int>(m);
  const Int ldu = rows, ldvt = static_cast<Int>(ucols);
  Int info = 0, lwork = -1;
  T work_size = 0;
  std::vector<Int> iwork(static_cast<size_t>(8 * k));
  fns->gesdd<T>()(jobz, &rows, &cols, nullptr, &rows, nullptr, nullptr, &ldu, nullptr, &ldvt, &work_size, &lwork,
                  iwork.data(), &info, 1);
  if (info != 0) return make_error(Code::kInternal, std::string(target) + ": workspace query failed (info " + std::to_string(info) + ")");
  PB_ASSIGN_OR_RETURN(lwork, workspace_size(target, work_size));
  std::vector<T> work(static_cast<size_t>(std::max<Int>(lwork, 1)));
  std::vector<T> copy(static_cast<size_t>(m * n));

  const auto* in = static_cast<const T*>(a.data);
  for (int64_t b = 0; b < count; ++b) {
    T* ub = static_cast<T*>(u.data) + b * m * ucols;
    T* sb = static_cast<T*>(s.data) + b * k;
    T* vb = static_cast<T*>(vt.data) + b * vrows * n;
    if (!all_finite(in + b * m * n, m * n)) {
      fill_nan(ub, m * ucols);
      fill_nan(sb, k);
      fill_nan(vb, vrows * n);
      continue;
    }
    std::memcpy(copy.data(), in + b * m * n, sizeof(T) * m * n);  // gesdd overwrites its input
    fns->gesdd<T>()(jobz, &rows, &cols, copy.data(), &rows, sb, vb, &ldu, ub, &ldvt, work.data(), &lwork,
                    iwork.data(), &info, 1);
    if (info < 0) return make_error(Code::kInternal, std::string(target) + ": LAPACK refused argument " + std::to_string(-info));
    if (info > 0) {
      fill_nan(ub, m * ucols);
      fill_nan(sb, k);
      fill_nan(vb, vrows * n);
    }
  }
  return ok();
}

template <Status (*Run)(const char*, const XLA_FFI_CallFrame&)>
XLA_FFI_Error* handle(const char* target, XLA_FFI_CallFrame* frame) noexcept {
  if (abi::ffi_answer_metadata(frame)) return nullptr;
  if (frame->stage != XLA_FFI_ExecutionStage_EXECUTE) return nullptr;
  std::string message;
  Code code = Code::kInternal;
  try {
    Status st = Run(target, *frame);
    if (st) return nullptr;
    code = st.error().code();
    message = st.error().message();
  } catch (const std::bad_alloc&) {
    code = Code::kResourceExhausted;
    message = std::string(target) + ": out of memory for LAPACK's workspace";
  } catch (...) {
    message = std::string(target) + ": unexpected exception";
  }
  return abi::ffi_error(frame->api, abi::ffi_code(code), message.c_str());
}

constexpr char kSsyevd[] = "plugboard_lapack_ssyevd";
constexpr char kDsyevd[] = "plugboard_lapack_dsyevd";
constexpr char kSgesdd[] = "plugboard_lapack_sgesdd";
constexpr char kDgesdd[] = "plugboard_lapack_dgesdd";

XLA_FFI_Error* ssyevd(XLA_FFI_CallFrame* f) { return handle<run_syevd<float>>(kSsyevd, f); }
XLA_FFI_Error* dsyevd(XLA_FFI_CallFrame* f) { return handle<run_syevd<double>>(kDsyevd, f); }
XLA_FFI_Error* sgesdd(XLA_FFI_CallFrame* f) { return handle<run_gesdd<float>>(kSgesdd, f); }
XLA_FFI_Error* dgesdd(XLA_FFI_CallFrame* f) { return handle<run_gesdd<double>>(kDgesdd, f); }

constexpr Kernel kKernels[] = {{kSsyevd, &ssyevd}, {kDsyevd, &dsyevd}, {kSgesdd, &sgesdd}, {kDgesdd, &dgesdd}};

}  // namespace

std::span<const Kernel> kernels() { return kKernels; }

}  // namespace plugboard::lapack
