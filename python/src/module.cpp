// softmax_audit._core: the property suite, the gate and the `check` command
// for Python (docs/python.md).
//
// A Python kernel (an object with methods softmax, log_softmax, ... and a
// declaration of its types and features; python/softmax_audit/_adapter.py)
// is presented to the suite as an sa_kernel (include/softmax_audit/kernel.h,
// ABI version 2) whose slots call into Python. The gate's buffers cross as
// NumPy views (and torch.from_numpy views of those) without copies; inputs
// are read-only views, outputs are written through writable views. The
// kernel runs only in kernel hosts (gate/host.hpp, docs/isolation.md) exactly
// like a plugin: the judge that runs the suite never imports the module (a
// CUDA kernel, which is not hosted, runs in the judge); in each host the
// interpreter is re-initialised after fork (PyOS_AfterFork_Child) and PyTorch
// runs one thread (its OpenMP pool does not survive fork).
//
// No logic of the suite is here: main() runs cli/check.cpp's `check` command,
// whose --python option reaches the kernel through cli/python_kernel.hpp's hook.
#include <Python.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/python_kernel.hpp"
#include "gate/child.hpp"
#include "gate/coverage.hpp"
#include "gate/isolation.hpp"
#include "gate/kernel_source.hpp"
#include "gate/spec.hpp"
#include "kernels/builtin.hpp"
#include "kernels/kernel.hpp"
#include "properties/conventions.hpp"
#include "softmax_audit/kernel.h"

namespace py = pybind11;

namespace sa {
// The package checks Python kernels; the built-in kernels stay the CLI's
// (--builtin), so the module does not carry them.
std::vector<Kernel> builtin_kernels() { return {}; }
std::string builtin_simd_target(const std::string&) { return ""; }
}  // namespace sa

namespace sa::cli {
int& exit_code() {
  static int code = exit_pass;
  return code;
}
}  // namespace sa::cli

namespace {

// One Python kernel as an sa_kernel. Lives as long as the process (a child
// ends with _exit; an in-process run keeps it until the interpreter exits).
struct Adapter {
  py::object caller;       // softmax_audit._adapter.Caller
  py::object unsupported;  // softmax_audit._adapter.Unsupported (-> SA_UNSUPPORTED)
  std::string name, description, error;
  std::vector<std::string> ops;  // implemented op names
  sa_kernel k{};
  sa_capabilities caps{};
  std::uint32_t op_dtypes[SA_OP_COUNT] = {};
};

std::size_t element_size(sa_dtype t) { return t == SA_F32 ? 4 : 2; }
const char* dtype_name(sa_dtype t) {
  switch (t) {
    case SA_F32:
      return "float32";
    case SA_BF16:
      return "bfloat16";
    case SA_F16:
      return "float16";
    default:
      return "";
  }
}
std::uint32_t dtype_bit(sa_dtype t) {
  switch (t) {
    case SA_F32:
      return SA_DTYPE_F32;
    case SA_BF16:
      return SA_DTYPE_BF16;
    case SA_F16:
      return SA_DTYPE_F16;
    default:
      return 0;
  }
}
int op_index(std::uint32_t bit) {
  for (int i = 0; i < SA_OP_COUNT; ++i)
    if (bit == (1u << i)) return i;
  return -1;
}

// Whether this process's kernel is an SA_MEMORY_CUDA one: the gate then
// stages every buffer in device memory, and views are device arrays. One
// Python kernel per process (each isolated child opens its own).
bool& cuda_views() {
  static bool on = false;
  return on;
}

std::vector<py::ssize_t> contiguous(const std::vector<py::ssize_t>& shape) {
  std::vector<py::ssize_t> strides(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i)
    strides[static_cast<std::size_t>(i)] =
        strides[static_cast<std::size_t>(i) + 1] * shape[static_cast<std::size_t>(i) + 1];
  return strides;
}

// A view over `p` (no copy), strides in elements: a NumPy array over host
// memory (bfloat16 as uint16: the adapter views it as torch.bfloat16), or for
// a CUDA kernel a softmax_audit._adapter.DeviceArray, an object with
// __cuda_array_interface__ that torch.as_tensor takes without a copy.
py::object view(const void* p, const py::dtype& dt, std::size_t es, std::vector<py::ssize_t> shape,
                std::vector<py::ssize_t> strides, bool writable) {
  for (auto& s : strides) s *= static_cast<py::ssize_t>(es);
  if (cuda_views())
    return py::module_::import("softmax_audit._adapter")
        .attr("DeviceArray")(reinterpret_cast<std::uintptr_t>(p), py::tuple(py::cast(shape)),
                             py::tuple(py::cast(strides)), dt.attr("str"), !writable);
  py::capsule owner(p, [](void*) {});  // the gate owns the memory
  py::array a(dt, shape, strides, p, owner);
  if (!writable) a.attr("flags").attr("writeable") = false;
  return std::move(a);
}
py::dtype numpy_dtype(sa_dtype t) {
  if (t == SA_F32) return py::dtype::of<float>();
  if (t == SA_F16) return py::dtype("e");  // PEP 3118 half (numpy.float16)
  return py::dtype::of<std::uint16_t>();   // bfloat16's bits
}
py::object elements(const void* p, sa_dtype t, std::vector<py::ssize_t> shape,
                    std::vector<py::ssize_t> strides, bool writable) {
  return view(p, numpy_dtype(t), element_size(t), std::move(shape), std::move(strides), writable);
}
py::object floats(const float* p, std::vector<py::ssize_t> shape, bool writable = true) {
  std::vector<py::ssize_t> strides = contiguous(shape);
  return view(p, py::dtype::of<float>(), 4, std::move(shape), std::move(strides), writable);
}

// `n` values at `p` read on the host (copied from the device for a CUDA kernel).
template <class T>
std::vector<T> host_values(const T* p, std::size_t n) {
  std::vector<T> v(n);
  if (n == 0) return v;
  if (cuda_views())
    sa::device_memory().to_host(v.data(), p, n * sizeof(T));
  else
    std::copy(p, p + n, v.begin());
  return v;
}

// Runs `body` with the GIL; a Python exception becomes the status the
// kernel returns (Unsupported -> SA_UNSUPPORTED, anything else
// SA_INTERNAL_ERROR) and its text last_error.
template <class F>
sa_status guarded_call(void* ctx, const char* op, F&& body) {
  auto* a = static_cast<Adapter*>(ctx);
  py::gil_scoped_acquire gil;
  try {
    body(*a);
    a->error.clear();
    return SA_OK;
  } catch (py::error_already_set& e) {
    const bool unsupported = e.matches(a->unsupported);
    a->error = std::string("Python kernel '") + a->name + "', " + op + ": " + e.what();
    if (a->error.size() > 4000) a->error.resize(4000);
    return unsupported ? SA_UNSUPPORTED : SA_INTERNAL_ERROR;
  } catch (const std::exception& e) {
    a->error = std::string("Python kernel '") + a->name + "', " + op + ": " + e.what();
    return SA_INTERNAL_ERROR;
  }
}

const char* last_error(void* ctx) {
  auto* a = static_cast<Adapter*>(ctx);
  return a->error.empty() ? nullptr : a->error.c_str();
}

// The row operations' argument screen (kernel.h): what every kernel must refuse.
sa_status screen_rows(const Adapter& a, std::uint32_t op, sa_dtype t, const sa_rows* s,
                      const void* in, const void* out, bool row_out) {
  if (!s || !in || !out) return SA_INVALID_ARGUMENT;
  if (s->rows < 0 || s->n < 1 || s->in_stride < s->n || (row_out && s->out_stride < s->n) ||
      !(s->temperature > 0) || !std::isfinite(s->temperature))
    return SA_INVALID_ARGUMENT;
  const int i = op_index(op);
  if (i < 0 || (a.op_dtypes[i] & dtype_bit(t)) == 0) return SA_UNSUPPORTED;
  if (row_out && s->out_dtype != 0 && s->out_dtype != t) return SA_UNSUPPORTED;
  if (a.caps.max_n > 0 && s->n > a.caps.max_n) return SA_UNSUPPORTED;
  return SA_OK;
}

template <std::uint32_t Op>
sa_status rows_slot(void* ctx, sa_dtype t, const sa_rows* s, const void* in, void* out) {
  const char* op = Op == SA_OP_SOFTMAX ? "softmax" : "log_softmax";
  if (sa_status st = screen_rows(*static_cast<Adapter*>(ctx), Op, t, s, in, out, true); st != SA_OK)
    return st;
  if (s->rows == 0) return SA_OK;
  return guarded_call(ctx, op, [&](Adapter& a) {
    a.caller.attr("rows")(
        op, dtype_name(t), elements(in, t, {s->rows, s->n}, {s->in_stride, 1}, false),
        elements(out, t, {s->rows, s->n}, {s->out_stride, 1}, true), s->temperature);
  });
}

sa_status logsumexp_slot(void* ctx, sa_dtype t, const sa_rows* s, const void* in, float* lse) {
  if (sa_status st =
          screen_rows(*static_cast<Adapter*>(ctx), SA_OP_LOGSUMEXP, t, s, in, lse, false);
      st != SA_OK)
    return st;
  if (s->rows == 0) return SA_OK;
  return guarded_call(ctx, "logsumexp", [&](Adapter& a) {
    a.caller.attr("reduce")("logsumexp", dtype_name(t),
                            elements(in, t, {s->rows, s->n}, {s->in_stride, 1}, false),
                            floats(lse, {s->rows}), s->temperature, py::none());
  });
}

sa_status entropy_slot(void* ctx, sa_dtype t, const sa_rows* s, const void* in, float* H,
                       sa_entropy_state* state) {
  if (sa_status st = screen_rows(*static_cast<Adapter*>(ctx), SA_OP_ENTROPY, t, s, in, H, false);
      st != SA_OK)
    return st;
  if (s->rows == 0) return SA_OK;
  return guarded_call(ctx, "entropy", [&](Adapter& a) {
    py::object st = state ? py::object(floats(&state->m, {s->rows, 3})) : py::object(py::none());
    a.caller.attr("reduce")("entropy", dtype_name(t),
                            elements(in, t, {s->rows, s->n}, {s->in_stride, 1}, false),
                            floats(H, {s->rows}), s->temperature, st);
  });
}

template <std::uint32_t Op>
sa_status backward_slot(void* ctx, sa_dtype t, const sa_rows* s, const void* y, const void* dy,
                        void* dx) {
  const char* op = Op == SA_OP_SOFTMAX_BACKWARD ? "softmax_backward" : "log_softmax_backward";
  if (!dy) return SA_INVALID_ARGUMENT;
  if (sa_status st = screen_rows(*static_cast<Adapter*>(ctx), Op, t, s, y, dx, true); st != SA_OK)
    return st;
  if (s->rows == 0) return SA_OK;
  return guarded_call(ctx, op, [&](Adapter& a) {
    // dx may be dy (in place): dy is then a writable view of the same memory.
    const bool in_place = dx == dy;
    a.caller.attr("backward")(
        op, dtype_name(t), elements(y, t, {s->rows, s->n}, {s->in_stride, 1}, false),
        elements(dy, t, {s->rows, s->n}, {s->in_stride, 1}, in_place),
        elements(dx, t, {s->rows, s->n}, {s->out_stride, 1}, true), s->temperature);
  });
}

sa_status adaptive_slot(void* ctx, sa_dtype t, const sa_rows* s, const void* in, void* out,
                        float* beta, float* H) {
  if (sa_status st =
          screen_rows(*static_cast<Adapter*>(ctx), SA_OP_ADAPTIVE_SOFTMAX, t, s, in, out, true);
      st != SA_OK)
    return st;
  if (s->rows == 0) return SA_OK;
  return guarded_call(ctx, "adaptive_softmax", [&](Adapter& a) {
    auto per_row = [&](float* p) {
      return p ? py::object(floats(p, {s->rows})) : py::object(py::none());
    };
    a.caller.attr("adaptive")(dtype_name(t),
                              elements(in, t, {s->rows, s->n}, {s->in_stride, 1}, false),
                              elements(out, t, {s->rows, s->n}, {s->out_stride, 1}, true),
                              s->temperature, per_row(beta), per_row(H));
  });
}

sa_status merge_entropy_slot(void* ctx, std::int64_t count, const sa_entropy_state* x,
                             const sa_entropy_state* y, sa_entropy_state* out) {
  if (count < 0 || (count > 0 && (!x || !y || !out))) return SA_INVALID_ARGUMENT;
  if (count == 0) return SA_OK;
  return guarded_call(ctx, "merge_entropy_states", [&](Adapter& a) {
    a.caller.attr("merge_entropy")(floats(&x->m, {count, 3}, false),
                                   floats(&y->m, {count, 3}, false), floats(&out->m, {count, 3}));
  });
}

// Both merge slots call the kernel's merge_attention_states(outs, lses) with
// lists of the parts (out may alias the first part: the kernel's result is
// copied after it returns). `o` and `lse` hold the parts' host-readable
// pointers.
sa_status merge_parts(void* ctx, std::int64_t rows, std::int64_t dv,
                      const std::vector<const float*>& o, const std::vector<const float*>& lse,
                      float* out, float* out_lse) {
  if (rows < 0 || dv < 1 || !out || !out_lse) return SA_INVALID_ARGUMENT;
  for (std::size_t i = 0; i < o.size(); ++i)
    if (!o[i] || !lse[i]) return SA_INVALID_ARGUMENT;
  if (rows == 0) return SA_OK;
  return guarded_call(ctx, "merge_attention_states", [&](Adapter& a) {
    py::list os, ls;
    for (std::size_t i = 0; i < o.size(); ++i) {
      os.append(floats(o[i], {rows, dv}, false));
      ls.append(floats(lse[i], {rows}, false));
    }
    a.caller.attr("merge_attention")(os, ls, floats(out, {rows, dv}), floats(out_lse, {rows}));
  });
}

sa_status merge_attention_n_slot(void* ctx, std::int64_t parts, std::int64_t rows, std::int64_t dv,
                                 const float* const* o, const float* const* lse, float* out,
                                 float* out_lse) {
  if (parts < 1 || !o || !lse) return SA_INVALID_ARGUMENT;
  // The arrays of part pointers are in the kernel's memory too.
  return merge_parts(ctx, rows, dv, host_values(o, static_cast<std::size_t>(parts)),
                     host_values(lse, static_cast<std::size_t>(parts)), out, out_lse);
}

sa_status merge_attention_slot(void* ctx, std::int64_t rows, std::int64_t dv, const float* o_a,
                               const float* lse_a, const float* o_b, const float* lse_b, float* out,
                               float* out_lse) {
  return merge_parts(ctx, rows, dv, {o_a, o_b}, {lse_a, lse_b}, out, out_lse);
}

// The forward arguments' screen shared by attention and its backward: what
// every kernel must refuse, and what the Python signature cannot carry
// (adaptive temperature, entropy and beta outputs, fp8 descales) or the
// kernel did not declare (varlen, window, softcap, ALiBi, sinks).
sa_status screen_attention(const Adapter& a, const sa_attention_v2_args* p) {
  if (!p || p->struct_size < sizeof(sa_attention_v2_args) || !p->q.data || !p->k.data ||
      !p->v.data || !p->out)
    return SA_INVALID_ARGUMENT;
  if (p->batch < 0 || p->heads_q < 1 || p->heads_kv < 1 || p->heads_q % p->heads_kv != 0 ||
      p->seqlen_q < 0 || p->seqlen_k < 0 || p->head_dim < 1 || p->head_dim_v < 1)
    return SA_INVALID_ARGUMENT;
  const int i = op_index(SA_OP_ATTENTION_V2);
  if ((a.op_dtypes[i] & dtype_bit(p->qkv_dtype)) == 0 || p->out_dtype != p->qkv_dtype)
    return SA_UNSUPPORTED;
  // The features declared for this input type (attention_features_by_dtype).
  const std::uint32_t own =
      p->qkv_dtype >= 0 && p->qkv_dtype < 8 ? a.caps.attention_features_by_dtype[p->qkv_dtype] : 0;
  const std::uint32_t f = own != 0 ? own : a.caps.attention_features;
  const bool window = p->window_left >= 0 || (!p->causal && p->window_right >= 0);
  if ((window && !(f & SA_ATTN_WINDOW)) || (p->softcap != 0 && !(f & SA_ATTN_SOFTCAP)) ||
      (p->alibi_slopes && !(f & SA_ATTN_ALIBI)) || (p->sinks && !(f & SA_ATTN_SINKS)))
    return SA_UNSUPPORTED;
  if (!p->cu_seqlens_q != !p->cu_seqlens_k) return SA_INVALID_ARGUMENT;
  if ((p->seqused_k && !(f & SA_ATTN_SEQUSED_K)) || (p->block_table && !(f & SA_ATTN_PAGED_KV)))
    return SA_UNSUPPORTED;
  if (p->block_table && (p->page_size < 1 || p->num_pages < 1 || p->block_table_stride < 1))
    return SA_INVALID_ARGUMENT;
  if ((p->attn_mask.data && !(f & SA_ATTN_BOOL_MASK)) ||
      (p->attn_bias.data && !(f & SA_ATTN_BIAS)) ||
      (p->block_mask.data && !(f & SA_ATTN_BLOCK_MASK)) ||
      (p->tree_mask.data && !(f & SA_ATTN_TREE_MASK)))
    return SA_UNSUPPORTED;
  if (p->block_mask.data && (p->block_q < 1 || p->block_k < 1)) return SA_INVALID_ARGUMENT;
  // Block scales and per-head descales: fp8 inputs, which no Python kernel takes.
  if (p->scale_block != 0 || p->q_descale_bh || p->k_descale_bh || p->v_descale_bh)
    return SA_UNSUPPORTED;
  if ((p->cu_seqlens_q && !(f & SA_ATTN_VARLEN)) || p->adaptive || p->entropy || p->beta ||
      p->q_descale != 1 || p->k_descale != 1 || p->v_descale != 1)
    return SA_UNSUPPORTED;
  return SA_OK;
}

// The keyword arguments of the features in use (only those: a kernel written
// before a feature existed keeps its signature): window = (left, right) as
// kernel.h's window_left / window_right (-1: unbounded), softcap, alibi_slopes
// and sinks as float32 arrays of heads_q values; varlen: cu_seqlens_q and
// cu_seqlens_k (int32, batch + 1 offsets) and max_seqlen_q / max_seqlen_k;
// seqused_k (int32, batch); paged KV: block_table (int32, [batch,
// block_table_stride]), page_size and max_seqlen_k (the key buffer's length);
// masks (forward only): attn_mask, block_mask, tree_mask (uint8, nonzero
// takes part) and attn_bias (float32) as [batch, heads_q, rows, columns]
// views by their strides (0 where broadcast), block_size = (block_q, block_k).
py::dict feature_kwargs(const sa_attention_v2_args* p) {
  py::dict kw;
  if (p->window_left >= 0 || (!p->causal && p->window_right >= 0))
    kw["window"] = py::make_tuple(p->window_left, p->causal ? -1 : p->window_right);
  if (p->softcap != 0) kw["softcap"] = p->softcap;
  auto heads = [&](const float* x) { return floats(x, {p->heads_q}, false); };
  if (p->alibi_slopes) kw["alibi_slopes"] = heads(p->alibi_slopes);
  if (p->sinks) kw["sinks"] = heads(p->sinks);
  if (p->cu_seqlens_q) {
    auto offsets = [&](const std::int32_t* x) {
      return view(x, py::dtype::of<std::int32_t>(), 4, {p->batch + 1}, {1}, false);
    };
    kw["cu_seqlens_q"] = offsets(p->cu_seqlens_q);
    kw["cu_seqlens_k"] = offsets(p->cu_seqlens_k);
    kw["max_seqlen_q"] = p->seqlen_q;
    kw["max_seqlen_k"] = p->seqlen_k;
  }
  if (p->seqused_k)
    kw["seqused_k"] = view(p->seqused_k, py::dtype::of<std::int32_t>(), 4, {p->batch}, {1}, false);
  if (p->block_table) {
    kw["block_table"] = view(p->block_table, py::dtype::of<std::int32_t>(), 4,
                             {p->batch, p->block_table_stride}, {p->block_table_stride, 1}, false);
    kw["page_size"] = p->page_size;
    kw["max_seqlen_k"] = p->seqlen_k;  // a fixed-length call's key buffer (varlen: the largest)
  }
  auto mask = [&](const sa_mask_tensor& m, bool bias, py::ssize_t rows, py::ssize_t cols) {
    return view(m.data, bias ? py::dtype::of<float>() : py::dtype::of<std::uint8_t>(), bias ? 4 : 1,
                {p->batch, p->heads_q, rows, cols},
                {m.stride_b, m.stride_h, m.stride_q, m.stride_k}, false);
  };
  if (p->attn_mask.data) kw["attn_mask"] = mask(p->attn_mask, false, p->seqlen_q, p->seqlen_k);
  if (p->attn_bias.data) kw["attn_bias"] = mask(p->attn_bias, true, p->seqlen_q, p->seqlen_k);
  if (p->block_mask.data) {
    kw["block_mask"] = mask(p->block_mask, false, (p->seqlen_q + p->block_q - 1) / p->block_q,
                            (p->seqlen_k + p->block_k - 1) / p->block_k);
    kw["block_size"] = py::make_tuple(p->block_q, p->block_k);
  }
  if (p->tree_mask.data) kw["tree_mask"] = mask(p->tree_mask, false, p->seqlen_q, p->seqlen_q);
  return kw;
}

// q, k, v, out (and dout, dq, dk, dv) of a call as [B, H, S, D] views, or
// with varlen as packed [total, H, D] views (FlashAttention's varlen layout);
// the key padding mask [B, Sk] or [total_k]; per-query floats (lse) [B, Hq,
// Sq] or [Hq, total_q] (kernel.h).
struct AttentionViews {
  const sa_attention_v2_args* p;
  py::ssize_t tq = 0, tk = 0;  // total_q, total_k (varlen)
  explicit AttentionViews(const sa_attention_v2_args* args) : p(args) {
    if (varlen()) {
      tq = host_values(p->cu_seqlens_q + p->batch, 1)[0];
      tk = host_values(p->cu_seqlens_k + p->batch, 1)[0];
    }
  }
  bool varlen() const { return p->cu_seqlens_q != nullptr; }
  py::ssize_t total_q() const { return tq; }
  py::ssize_t total_k() const { return tk; }
  py::object shaped(const void* data, py::ssize_t sb, py::ssize_t sh, py::ssize_t ss, py::ssize_t H,
                    py::ssize_t S, py::ssize_t total, py::ssize_t d, bool writable) const {
    if (varlen()) return elements(data, p->qkv_dtype, {total, H, d}, {ss, sh, 1}, writable);
    return elements(data, p->qkv_dtype, {p->batch, H, S, d}, {sb, sh, ss, 1}, writable);
  }
  py::object tensor(const sa_tensor& x, py::ssize_t H, bool keys, py::ssize_t d,
                    bool writable) const {
    // Paged keys and values: the pools, [num_pages, page_size, H, d] by their
    // strides (stride_b between pages; an HND pool is the same view).
    if (keys && p->block_table)
      return elements(x.data, p->qkv_dtype, {p->num_pages, p->page_size, H, d},
                      {x.stride_b, x.stride_s, x.stride_h, 1}, writable);
    return shaped(x.data, x.stride_b, x.stride_h, x.stride_s, H, keys ? p->seqlen_k : p->seqlen_q,
                  keys ? total_k() : total_q(), d, writable);
  }
  py::object q() const { return tensor(p->q, p->heads_q, false, p->head_dim, false); }
  py::object k() const { return tensor(p->k, p->heads_kv, true, p->head_dim, false); }
  py::object v() const { return tensor(p->v, p->heads_kv, true, p->head_dim_v, false); }
  py::object out(bool writable) const {
    return shaped(p->out, p->out_stride_b, p->out_stride_h, p->out_stride_s, p->heads_q,
                  p->seqlen_q, total_q(), p->head_dim_v, writable);
  }
  py::object mask() const {
    if (!p->key_padding_mask) return py::none();
    if (varlen())
      return view(p->key_padding_mask, py::dtype::of<std::uint8_t>(), 1, {total_k()}, {1}, false);
    return view(p->key_padding_mask, py::dtype::of<std::uint8_t>(), 1, {p->batch, p->seqlen_k},
                {p->seqlen_k, 1}, false);
  }
  std::vector<py::ssize_t> per_query_shape() const {
    if (varlen()) return {p->heads_q, total_q()};
    return {p->batch, p->heads_q, p->seqlen_q};
  }
  const char* alignment() const {
    return p->alignment == SA_ALIGN_TOP_LEFT ? "top_left" : "bottom_right";
  }
};

sa_status attention_v2_slot(void* ctx, const sa_attention_v2_args* p) {
  if (sa_status st = screen_attention(*static_cast<Adapter*>(ctx), p); st != SA_OK) return st;
  if (p->batch == 0 || p->seqlen_q == 0) return SA_OK;
  return guarded_call(ctx, "attention", [&](Adapter& a) {
    const AttentionViews w(p);
    py::object lse =
        p->lse ? py::object(floats(p->lse, w.per_query_shape())) : py::object(py::none());
    a.caller.attr("attention")(dtype_name(p->qkv_dtype), w.q(), w.k(), w.v(), w.out(true), lse,
                               w.mask(), p->scale, p->causal != 0, w.alignment(),
                               feature_kwargs(p));
  });
}

sa_status attention_backward_slot(void* ctx, const sa_attention_backward_args* b) {
  if (!b || b->struct_size < sizeof(sa_attention_backward_args) || !b->dout.data || !b->dq.data ||
      !b->dk.data || !b->dv.data)
    return SA_INVALID_ARGUMENT;
  const sa_attention_v2_args* p = b->forward;
  if (sa_status st = screen_attention(*static_cast<Adapter*>(ctx), p); st != SA_OK) return st;
  if (!p->lse) return SA_INVALID_ARGUMENT;  // kernel.h: the backward reads the forward's lse
  if (b->dsinks && !p->sinks) return SA_INVALID_ARGUMENT;
  if (p->batch == 0) return SA_OK;
  return guarded_call(ctx, "attention_backward", [&](Adapter& a) {
    const AttentionViews w(p);
    const py::ssize_t Hq = p->heads_q, Hk = p->heads_kv, D = p->head_dim, Dv = p->head_dim_v;
    py::object dsinks = b->dsinks ? py::object(floats(b->dsinks, {Hq})) : py::object(py::none());
    py::object lse = floats(p->lse, w.per_query_shape(), false);
    a.caller.attr("attention_backward")(
        dtype_name(p->qkv_dtype), w.q(), w.k(), w.v(), w.out(false),
        w.tensor(b->dout, Hq, false, Dv, false), lse, w.tensor(b->dq, Hq, false, D, true),
        w.tensor(b->dk, Hk, true, D, true), w.tensor(b->dv, Hk, true, Dv, true), dsinks, w.mask(),
        p->scale, p->causal != 0, w.alignment(), feature_kwargs(p));
  });
}

// Builds the adapter for `caller` (softmax_audit._adapter.Caller). GIL held.
Adapter* make_adapter(py::object caller) {
  auto* a = new Adapter;
  a->caller = caller;
  a->unsupported = py::module_::import("softmax_audit._adapter").attr("Unsupported");
  py::dict d = caller.attr("describe")();
  a->name = d["name"].cast<std::string>();
  a->description = d["description"].cast<std::string>();
  sa_kernel& k = a->k;
  k.abi_version = SA_KERNEL_ABI_VERSION;
  k.struct_size = sizeof(sa_kernel);
  k.name = a->name.c_str();
  k.description = a->description.c_str();
  const bool cuda = d["device"].cast<std::string>() != "cpu";
  k.memory = cuda ? SA_MEMORY_CUDA : SA_MEMORY_HOST;
  cuda_views() = cuda;
  k.adaptive_entropy = d["adaptive_entropy"].cast<std::string>() == "paper_eps"
                           ? SA_ENTROPY_PAPER_EPS
                           : SA_ENTROPY_SHANNON;
  k.ctx = a;
  k.last_error = last_error;
  std::uint32_t all_dtypes = 0;
  for (auto item : py::dict(d["op_dtypes"])) {
    const std::string op = item.first.cast<std::string>();
    std::uint32_t bits = 0;
    for (const std::string& n : item.second.cast<std::vector<std::string>>())
      bits |= n == "float32" ? SA_DTYPE_F32 : n == "bfloat16" ? SA_DTYPE_BF16 : SA_DTYPE_F16;
    std::uint32_t bit = 0;
    if (op == "softmax")
      bit = SA_OP_SOFTMAX, k.softmax = rows_slot<SA_OP_SOFTMAX>;
    else if (op == "log_softmax")
      bit = SA_OP_LOG_SOFTMAX, k.log_softmax = rows_slot<SA_OP_LOG_SOFTMAX>;
    else if (op == "logsumexp")
      bit = SA_OP_LOGSUMEXP, k.logsumexp = logsumexp_slot;
    else if (op == "entropy")
      bit = SA_OP_ENTROPY, k.entropy = entropy_slot;
    else if (op == "softmax_backward")
      bit = SA_OP_SOFTMAX_BACKWARD, k.softmax_backward = backward_slot<SA_OP_SOFTMAX_BACKWARD>;
    else if (op == "log_softmax_backward")
      bit = SA_OP_LOG_SOFTMAX_BACKWARD,
      k.log_softmax_backward = backward_slot<SA_OP_LOG_SOFTMAX_BACKWARD>;
    else if (op == "attention")
      bit = SA_OP_ATTENTION_V2, k.attention_v2 = attention_v2_slot;
    else if (op == "attention_backward")
      bit = SA_OP_ATTENTION_BACKWARD, k.attention_backward = attention_backward_slot;
    else if (op == "adaptive_softmax")
      bit = SA_OP_ADAPTIVE_SOFTMAX, k.adaptive_softmax = adaptive_slot;
    else if (op == "merge_entropy_states")
      bit = SA_OP_MERGE_ENTROPY_STATES, k.merge_entropy_states = merge_entropy_slot;
    else if (op == "merge_attention_states") {
      // One Python function serves the two-part and the n-part slot.
      bit = SA_OP_MERGE_ATTENTION_STATES, k.merge_attention_states = merge_attention_slot;
      k.merge_attention_states_n = merge_attention_n_slot;
      if (bits != 0) {
        k.ops |= SA_OP_MERGE_ATTENTION_STATES_N;
        a->op_dtypes[op_index(SA_OP_MERGE_ATTENTION_STATES_N)] = bits;
        a->caps.op_dtypes[op_index(SA_OP_MERGE_ATTENTION_STATES_N)] = bits;
      }
    } else
      throw std::invalid_argument("unknown op '" + op + "' in the adapter's description");
    if (bits == 0) continue;
    k.ops |= bit;
    a->op_dtypes[op_index(bit)] = bits;
    a->caps.op_dtypes[op_index(bit)] = bits;
    all_dtypes |= bits;
  }
  k.dtypes = all_dtypes;
  a->caps.struct_size = sizeof(sa_capabilities);
  a->caps.max_n = d["max_n"].cast<std::int64_t>();
  a->caps.attention_features = d["attention_features"].cast<std::uint32_t>();
  // The declared domain (kernel.h): per-type features, required features,
  // SA_ATTN_ONLY_* constraints, the head-dim multiple.
  for (auto item : py::dict(d["attention_features_by_dtype"])) {
    const std::string t = item.first.cast<std::string>();
    const int index = t == "float32" ? SA_F32 : t == "bfloat16" ? SA_BF16 : SA_F16;
    a->caps.attention_features_by_dtype[index] = item.second.cast<std::uint32_t>();
  }
  a->caps.attention_required = d["attention_required"].cast<std::uint32_t>();
  a->caps.attention_constraints = d["attention_constraints"].cast<std::uint32_t>();
  a->caps.head_dim_multiple = d["head_dim_multiple"].cast<std::int32_t>();
  a->caps.flags = d["deterministic"].cast<bool>() ? SA_CAP_DETERMINISTIC : 0u;
  // Declared conventions (the adapter checked the names): their SA_CAP_* bits.
  a->caps.flags |= d["convention_flags"].cast<std::uint32_t>() & sa::props::convention_flags();
  k.capabilities = &a->caps;
  return a;
}

// Called first in every process that calls the kernel: after fork, the
// interpreter is re-initialised for this process (threads, locks, the GIL
// held by this thread) once.
void enter_process(pid_t gate_pid) {
  static pid_t ready = 0;
  if (getpid() == ready) return;
  if (getpid() != gate_pid) PyOS_AfterFork_Child();
  ready = getpid();
}

// The kernel, from a Python object or by name, in the current process.
sa::Kernel open_kernel(pid_t gate_pid, const py::object& object, const std::string& name,
                       const std::string& origin) {
  enter_process(gate_pid);
  py::gil_scoped_acquire gil;
  try {
    py::object adapter = py::module_::import("softmax_audit._adapter");
    adapter.attr("prepare_process")(getpid() != gate_pid);
    py::object obj = object ? object : adapter.attr("load")(name);
    Adapter* a = make_adapter(adapter.attr("Caller")(obj));
    return sa::Kernel(&a->k, origin);
  } catch (py::error_already_set& e) {
    // A module this interpreter lacks (torch in another environment): say which interpreter.
    // One line then: the error without its traceback.
    if (e.matches(PyExc_ImportError)) {
      const std::string what = e.what();
      throw std::invalid_argument(
          "Python kernel " + origin + " (imported by " +
          py::str(py::module_::import("sys").attr("executable")).cast<std::string>() +
          "): " + what.substr(0, what.find('\n')) + "; nothing was checked");
    }
    throw std::invalid_argument("Python kernel " + origin + ": " + e.what());
  }
}

// Opens the kernel (the object, or `name` imported) in a probe child within
// `timeout_s`: its name and description, and for a CUDA kernel whether a
// device is usable there (asked in the child, after the kernel's own imports
// loaded their CUDA runtime; never in this process, which forks the
// isolated children). Throws std::invalid_argument naming what went wrong;
// a CUDA kernel with no usable device checks nothing (exit 2, as a plugin's).
sa::gate::KernelIdentity probe(pid_t gate_pid, const py::object& object, const std::string& name,
                               const std::string& origin, const std::string& what,
                               double timeout_s) {
  sa::gate::KernelIdentity id;
  id.origin = origin;
  std::string load_error, violation, cannot_run;
  bool have = false;
  sa::gate::ChildChannel child([&](const sa::gate::ChildWriter& w) {
    try {
      const sa::Kernel k = open_kernel(gate_pid, object, name, origin);
      std::string why;
      if (k.memory() == SA_MEMORY_CUDA) {
        const sa::DeviceMemory& dm = sa::device_memory();
        if (!dm.alloc) why = dm.why_unavailable ? dm.why_unavailable() : "no CUDA device";
      }
      w.send({{"t", "identity"},
              {"name", k.name()},
              {"description", k.description()},
              {"cannot_run", why}});
    } catch (const std::exception& e) {
      w.send({{"t", "error"}, {"what", e.what()}});
    }
    std::fflush(nullptr);
    _exit(0);
  });
  const auto end = child.run(
      timeout_s, 0,
      [&](const nlohmann::json& m) {
        if (m.value("t", "") == "error") load_error = m.value("what", "");
        if (m.value("t", "") == "identity") {
          have = true;
          id.name = m.value("name", "");
          id.description = m.value("description", "");
          cannot_run = m.value("cannot_run", "");
        }
      },
      [&](const std::string& v) {
        if (violation.empty()) violation = v;
      });
  if (!load_error.empty()) throw std::invalid_argument(load_error);
  if (!have) {
    std::string how = end.describe();
    if (end.timed_out) how = "did not finish within " + std::to_string(timeout_s) + " s";
    throw std::invalid_argument(what + ": the process importing it " + how +
                                " before the kernel was described; nothing was checked");
  }
  if (!cannot_run.empty())
    throw std::invalid_argument("kernel '" + id.name +
                                "' works on CUDA tensors (device = \"cuda\"), but no CUDA device "
                                "is usable here (" +
                                cannot_run + "); nothing was checked");
  return id;
}

// --python NAME: imported in a probe child (never here), then again in every
// isolated child.
sa::gate::KernelSource probe_named(const std::string& name, double timeout_s) {
  const pid_t gate_pid = getpid();
  const std::string origin = "python:" + name;
  const sa::gate::KernelIdentity id =
      probe(gate_pid, py::object(), name, origin, "--python " + name, timeout_s);
  return sa::gate::KernelSource(
      id, [gate_pid, name, origin] { return open_kernel(gate_pid, py::object(), name, origin); });
}

// softmax_audit.check(kernel) hands the object itself: described here (its
// attributes are read in this process, which already holds it), called only
// in the isolated children; a CUDA kernel is probed in a child first.
sa::gate::KernelSource from_object(const py::object& obj, double timeout_s) {
  const pid_t gate_pid = getpid();
  py::object adapter = py::module_::import("softmax_audit._adapter");
  py::dict d = adapter.attr("Caller")(obj).attr("describe")();
  sa::gate::KernelIdentity id;
  id.name = d["name"].cast<std::string>();
  id.description = d["description"].cast<std::string>();
  id.origin = "python object " + d["origin"].cast<std::string>();
  const std::string origin = id.origin;
  if (d["device"].cast<std::string>() != "cpu")
    probe(gate_pid, obj, "", origin, "kernel object " + id.name, timeout_s);
  return sa::gate::KernelSource(
      id, [gate_pid, obj, origin] { return open_kernel(gate_pid, obj, "", origin); });
}

// The `check` command of the CLI (cli/check.cpp) on argv; with `kernel` not
// None, --python's kernel is that object. Returns the exit code.
py::tuple run_main(std::vector<std::string> argv, py::object kernel, bool capture_stderr) {
  sa::cli::python_kernel_hook() = [kernel](const std::string& name, double timeout_s) {
    if (kernel && !kernel.is_none()) return from_object(kernel, timeout_s);
    return probe_named(name, timeout_s);
  };
  sa::cli::exit_code() = sa::cli::exit_pass;
  CLI::App app{"softmax-audit (Python package) — check a kernel with the property suite"};
  app.require_subcommand(1);
  sa::cli::add_check_command(app);
  sa::cli::add_replay_command(app);
  std::vector<const char*> args;
  for (auto& s : argv) args.push_back(s.c_str());
  std::ostringstream captured;
  std::streambuf* old_err = capture_stderr ? std::cerr.rdbuf(captured.rdbuf()) : nullptr;
  int code = 0;
  try {
    app.parse(static_cast<int>(args.size()), const_cast<char**>(args.data()));
    code = sa::cli::exit_code();
  } catch (const CLI::ParseError& e) {
    code = app.exit(e) == 0 ? 0 : sa::cli::exit_usage;
  } catch (const std::exception& e) {
    std::cerr << "softmax-audit: error: " << e.what() << "\n";
    code = sa::cli::exit_usage;
  }
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  if (old_err) std::cerr.rdbuf(old_err);
  sa::cli::python_kernel_hook() = nullptr;
  return py::make_tuple(code, captured.str());
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "softmax-audit's property suite and gate (internal; use softmax_audit.check)";
  m.attr("__version__") = SA_VERSION;
  m.def("main", &run_main, py::arg("argv"), py::arg("kernel") = py::none(),
        py::arg("capture_stderr") = false,
        "Runs `softmax-audit <argv[1:]>` (the check command); returns (exit code, the "
        "messages it wrote to std::cerr when capture_stderr, else '')");
  // Every declarable convention and the SA_CAP_* bit that declares it
  // (properties/conventions.cpp's table; the adapter reads it from here).
  py::dict conventions;
  for (const auto& name : sa::props::convention_names())
    conventions[py::str(name)] = sa::props::convention_flag(name);
  m.attr("CONVENTIONS") = conventions;
  m.def(
      "planned_properties",
      [](const std::optional<std::string>& spec_path) {
        sa::gate::GateSpec spec;
        try {
          if (spec_path) spec = sa::gate::load_gate_spec(*spec_path);
        } catch (const sa::gate::SpecError& e) {
          throw py::value_error(std::string("gate spec ") + e.what());
        }
        return sa::gate::planned_properties(spec.suite);
      },
      py::arg("spec") = py::none(),
      "The property ids `check` runs under this gate spec (None: the defaults), in run order");
  m.def(
      "gate_checks",
      [] {
        std::vector<std::string> ids(sa::gate::kReportedChecks.begin(),
                                     sa::gate::kReportedChecks.end());
        ids.push_back(sa::gate::kCoverage);
        return ids;
      },
      "The ids of the gate's own checks that a run reports beside the properties");
  m.def("python_name_error", &sa::cli::python_kernel_name_error,
        "Empty when the name is package.module:object, else what was expected");
}
