#include "peers.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>

#include <Eigen/Core>

#include "core/bfloat16.hpp"

#ifdef SA_HAVE_DNNL
#include <dnnl.hpp>
#endif
#ifdef SA_HAVE_TORCH
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#endif

namespace sa::calibration {
namespace {

thread_local std::string g_error;

// One contiguous row of n values of dtype t in, n out; log: log-softmax.
using RowFn = void (*)(sa_dtype t, std::int64_t n, const void* in, void* out, bool log);

std::size_t bytes_of(sa_dtype t) { return t == SA_BF16 ? 2 : 4; }

// Rows with their strides and temperature through a contiguous-row function:
// the logits are divided by theta in the dtype (as a caller of the library
// would) before the call.
sa_status rows_through(RowFn fn, sa_dtype t, const sa_rows* s, const void* in, void* out,
                       bool log) {
  if (t != SA_F32 && t != SA_BF16) return SA_UNSUPPORTED;
  if (!s || !in || !out || s->n < 1 || s->in_stride < s->n || s->out_stride < s->n)
    return SA_INVALID_ARGUMENT;
  const std::size_t b = bytes_of(t), n = static_cast<std::size_t>(s->n);
  std::vector<unsigned char> src(n * b), dst(n * b);
  try {
    for (std::int64_t r = 0; r < s->rows; ++r) {
      std::memcpy(src.data(), static_cast<const unsigned char*>(in) + r * s->in_stride * b, n * b);
      if (s->temperature != 1.0) {
        const float th = static_cast<float>(s->temperature);
        for (std::size_t j = 0; j < n; ++j) {
          if (t == SA_F32) {
            float* x = reinterpret_cast<float*>(src.data()) + j;
            *x /= th;
          } else {
            auto* h = reinterpret_cast<std::uint16_t*>(src.data()) + j;
            *h = bf16_from_float(float_from_bf16(*h) / th);
          }
        }
      }
      fn(t, s->n, src.data(), dst.data(), log);
      std::memcpy(static_cast<unsigned char*>(out) + r * s->out_stride * b, dst.data(), n * b);
    }
  } catch (const std::exception& e) {
    g_error = e.what();
    return SA_INTERNAL_ERROR;
  }
  return SA_OK;
}

const char* last_error(void*) { return g_error.c_str(); }

sa_kernel make(const char* name, const char* description, std::uint32_t dtypes) {
  sa_kernel k{};
  k.abi_version = SA_KERNEL_ABI_VERSION;
  k.struct_size = sizeof(sa_kernel);
  k.name = name;
  k.description = description;
  k.ops = SA_OP_SOFTMAX | SA_OP_LOG_SOFTMAX;
  k.dtypes = dtypes;
  k.memory = SA_MEMORY_HOST;
  k.last_error = last_error;
  return k;
}

// ---------------------------------------------------------------- Eigen
void eigen_row(sa_dtype, std::int64_t n, const void* in, void* out, bool log) {
  Eigen::Map<const Eigen::ArrayXf> X(static_cast<const float*>(in), n);
  Eigen::Map<Eigen::ArrayXf> Y(static_cast<float*>(out), n);
  const float m = X.maxCoeff();
  if (log) {
    const float ls = std::log((X - m).exp().sum());
    Y = X - m - ls;
  } else {
    Y = (X - m).exp();
    const float S = Y.sum();
    Y *= 1.0f / S;
  }
}
sa_status eigen_softmax(void*, sa_dtype t, const sa_rows* s, const void* in, void* out) {
  return rows_through(eigen_row, t, s, in, out, false);
}
sa_status eigen_log_softmax(void*, sa_dtype t, const sa_rows* s, const void* in, void* out) {
  return rows_through(eigen_row, t, s, in, out, true);
}

// ---------------------------------------------------------------- oneDNN
#ifdef SA_HAVE_DNNL
void onednn_row(sa_dtype t, std::int64_t n, const void* in, void* out, bool log) {
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  const auto dt = t == SA_BF16 ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32;
  const dnnl::memory::desc md({1, n}, dt, dnnl::memory::format_tag::ab);
  dnnl::memory src(md, eng, const_cast<void*>(in)), dst(md, eng, out);
  if (log) {
    const dnnl::logsoftmax_forward::desc d(dnnl::prop_kind::forward_inference, md, 1);
    dnnl::logsoftmax_forward(dnnl::logsoftmax_forward::primitive_desc(d, eng))
        .execute(strm, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
  } else {
    const dnnl::softmax_forward::desc d(dnnl::prop_kind::forward_inference, md, 1);
    dnnl::softmax_forward(dnnl::softmax_forward::primitive_desc(d, eng))
        .execute(strm, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
  }
  strm.wait();
}
sa_status onednn_softmax(void*, sa_dtype t, const sa_rows* s, const void* in, void* out) {
  return rows_through(onednn_row, t, s, in, out, false);
}
sa_status onednn_log_softmax(void*, sa_dtype t, const sa_rows* s, const void* in, void* out) {
  return rows_through(onednn_row, t, s, in, out, true);
}
#endif

// ---------------------------------------------------------------- PyTorch
#ifdef SA_HAVE_TORCH
void torch_row(sa_dtype t, std::int64_t n, const void* in, void* out, bool log) {
  static const bool once = [] {
    at::set_num_threads(1);
    return true;
  }();
  (void)once;
  const auto st = t == SA_BF16 ? at::kBFloat16 : at::kFloat;
  const at::Tensor x = at::from_blob(const_cast<void*>(in), {1, n}, at::TensorOptions().dtype(st));
  const at::Tensor y = (log ? at::log_softmax(x, -1) : at::softmax(x, -1)).contiguous();
  std::memcpy(out, y.data_ptr(), static_cast<std::size_t>(n) * bytes_of(t));
}
sa_status torch_softmax(void*, sa_dtype t, const sa_rows* s, const void* in, void* out) {
  return rows_through(torch_row, t, s, in, out, false);
}
sa_status torch_log_softmax(void*, sa_dtype t, const sa_rows* s, const void* in, void* out) {
  return rows_through(torch_row, t, s, in, out, true);
}
#endif

}  // namespace

std::vector<const sa_kernel*> peer_kernels() {
  static const std::vector<sa_kernel> all = [] {
    std::vector<sa_kernel> v;
    sa_kernel e = make("eigen", "Eigen 3.4 array expressions (float32)", SA_DTYPE_F32);
    e.softmax = eigen_softmax;
    e.log_softmax = eigen_log_softmax;
    v.push_back(e);
#ifdef SA_HAVE_DNNL
    sa_kernel d =
        make("onednn", "oneDNN softmax_forward / logsoftmax_forward", SA_DTYPE_F32 | SA_DTYPE_BF16);
    d.softmax = onednn_softmax;
    d.log_softmax = onednn_log_softmax;
    v.push_back(d);
#endif
#ifdef SA_HAVE_TORCH
    sa_kernel p =
        make("torch", "PyTorch at::softmax / at::log_softmax (CPU)", SA_DTYPE_F32 | SA_DTYPE_BF16);
    p.softmax = torch_softmax;
    p.log_softmax = torch_log_softmax;
    v.push_back(p);
#endif
    return v;
  }();
  std::vector<const sa_kernel*> out;
  for (const auto& k : all) out.push_back(&k);
  return out;
}

}  // namespace sa::calibration
