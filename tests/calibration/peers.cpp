#include "peers.hpp"

#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <tuple>
#include <utility>

#include <Eigen/Core>

#include "core/bfloat16.hpp"
#include "kernels/cpu/row_ops.hpp"

#ifdef SA_HAVE_DNNL
#include <dnnl.hpp>
#endif
#ifdef SA_HAVE_TORCH
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/Version.h>
#include <torch/version.h>
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

const char* onednn_isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41:
      return "sse41";
    case dnnl::cpu_isa::avx:
      return "avx";
    case dnnl::cpu_isa::avx2:
      return "avx2";
    case dnnl::cpu_isa::avx2_vnni:
      return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
    default:
      return "other";
  }
}

// oneDNN's ISA values are bit sets, each containing the ones below it.
bool onednn_isa_has(dnnl::cpu_isa isa, dnnl::cpu_isa part) {
  return (static_cast<unsigned>(isa) & static_cast<unsigned>(part)) == static_cast<unsigned>(part);
}

std::string onednn_version() {
  const dnnl_version_t* v = dnnl_version();
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}

// The implementation oneDNN picks for a softmax of n = 64 in `dt` on this CPU
// ("jit:avx2", ...); throws dnnl::error when it has none.
std::string onednn_impl(dnnl::memory::data_type dt, bool log) {
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  const dnnl::memory::desc md({1, 64}, dt, dnnl::memory::format_tag::ab);
  if (log)
    return dnnl::logsoftmax_forward::primitive_desc(
               dnnl::logsoftmax_forward::desc(dnnl::prop_kind::forward_inference, md, 1), eng)
        .impl_info_str();
  return dnnl::softmax_forward::primitive_desc(
             dnnl::softmax_forward::desc(dnnl::prop_kind::forward_inference, md, 1), eng)
      .impl_info_str();
}

// Empty when oneDNN has both softmax and log_softmax for `dt` here, else why not.
std::string onednn_lacks(dnnl::memory::data_type dt, const char* type_name) {
  std::string missing, what;
  for (bool log : {false, true}) {
    try {
      (void)onednn_impl(dt, log);
    } catch (const dnnl::error& e) {
      missing += std::string(missing.empty() ? "" : " and ") + (log ? "log_softmax" : "softmax");
      what = e.what();
    }
  }
  if (missing.empty()) return "";
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  std::string why = "oneDNN " + onednn_version() + " has no " + type_name + " " + missing +
                    " on this CPU (its effective ISA is " + onednn_isa_name(isa) + "; \"" + what +
                    "\")";
  if (dt == dnnl::memory::data_type::bf16 && !onednn_isa_has(isa, dnnl::cpu_isa::avx512_core))
    why += ": its bfloat16 softmax needs AVX-512 (avx512_core)";
  return why;
}
#endif

#ifdef SA_HAVE_DNNL
sa_status onednn_softmax(void*, sa_dtype t, const sa_rows* s, const void* in, void* out) {
  return rows_through(onednn_row, t, s, in, out, false);
}
sa_status onednn_log_softmax(void*, sa_dtype t, const sa_rows* s, const void* in, void* out) {
  return rows_through(onednn_row, t, s, in, out, true);
}
#endif

// ---------------------------------------------------------------- PyTorch
#ifdef SA_HAVE_TORCH
// "CPU capability usage: AVX2" from at::show_config() (the dispatch level
// ATen picked, after ATEN_CPU_CAPABILITY), lower case; "unknown" if absent.
std::string torch_capability() {
  const std::string cfg = at::show_config();
  const std::string key = "CPU capability usage: ";
  const std::size_t at = cfg.find(key);
  if (at == std::string::npos) return "unknown";
  std::string v = cfg.substr(at + key.size(), cfg.find('\n', at) - at - key.size());
  for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return v;
}

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

std::vector<PeerGap>& gaps() {
  static std::vector<PeerGap> g;
  return g;
}

}  // namespace

std::vector<const sa_kernel*> peer_kernels() {
  static const std::vector<sa_kernel> all = [] {
    std::vector<sa_kernel> v;
    sa_kernel e = make("eigen", "Eigen 3.4 array expressions (float32)", SA_DTYPE_F32);
    e.softmax = eigen_softmax;
    e.log_softmax = eigen_log_softmax;
    v.push_back(e);
#ifdef SA_HAVE_DNNL
    // Only the element types oneDNN has on this CPU (probed once).
    std::uint32_t dnnl_types = 0;
    for (auto [dt, bit, name] :
         {std::tuple{dnnl::memory::data_type::f32, std::uint32_t{SA_DTYPE_F32}, "float32"},
          std::tuple{dnnl::memory::data_type::bf16, std::uint32_t{SA_DTYPE_BF16}, "bfloat16"}}) {
      const std::string why = onednn_lacks(dt, name);
      if (why.empty())
        dnnl_types |= bit;
      else
        gaps().push_back({"onednn", name, "softmax, log_softmax", why});
    }
    sa_kernel d = make("onednn", "oneDNN softmax_forward / logsoftmax_forward", dnnl_types);
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
  for (const auto& k : all)
    if (k.dtypes != 0) out.push_back(&k);  // a peer with no type left is only a gap
  return out;
}

std::vector<PeerGap> peer_gaps() {
  (void)peer_kernels();  // the probes run there, once
  return gaps();
}

bool peer_has(const std::string& peer, const std::string& dtype) {
  for (const sa_kernel* k : peer_kernels()) {
    if (peer != k->name) continue;
    if (dtype == "float32") return (k->dtypes & SA_DTYPE_F32) != 0;
    if (dtype == "bfloat16") return (k->dtypes & SA_DTYPE_BF16) != 0;
    return false;
  }
  return false;
}

std::vector<std::string> peer_platform() {
  std::vector<std::string> lines;
  lines.push_back("eigen: Eigen " + std::to_string(EIGEN_WORLD_VERSION) + "." +
                  std::to_string(EIGEN_MAJOR_VERSION) + "." + std::to_string(EIGEN_MINOR_VERSION) +
                  ", compiled with this project's flags (SSE2 packets)");
#ifdef SA_HAVE_DNNL
  {
    std::string line = "onednn: oneDNN " + onednn_version() + ", effective ISA " +
                       onednn_isa_name(dnnl::get_effective_cpu_isa());
    for (auto [dt, name] : {std::pair{dnnl::memory::data_type::f32, "float32"},
                            std::pair{dnnl::memory::data_type::bf16, "bfloat16"}}) {
      try {
        line += std::string(", ") + name + " softmax " + onednn_impl(dt, false);
      } catch (const dnnl::error&) {
        line += std::string(", ") + name + " softmax none";
      }
    }
    lines.push_back(line);
  }
#endif
#ifdef SA_HAVE_TORCH
  {
    lines.push_back(std::string("torch: PyTorch ") + TORCH_VERSION + ", ATen CPU capability " +
                    torch_capability());
  }
#endif
  return lines;
}

std::string isa_above(const std::string& isa) {
  if (isa != "avx2") return "--expect-isa " + isa + ": only avx2 is known";
  std::string above;
  auto add = [&](const std::string& s) { above += (above.empty() ? "" : "; ") + s; };
  const std::string cpu = sa::kernels::cpu::dispatch_target();
  if (cpu != "AVX2") add("the cpu kernel dispatches to " + cpu + " (SA_CPU_MAX_ISA=AVX2 not in effect?)");
#ifdef SA_HAVE_DNNL
  if ((static_cast<unsigned>(dnnl::get_effective_cpu_isa()) &
       ~static_cast<unsigned>(dnnl::cpu_isa::avx2_vnni)) != 0)
    add(std::string("oneDNN's effective ISA is ") + onednn_isa_name(dnnl::get_effective_cpu_isa()) +
        " (ONEDNN_MAX_CPU_ISA=AVX2 not in effect?)");
#endif
#ifdef SA_HAVE_TORCH
  if (const std::string cap = torch_capability(); cap != "avx2" && cap != "default")
    add("PyTorch's ATen CPU capability is " + cap + " (ATEN_CPU_CAPABILITY=avx2 not in effect?)");
#endif
  return above;
}

}  // namespace sa::calibration
