#include "kernels/kernel.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <utility>

#include "core/bfloat16.hpp"
#include "kernels/call_internal.hpp"
#include "kernels/call_log.hpp"
#include "core/float16.hpp"

namespace sa {

const char* name_of(Op op) {
  switch (op) {
    case Op::softmax:
      return "softmax";
    case Op::log_softmax:
      return "log_softmax";
    case Op::logsumexp:
      return "logsumexp";
    case Op::entropy:
      return "entropy";
    case Op::adaptive_softmax:
      return "adaptive_softmax";
    case Op::attention:
      return "attention";
    case Op::merge_entropy_states:
      return "merge_entropy_states";
    case Op::merge_attention_states:
      return "merge_attention_states";
    case Op::attention_v2:
      return "attention_v2";
    case Op::softmax_backward:
      return "softmax_backward";
    case Op::log_softmax_backward:
      return "log_softmax_backward";
    case Op::attention_backward:
      return "attention_backward";
    case Op::merge_attention_states_n:
      return "merge_attention_states_n";
  }
  return "?";
}

std::optional<Op> parse_op(std::string_view s) {
  for (Op op : all_interface_ops)
    if (s == name_of(op)) return op;
  return std::nullopt;
}

std::uint32_t op_bit(Op op) { return 1u << static_cast<unsigned>(op); }

sa_dtype to_abi(DType t) {
  if (t == DType::float32) return SA_F32;
  if (t == DType::bfloat16) return SA_BF16;
  if (t == DType::float16) return SA_F16;
  throw std::invalid_argument(std::string("kernel interface: dtype ") + name_of(t) +
                              " is not one the interface carries (float32, bfloat16, float16)");
}

RowBatch RowBatch::single(std::vector<float> row) {
  RowBatch b;
  b.rows = 1;
  b.n = static_cast<std::int64_t>(row.size());
  b.stride = b.n;
  b.data = std::move(row);
  return b;
}

namespace {

const char* const op_fields[] = {"softmax",
                                 "log_softmax",
                                 "logsumexp",
                                 "entropy",
                                 "adaptive_softmax",
                                 "attention",
                                 "merge_entropy_states",
                                 "merge_attention_states",
                                 "attention_v2",
                                 "softmax_backward",
                                 "log_softmax_backward",
                                 "attention_backward",
                                 "merge_attention_states_n"};

bool has_pointer(const sa_kernel& k, Op op) {
  switch (op) {
    case Op::softmax:
      return k.softmax != nullptr;
    case Op::log_softmax:
      return k.log_softmax != nullptr;
    case Op::logsumexp:
      return k.logsumexp != nullptr;
    case Op::entropy:
      return k.entropy != nullptr;
    case Op::adaptive_softmax:
      return k.adaptive_softmax != nullptr;
    case Op::attention:
      return k.attention != nullptr;
    case Op::merge_entropy_states:
      return k.merge_entropy_states != nullptr;
    case Op::merge_attention_states:
      return k.merge_attention_states != nullptr;
    // Version 2 fields: the caller reads them only from version 2 kernels.
    case Op::attention_v2:
      return k.attention_v2 != nullptr;
    case Op::softmax_backward:
      return k.softmax_backward != nullptr;
    case Op::log_softmax_backward:
      return k.log_softmax_backward != nullptr;
    case Op::attention_backward:
      return k.attention_backward != nullptr;
    case Op::merge_attention_states_n:
      return k.merge_attention_states_n != nullptr;
  }
  return false;
}

// Element storage handed to the kernel: float32 as is, bfloat16 and float16
// packed into 16-bit words (`half` says which of the two).
struct Packed {
  bool bf16 = false;  // 16-bit storage (bfloat16 or float16)
  bool half = false;  // the 16-bit storage is float16
  std::vector<float> f32;
  std::vector<std::uint16_t> b16;
  const void* data() const { return bf16 ? static_cast<const void*>(b16.data()) : f32.data(); }
  void* data() { return bf16 ? static_cast<void*>(b16.data()) : f32.data(); }
  std::size_t bytes() const { return bf16 ? b16.size() * 2 : f32.size() * 4; }
};

Packed pack(DType t, std::span<const float> v, const char* what) {
  Packed p;
  if (t == DType::float32) {
    p.f32.assign(v.begin(), v.end());
    return p;
  }
  p.bf16 = true;
  p.half = t == DType::float16;
  p.b16.resize(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    const float x = v[i];
    const float r = p.half ? round_to_f16(x) : round_to_bf16(x);
    if (!std::isnan(x) && r != x)
      throw std::invalid_argument(std::string("kernel call: ") + what + "[" + std::to_string(i) +
                                  "] = " + std::to_string(x) + " is not a " + name_of(t) +
                                  " value; round inputs before the call");
    p.b16[i] = p.half ? f16_from_float(x) : bf16_from_float(x);
  }
  return p;
}

Packed blank(DType t, std::size_t count) {
  Packed p;
  p.bf16 = t != DType::float32;
  p.half = t == DType::float16;
  if (p.bf16)
    p.b16.assign(count, p.half ? 0x7e00 : 0x7fc0);  // NaN until written
  else
    p.f32.assign(count, NAN);
  return p;
}

std::vector<float> unpack(const Packed& p) {
  if (!p.bf16) return p.f32;
  std::vector<float> out(p.b16.size());
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = p.half ? float_from_f16(p.b16[i]) : float_from_bf16(p.b16[i]);
  return out;
}

// The output row stride of a call (RowBatch::out_stride, in_place).
std::int64_t out_stride_of(const RowBatch& in) {
  return in.in_place ? in.stride : in.out_stride > 0 ? in.out_stride : in.stride;
}

// The call's shape; out_dtype (ABI version 2) is the input's type: the suite
// does not ask for mixed-precision row outputs yet.
sa_rows shape_of(const RowBatch& in, double temperature, DType t) {
  if (in.stride < in.n || static_cast<std::int64_t>(in.data.size()) < in.rows * in.stride)
    throw std::invalid_argument("kernel call: row batch of " + std::to_string(in.rows) + " x " +
                                std::to_string(in.n) + " with stride " + std::to_string(in.stride) +
                                " needs " + std::to_string(in.rows * in.stride) + " values, has " +
                                std::to_string(in.data.size()));
  if (out_stride_of(in) < in.n)
    throw std::invalid_argument("kernel call: output stride " + std::to_string(in.out_stride) +
                                " < n = " + std::to_string(in.n));
  return sa_rows{in.rows, in.n, in.stride, out_stride_of(in), temperature, to_abi(t)};
}

// Rows of `v` (row stride `from`) in a vector of row stride `to`, NaN between rows.
std::vector<float> relayout(const std::vector<float>& v, std::int64_t rows, std::int64_t n,
                            std::int64_t from, std::int64_t to) {
  if (from == to) return v;
  std::vector<float> out(static_cast<std::size_t>(rows * to), NAN);
  for (std::int64_t r = 0; r < rows; ++r)
    std::copy_n(v.begin() + r * from, n, out.begin() + r * to);
  return out;
}

// Throws when the kernel changed an element outside the rows of its output
// (between rows of a stride > n, or after the last row's n elements).
void check_gaps(const std::string& kernel, const char* op, const Packed& before,
                const Packed& after, std::int64_t rows, std::int64_t n, std::int64_t stride) {
  const std::size_t total = after.bf16 ? after.b16.size() : after.f32.size();
  for (std::size_t i = 0; i < total; ++i) {
    const auto r = static_cast<std::int64_t>(i) / stride, c = static_cast<std::int64_t>(i) % stride;
    if (c < n && r < rows) continue;
    const bool same = after.bf16 ? before.b16[i] == after.b16[i]
                                 : std::memcmp(&before.f32[i], &after.f32[i], 4) == 0;
    if (!same)
      throw KernelError(SA_INTERNAL_ERROR,
                        "kernel '" + kernel + "' " + op + " wrote element " + std::to_string(c) +
                            " of output row " + std::to_string(r) + " (n = " + std::to_string(n) +
                            ", out_stride = " + std::to_string(stride) +
                            "): outside the row (kernel.h: row r of out is out[r*out_stride .. "
                            "r*out_stride + n))");
  }
}

}  // namespace

namespace {
// The value of an enum field as its underlying integer, without loading it as the enum.
template <class E>
std::underlying_type_t<E> raw_enum(const E& field) {
  std::underlying_type_t<E> v;
  std::memcpy(&v, &field, sizeof v);
  return v;
}
}  // namespace

Kernel::Kernel(const sa_kernel* k, std::string origin, std::shared_ptr<void> library)
    : k_(k), origin_(std::move(origin)), library_(std::move(library)) {
  const std::string where = "kernel from " + origin_;
  if (k_ == nullptr) throw std::invalid_argument(where + ": the entry point returned NULL");
  // Version 1 kernels are read up to SA_KERNEL_V1_SIZE and are exactly what
  // they were; version 2 and later up to this header's sizeof(sa_kernel)
  // (a later version only appends fields).
  if (k_->abi_version == 1) {
    if (k_->struct_size != SA_KERNEL_V1_SIZE)
      throw std::invalid_argument(where + ": ABI version 1 with sa_kernel of " +
                                  std::to_string(k_->struct_size) + " bytes, expected " +
                                  std::to_string(SA_KERNEL_V1_SIZE) +
                                  " (the version 1 layout of softmax_audit/kernel.h)");
  } else if (k_->abi_version >= 2) {
    if (k_->struct_size < sizeof(sa_kernel))
      throw std::invalid_argument(where + ": ABI version " + std::to_string(k_->abi_version) +
                                  " with sa_kernel of " + std::to_string(k_->struct_size) +
                                  " bytes, expected at least " + std::to_string(sizeof(sa_kernel)) +
                                  " (rebuild against this softmax_audit/kernel.h)");
    if (k_->abi_version > SA_KERNEL_ABI_VERSION)
      throw std::invalid_argument(where + ": ABI version " + std::to_string(k_->abi_version) +
                                  " is newer than this softmax-audit's " +
                                  std::to_string(SA_KERNEL_ABI_VERSION) +
                                  " (upgrade softmax-audit, or build the kernel against version " +
                                  std::to_string(SA_KERNEL_ABI_VERSION) + ")");
  } else {
    throw std::invalid_argument(where + ": ABI version " + std::to_string(k_->abi_version) +
                                ", expected 1 or " + std::to_string(SA_KERNEL_ABI_VERSION) +
                                " (build against softmax_audit/kernel.h)");
  }
  abi_ = k_->abi_version;
  if (k_->name == nullptr || k_->name[0] == '\0')
    throw std::invalid_argument(where + ": sa_kernel.name is empty; expected a name");
  // The name is printed in terminals and CI logs and written into every
  // output: a control character (a newline could fake a PASS line) is refused.
  const std::size_t name_len = strnlen(k_->name, 257);
  if (name_len > 256)
    throw std::invalid_argument(where + ": sa_kernel.name is longer than 256 bytes");
  for (std::size_t i = 0; i < name_len; ++i) {
    const unsigned char c = static_cast<unsigned char>(k_->name[i]);
    if (c < 0x20 || c == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02x", c);
      throw std::invalid_argument(where + ": sa_kernel.name holds the control character " + hex +
                                  " at byte " + std::to_string(i) +
                                  "; expected printable text (it is printed in logs)");
    }
  }
  name_ = k_->name;
  // The enum fields hold whatever the plugin's bytes say; loading a value
  // outside an enum's range as the enum is undefined behaviour (found by
  // fuzz/descriptor), so they are read as integers until checked.
  const auto memory = raw_enum(k_->memory);
  if (memory != SA_MEMORY_HOST && memory != SA_MEMORY_CUDA)
    throw std::invalid_argument(where + " '" + name_ + "': memory is " + std::to_string(memory) +
                                ", expected SA_MEMORY_HOST (0) or SA_MEMORY_CUDA (1)");
  const auto entropy = raw_enum(k_->adaptive_entropy);
  if (entropy != SA_ENTROPY_SHANNON && entropy != SA_ENTROPY_PAPER_EPS)
    throw std::invalid_argument(where + " '" + name_ + "': adaptive_entropy is " +
                                std::to_string(entropy) +
                                ", expected SA_ENTROPY_SHANNON (0) or SA_ENTROPY_PAPER_EPS (1)");
  if ((k_->dtypes & (SA_DTYPE_F32 | SA_DTYPE_BF16 | SA_DTYPE_F16)) == 0)
    throw std::invalid_argument(where + " '" + name_ + "': dtypes names no supported type");
  for (Op op : all_interface_ops) {
    const bool claimed = (k_->ops & op_bit(op)) != 0;
    if (abi_ < 2 && op_bit(op) >= op_bit(Op::attention_v2)) {
      if (claimed)
        throw std::invalid_argument(where + " '" + name_ + "': ops claims " +
                                    op_fields[static_cast<int>(op)] +
                                    ", which ABI version 1 does not have");
      continue;
    }
    if (claimed != has_pointer(*k_, op))
      throw std::invalid_argument(where + " '" + name_ + "': ops " +
                                  (claimed ? "claims " : "does not claim ") +
                                  op_fields[static_cast<int>(op)] +
                                  " but the function pointer is " + (claimed ? "NULL" : "set"));
  }
}

std::string Kernel::description() const { return k_->description ? k_->description : ""; }
bool Kernel::supports(Op op) const {
  if (abi_ < 2 && op_bit(op) >= op_bit(Op::attention_v2)) return false;
  return (k_->ops & op_bit(op)) != 0;
}
bool Kernel::supports(DType t) const {
  if (t == DType::float32) return (k_->dtypes & SA_DTYPE_F32) != 0;
  if (t == DType::bfloat16) return (k_->dtypes & SA_DTYPE_BF16) != 0;
  if (t == DType::float16) return (k_->dtypes & SA_DTYPE_F16) != 0;
  return false;
}

namespace detail {
// `s` is whatever the kernel returned: read as an integer (a status outside
// the enum is undefined behaviour to load as sa_status; found by
// fuzz/descriptor) and reported as SA_INTERNAL_ERROR with its number.
std::atomic<std::int64_t> g_kernel_call_ns{0};  // kernel_call_seconds(), in nanoseconds

void add_kernel_call_time(std::int64_t ns) {
  g_kernel_call_ns.fetch_add(ns, std::memory_order_relaxed);
}

void check_status(const Kernel& k, sa_status s, Op op) {
  const int si = raw_enum(s);
  if (si == SA_OK) return;
  const char* text = k.raw().last_error ? k.raw().last_error(k.raw().ctx) : nullptr;
  static const char* const names[] = {"SA_OK", "SA_INVALID_ARGUMENT", "SA_UNSUPPORTED",
                                      "SA_INTERNAL_ERROR"};
  const sa_status known = si > 0 && si < 4 ? static_cast<sa_status>(si) : SA_INTERNAL_ERROR;
  throw KernelError(known, "kernel '" + k.name() + "' " + name_of(op) + " returned " +
                               (si >= 0 && si < 4 ? names[si] : std::to_string(si)) +
                               (text ? std::string(": ") + text : std::string()));
}
}  // namespace detail

double kernel_call_seconds() {
  return static_cast<double>(detail::g_kernel_call_ns.load(std::memory_order_relaxed)) * 1e-9;
}

namespace {
using detail::check_status;
using detail::Stage;
void require(const Kernel& k, Op op, DType t) {
  if (!k.supports(op))
    throw KernelError(SA_UNSUPPORTED,
                      "kernel '" + k.name() + "' does not implement " + name_of(op));
  if (!k.supports(t))
    throw KernelError(SA_UNSUPPORTED,
                      "kernel '" + k.name() + "' does not support " + std::string(name_of(t)));
}
}  // namespace

namespace {
// kernel.h: cases outside the capabilities are not applicable, never run.
void require_within_max_n(const Kernel& k, Op op, const RowBatch& in) {
  const std::int64_t max = k.max_n();
  if (max > 0 && in.n > max)
    throw NotApplicable("kernel '" + k.name() + "' " + name_of(op) +
                        ": n = " + std::to_string(in.n) + " > max_n " + std::to_string(max));
}
}  // namespace

namespace {
// Rows x n of a result laid out with row stride `stride` (a recorded call's got).
std::vector<float> compact_rows(const std::vector<float>& v, std::int64_t rows, std::int64_t n,
                                std::int64_t stride) {
  std::vector<float> r;
  r.reserve(static_cast<std::size_t>(rows * n));
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < n; ++j) r.push_back(v[static_cast<std::size_t>(i * stride + j)]);
  return r;
}
// Records a row operation's call (call_log.hpp) with what it returned.
void record_rows(Op op, DType t, const RowBatch& in, const sa_rows& shape, double temperature,
                 std::vector<call_log::Array> got) {
  if (in.data.size() > call_log::kMaxRecordedElements) return;
  call_log::Call c = call_log::rows_call(name_of(op), t, in.rows, in.n, in.stride, shape.out_stride,
                                         in.in_place, temperature, in.data);
  c.got = std::move(got);
  call_log::record(std::move(c));
}
}  // namespace

std::int64_t Kernel::max_n() const {
  return abi_ >= 2 && k_->capabilities && k_->capabilities->max_n > 0 ? k_->capabilities->max_n : 0;
}

namespace {
using RowsToRows = sa_status (*)(void*, sa_dtype, const sa_rows*, const void*, void*);

// softmax and log_softmax: rows in, rows of the same layout out.
std::vector<float> rows_to_rows(const Kernel& k, Op op, RowsToRows fn, DType t, const RowBatch& in,
                                double temperature) {
  require(k, op, t);
  require_within_max_n(k, op, in);
  const sa_rows shape = shape_of(in, temperature, t);
  Packed x = pack(t, in.data, "logits");
  Packed y = in.in_place ? x : blank(t, static_cast<std::size_t>(in.rows * shape.out_stride));
  const Packed y0 = y;
  Packed& res = in.in_place ? x : y;
  Stage st(k.memory());
  void* dx = in.in_place ? st.out(x.data(), x.bytes()) : st.in(x.data(), x.bytes());
  void* dy = in.in_place ? dx : st.out(y.data(), y.bytes());
  check_status(k, detail::timed_call([&] { return fn(k.raw().ctx, to_abi(t), &shape, dx, dy); }),
               op);
  st.fetch();
  check_gaps(k.name(), name_of(op), y0, res, in.rows, in.n, shape.out_stride);
  std::vector<float> r = relayout(unpack(res), in.rows, in.n, shape.out_stride, in.stride);
  if (call_log::recording())
    record_rows(
        op, t, in, shape, temperature,
        {call_log::floats("out", {in.rows, in.n}, compact_rows(r, in.rows, in.n, in.stride))});
  return r;
}
}  // namespace

std::vector<float> Kernel::softmax(DType t, const RowBatch& in, double temperature) const {
  return rows_to_rows(*this, Op::softmax, k_->softmax, t, in, temperature);
}

std::vector<float> Kernel::log_softmax(DType t, const RowBatch& in, double temperature) const {
  return rows_to_rows(*this, Op::log_softmax, k_->log_softmax, t, in, temperature);
}

namespace {
using RowsBackward = sa_status (*)(void*, sa_dtype, const sa_rows*, const void*, const void*,
                                   void*);

// softmax_backward and log_softmax_backward: y and dy in the batch's layout, dx out.
std::vector<float> rows_backward(const Kernel& k, Op op, RowsBackward fn, DType t,
                                 const RowBatch& in, std::span<const float> dy,
                                 double temperature) {
  require(k, op, t);
  require_within_max_n(k, op, in);
  const sa_capabilities* cap = k.raw().capabilities;
  const std::uint32_t types = cap ? cap->op_dtypes[static_cast<int>(op)] : 0;
  if (types != 0 && (types & (t == DType::float32    ? SA_DTYPE_F32
                              : t == DType::bfloat16 ? SA_DTYPE_BF16
                                                     : SA_DTYPE_F16)) == 0)
    throw KernelError(SA_UNSUPPORTED, "kernel '" + k.name() + "' does not declare " + name_of(t) +
                                          " for " + name_of(op));
  // in_place: dx is written over dy (kernel.h: dx may equal dy), so dx has
  // dy's layout (out_stride = stride).
  const sa_rows shape = shape_of(in, temperature, t);
  if (dy.size() != in.data.size())
    throw std::invalid_argument(std::string(name_of(op)) + " call: dy has " +
                                std::to_string(dy.size()) + " values, expected " +
                                std::to_string(in.data.size()) + " (the layout of y)");
  Packed y = pack(t, in.data, "y");
  Packed g = pack(t, dy, "dy");
  Packed x = in.in_place ? g : blank(t, static_cast<std::size_t>(in.rows * shape.out_stride));
  const Packed x0 = x;
  Packed& res = in.in_place ? g : x;
  Stage st(k.memory());
  void* py = st.in(y.data(), y.bytes());
  void* pg = in.in_place ? st.out(g.data(), g.bytes()) : st.in(g.data(), g.bytes());
  void* px = in.in_place ? pg : st.out(x.data(), x.bytes());
  check_status(
      k, detail::timed_call([&] { return fn(k.raw().ctx, to_abi(t), &shape, py, pg, px); }), op);
  st.fetch();
  check_gaps(k.name(), name_of(op), x0, res, in.rows, in.n, shape.out_stride);
  std::vector<float> r = relayout(unpack(res), in.rows, in.n, shape.out_stride, in.stride);
  if (call_log::recording() && 2 * in.data.size() <= call_log::kMaxRecordedElements) {
    call_log::Call c = call_log::rows_call(name_of(op), t, in.rows, in.n, in.stride,
                                           shape.out_stride, in.in_place, temperature, in.data);
    c.inputs[0].name = "y";
    c.inputs.push_back(call_log::floats("dy", {in.rows, in.stride}, {dy.begin(), dy.end()}));
    c.got.push_back(
        call_log::floats("dx", {in.rows, in.n}, compact_rows(r, in.rows, in.n, in.stride)));
    call_log::record(std::move(c));
  }
  return r;
}
}  // namespace

std::vector<float> Kernel::softmax_backward(DType t, const RowBatch& y, std::span<const float> dy,
                                            double temperature) const {
  return rows_backward(*this, Op::softmax_backward, k_->softmax_backward, t, y, dy, temperature);
}

std::vector<float> Kernel::log_softmax_backward(DType t, const RowBatch& y,
                                                std::span<const float> dy,
                                                double temperature) const {
  return rows_backward(*this, Op::log_softmax_backward, k_->log_softmax_backward, t, y, dy,
                       temperature);
}

bool Kernel::claims(std::uint32_t cap_flag) const {
  return abi_ >= 2 && k_->capabilities && (k_->capabilities->flags & cap_flag) != 0;
}

std::vector<float> Kernel::logsumexp(DType t, const RowBatch& in, double temperature) const {
  require(*this, Op::logsumexp, t);
  require_within_max_n(*this, Op::logsumexp, in);
  const sa_rows shape = shape_of(in, temperature, t);
  Packed x = pack(t, in.data, "logits");
  std::vector<float> lse(static_cast<std::size_t>(in.rows), NAN);
  Stage st(memory());
  void* dx = st.in(x.data(), x.bytes());
  auto* dl = static_cast<float*>(st.out(lse.data(), lse.size() * 4));
  check_status(
      *this, detail::timed_call([&] { return k_->logsumexp(k_->ctx, to_abi(t), &shape, dx, dl); }),
      Op::logsumexp);
  st.fetch();
  if (call_log::recording())
    record_rows(Op::logsumexp, t, in, shape, temperature,
                {call_log::floats("lse", {in.rows}, lse)});
  return lse;
}

std::vector<float> Kernel::entropy(DType t, const RowBatch& in, double temperature,
                                   std::vector<sa_entropy_state>* states) const {
  require(*this, Op::entropy, t);
  require_within_max_n(*this, Op::entropy, in);
  const sa_rows shape = shape_of(in, temperature, t);
  Packed x = pack(t, in.data, "logits");
  std::vector<float> H(static_cast<std::size_t>(in.rows), NAN);
  if (states) states->assign(static_cast<std::size_t>(in.rows), sa_entropy_state{NAN, NAN, NAN});
  Stage st(memory());
  void* dx = st.in(x.data(), x.bytes());
  auto* dH = static_cast<float*>(st.out(H.data(), H.size() * 4));
  auto* ds = states ? static_cast<sa_entropy_state*>(
                          st.out(states->data(), states->size() * sizeof(sa_entropy_state)))
                    : nullptr;
  check_status(*this, detail::timed_call([&] {
    return k_->entropy(k_->ctx, to_abi(t), &shape, dx, dH, ds);
  }),
               Op::entropy);
  st.fetch();
  if (call_log::recording())
    record_rows(Op::entropy, t, in, shape, temperature,
                {call_log::floats("entropy", {in.rows}, H)});
  return H;
}

AdaptiveOutput Kernel::adaptive_softmax(DType t, const RowBatch& in, double temperature) const {
  require(*this, Op::adaptive_softmax, t);
  require_within_max_n(*this, Op::adaptive_softmax, in);
  const sa_rows shape = shape_of(in, temperature, t);
  Packed x = pack(t, in.data, "logits");
  Packed y = in.in_place ? x : blank(t, static_cast<std::size_t>(in.rows * shape.out_stride));
  const Packed y0 = y;
  Packed& res = in.in_place ? x : y;
  AdaptiveOutput r;
  r.beta.assign(static_cast<std::size_t>(in.rows), NAN);
  r.entropy.assign(static_cast<std::size_t>(in.rows), NAN);
  Stage st(memory());
  void* dx = in.in_place ? st.out(x.data(), x.bytes()) : st.in(x.data(), x.bytes());
  void* dy = in.in_place ? dx : st.out(y.data(), y.bytes());
  auto* db = static_cast<float*>(st.out(r.beta.data(), r.beta.size() * 4));
  auto* dh = static_cast<float*>(st.out(r.entropy.data(), r.entropy.size() * 4));
  check_status(*this, detail::timed_call([&] {
    return k_->adaptive_softmax(k_->ctx, to_abi(t), &shape, dx, dy, db, dh);
  }),
               Op::adaptive_softmax);
  st.fetch();
  check_gaps(name_, "adaptive_softmax", y0, res, in.rows, in.n, shape.out_stride);
  r.weights = relayout(unpack(res), in.rows, in.n, shape.out_stride, in.stride);
  if (call_log::recording())
    record_rows(Op::adaptive_softmax, t, in, shape, temperature,
                {call_log::floats("out", {in.rows, in.n},
                                  compact_rows(r.weights, in.rows, in.n, in.stride)),
                 call_log::floats("beta", {in.rows}, r.beta),
                 call_log::floats("entropy", {in.rows}, r.entropy)});
  return r;
}

std::vector<sa_entropy_state> Kernel::merge_entropy_states(
    std::span<const sa_entropy_state> a, std::span<const sa_entropy_state> b) const {
  if (!supports(Op::merge_entropy_states))
    throw KernelError(SA_UNSUPPORTED,
                      "kernel '" + name_ + "' does not implement merge_entropy_states");
  if (a.size() != b.size())
    throw std::invalid_argument("merge_entropy_states: a has " + std::to_string(a.size()) +
                                " states, b has " + std::to_string(b.size()));
  std::vector<sa_entropy_state> out(a.size(), sa_entropy_state{NAN, NAN, NAN});
  const std::size_t bytes = a.size() * sizeof(sa_entropy_state);
  Stage st(memory());
  auto* da = static_cast<const sa_entropy_state*>(st.in(a.data(), bytes));
  auto* db = static_cast<const sa_entropy_state*>(st.in(b.data(), bytes));
  auto* dout = static_cast<sa_entropy_state*>(st.out(out.data(), bytes));
  check_status(*this, detail::timed_call([&] {
    return k_->merge_entropy_states(k_->ctx, static_cast<std::int64_t>(a.size()), da, db, dout);
  }),
               Op::merge_entropy_states);
  st.fetch();
  return out;
}

std::vector<float> Kernel::merge_attention_states(std::int64_t rows, std::int64_t dv,
                                                  std::span<const float> o_a,
                                                  std::span<const float> lse_a,
                                                  std::span<const float> o_b,
                                                  std::span<const float> lse_b,
                                                  std::vector<float>* out_lse, bool alias_a) const {
  if (!supports(Op::merge_attention_states))
    throw KernelError(SA_UNSUPPORTED,
                      "kernel '" + name_ + "' does not implement merge_attention_states");
  const auto need = static_cast<std::size_t>(rows * dv);
  if (o_a.size() != need || o_b.size() != need || lse_a.size() != static_cast<std::size_t>(rows) ||
      lse_b.size() != static_cast<std::size_t>(rows))
    throw std::invalid_argument(
        "merge_attention_states: expected outputs of rows*dv = " + std::to_string(need) +
        " values and " + std::to_string(rows) + " lse values per part");
  std::vector<float> out(need, NAN), lse(static_cast<std::size_t>(rows), NAN);
  if (alias_a) {  // out and out_lse are o_a and lse_a themselves (kernel.h allows it)
    out.assign(o_a.begin(), o_a.end());
    lse.assign(lse_a.begin(), lse_a.end());
  }
  Stage st(memory());
  auto* o = static_cast<float*>(st.out(out.data(), need * 4));
  auto* l = static_cast<float*>(st.out(lse.data(), lse.size() * 4));
  auto* a = alias_a ? o : static_cast<const float*>(st.in(o_a.data(), need * 4));
  auto* la = alias_a ? l : static_cast<const float*>(st.in(lse_a.data(), lse.size() * 4));
  auto* b = static_cast<const float*>(st.in(o_b.data(), need * 4));
  auto* lb = static_cast<const float*>(st.in(lse_b.data(), lse.size() * 4));
  check_status(*this, detail::timed_call([&] {
    return k_->merge_attention_states(k_->ctx, rows, dv, a, la, b, lb, o, l);
  }),
               Op::merge_attention_states);
  st.fetch();
  if (out_lse) *out_lse = std::move(lse);
  return out;
}

namespace {
std::shared_ptr<void> open_library(const std::string& path) {
  dlerror();
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    throw std::invalid_argument(
        "plugin " + path + ": cannot load it (" + (e ? e : "unknown error") +
        "); expected a shared library built against softmax_audit/kernel.h");
  }
  return std::shared_ptr<void>(h, [](void* p) { dlclose(p); });
}
}  // namespace

Kernel load_plugin(const std::string& path, int index) {
  auto lib = open_library(path);
  if (index < 0) {
    auto entry = reinterpret_cast<sa_kernel_entry_fn>(dlsym(lib.get(), "sa_kernel_entry"));
    if (!entry) {
      auto at = reinterpret_cast<sa_kernel_entry_at_fn>(dlsym(lib.get(), "sa_kernel_entry_at"));
      if (!at)
        throw std::invalid_argument(
            "plugin " + path +
            ": exports neither sa_kernel_entry nor sa_kernel_entry_at; "
            "expected `const sa_kernel* sa_kernel_entry(void)` with C linkage");
      return Kernel(at(0), path, lib);
    }
    return Kernel(entry(), path, lib);
  }
  auto at = reinterpret_cast<sa_kernel_entry_at_fn>(dlsym(lib.get(), "sa_kernel_entry_at"));
  if (!at)
    throw std::invalid_argument("plugin " + path + ": kernel index " + std::to_string(index) +
                                " requested but sa_kernel_entry_at is not exported");
  const sa_kernel* k = at(index);
  if (!k)
    throw std::invalid_argument("plugin " + path + ": no kernel at index " + std::to_string(index));
  return Kernel(k, path, lib);
}

std::vector<Kernel> load_plugin_all(const std::string& path) {
  auto lib = open_library(path);
  std::vector<Kernel> out;
  if (auto at = reinterpret_cast<sa_kernel_entry_at_fn>(dlsym(lib.get(), "sa_kernel_entry_at"))) {
    for (int i = 0; i < 1024; ++i) {
      const sa_kernel* k = at(i);
      if (!k) break;
      out.emplace_back(k, path, lib);
    }
    if (!out.empty()) return out;
  }
  out.push_back(load_plugin(path));
  return out;
}

}  // namespace sa
