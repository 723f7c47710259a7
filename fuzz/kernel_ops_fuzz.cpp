// Fuzzes every operation of every built-in kernel (kernels/cpu, kernels/naive)
// through the C ABI, as a plugin is called: the bytes choose the kernel, the
// operation, the dtype (also values outside the enum), the shape (negative,
// zero, odd strides, a long row for the vector tails), the temperature or
// scale (0, negative, NaN, inf, tiny, huge) and the logits (any float32,
// bfloat16 or float16 bit pattern). Buffers are allocated to exactly what the shape
// needs (one element when the shape is invalid), so a read or write outside
// them is an AddressSanitizer report. Also checked: inputs are not written,
// and the gaps between output rows (stride > n) are left as they were.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "kernels/builtin.hpp"

namespace {

constexpr std::uint32_t kSentinel = 0x7fa5a5a5u;  // a NaN pattern no kernel writes by chance

// A buffer of `count` elements of `bytes_per` bytes each, filled from the
// fuzzer (inputs) or with the sentinel (outputs); never empty (count 0 -> 1).
struct Buffer {
  std::unique_ptr<std::uint8_t[]> mem;
  std::size_t bytes = 0;
  Buffer(std::size_t count, std::size_t bytes_per)
      : bytes(std::max<std::size_t>(count, 1) * bytes_per) {
    mem.reset(new std::uint8_t[bytes]);
    for (std::size_t i = 0; i + 4 <= bytes; i += 4) std::memcpy(&mem[i], &kSentinel, 4);
    for (std::size_t i = bytes & ~std::size_t{3}; i < bytes; ++i) mem[i] = 0xa5;
  }
  void fill(FuzzedDataProvider& fd) {
    const std::vector<std::uint8_t> b = fd.ConsumeBytes<std::uint8_t>(bytes);
    if (!b.empty()) std::memcpy(mem.get(), b.data(), b.size());
  }
  void* data() { return mem.get(); }
  float* f() { return reinterpret_cast<float*>(mem.get()); }
};

double pick_real(FuzzedDataProvider& fd) {
  static const double table[] = {1.0,  0.5, 2.0,      1e-30,     1e30,   0.0,
                                 -1.0, NAN, INFINITY, -INFINITY, 5e-324, 0.125};
  if (fd.ConsumeBool()) return fd.ConsumeFloatingPoint<double>();
  return table[fd.ConsumeIntegralInRange<int>(0, sizeof table / sizeof table[0] - 1)];
}

std::int64_t pick_len(FuzzedDataProvider& fd, std::int64_t small) {
  switch (fd.ConsumeIntegralInRange<int>(0, 7)) {
    case 0:
      return fd.ConsumeIntegralInRange<std::int64_t>(-2, 0);
    case 1:
      return fd.ConsumeIntegralInRange<std::int64_t>(257, 1100);  // vector tails, blocks
    default:
      return fd.ConsumeIntegralInRange<std::int64_t>(1, small);
  }
}

// Elements a rows x n buffer with this stride spans; -1 when the shape is
// invalid (the kernel must then refuse it and touch nothing).
std::int64_t span_of(std::int64_t rows, std::int64_t n, std::int64_t stride) {
  if (rows < 0 || n < 1 || stride < n) return -1;
  if (rows == 0) return 0;
  return (rows - 1) * stride + n;
}

void check_gaps(const Buffer& out, std::int64_t rows, std::int64_t n, std::int64_t stride,
                std::size_t elem) {
  if (span_of(rows, n, stride) < 0) return;
  if (out.bytes !=
      static_cast<std::size_t>(std::max<std::int64_t>(span_of(rows, n, stride), 1)) * elem)
    return;  // the shape was invalid: `out` is the one-element stand-in
  const Buffer fresh(out.bytes / elem, elem);  // as `out` was before the call
  for (std::int64_t r = 0; r + 1 < rows; ++r)
    for (std::int64_t i = n; i < stride; ++i) {
      const std::size_t at = static_cast<std::size_t>(r * stride + i) * elem;
      if (std::memcmp(&out.mem[at], &fresh.mem[at], elem) != 0) __builtin_trap();  // wrote a gap
    }
}

void rows_op(const sa_kernel& k, int op, FuzzedDataProvider& fd) {
  // 1 = SA_F32, 2 = SA_BF16, 3 = SA_F16, else invalid (4 = SA_FP8_E4M3: not a row type)
  const int dt = fd.ConsumeIntegralInRange<int>(0, 4);
  sa_dtype dtype;
  std::memcpy(&dtype, &dt, sizeof dt);
  const std::size_t elem = dt == SA_BF16 || dt == SA_F16 ? 2 : 4;
  sa_rows s{};
  s.rows = fd.ConsumeIntegralInRange<std::int64_t>(-1, 5);
  s.n = pick_len(fd, 40);
  s.in_stride = s.n + fd.ConsumeIntegralInRange<std::int64_t>(-1, 5);
  s.out_stride = s.n + fd.ConsumeIntegralInRange<std::int64_t>(-1, 5);
  s.temperature = pick_real(fd);
  const std::int64_t in_span = span_of(s.rows, s.n, s.in_stride);
  const std::int64_t out_span = span_of(s.rows, s.n, s.out_stride);
  // logsumexp and entropy write one value per row: out_stride is unused (kernel.h).
  const bool per_row_out = op == 2 || op == 3;
  const bool valid = in_span >= 0 && (per_row_out || out_span >= 0);
  const std::size_t per_row = valid ? static_cast<std::size_t>(s.rows) : 0;
  Buffer in(valid ? static_cast<std::size_t>(in_span) : 1, elem);
  in.fill(fd);
  const Buffer in_copy = [&] {
    Buffer c(valid ? static_cast<std::size_t>(in_span) : 1, elem);
    std::memcpy(c.data(), in.data(), in.bytes);
    return c;
  }();
  Buffer out(valid && !per_row_out ? static_cast<std::size_t>(out_span) : 1, elem);
  Buffer r1(per_row, 4), r2(per_row, 4);
  std::vector<sa_entropy_state> states(std::max<std::size_t>(per_row, 1));
  const bool with_optional = fd.ConsumeBool();
  switch (op) {
    case 0:
      k.softmax(k.ctx, dtype, &s, in.data(), out.data());
      break;
    case 1:
      k.log_softmax(k.ctx, dtype, &s, in.data(), out.data());
      break;
    case 2:
      k.logsumexp(k.ctx, dtype, &s, in.data(), r1.f());
      break;
    case 3:
      k.entropy(k.ctx, dtype, &s, in.data(), r1.f(), with_optional ? states.data() : nullptr);
      break;
    case 4:
      k.adaptive_softmax(k.ctx, dtype, &s, in.data(), out.data(), with_optional ? r1.f() : nullptr,
                         with_optional ? r2.f() : nullptr);
      break;
  }
  if (std::memcmp(in.data(), in_copy.mem.get(), in.bytes) != 0) __builtin_trap();  // wrote input
  if (op != 2 && op != 3) check_gaps(out, s.rows, s.n, s.out_stride, elem);
}

void attention_op(const sa_kernel& k, FuzzedDataProvider& fd) {
  sa_attention_args a{};
  const int dt = fd.ConsumeIntegralInRange<int>(0, 3);
  std::memcpy(&a.dtype, &dt, sizeof dt);
  const std::size_t elem = dt == SA_BF16 ? 2 : 4;
  a.nq = pick_len(fd, 12);
  a.nk = pick_len(fd, 12);
  a.d = pick_len(fd, 12);
  a.dv = pick_len(fd, 12);
  // nq x nk x d stays small enough for hundreds of runs a second; still past
  // every vector width and tail.
  a.nq = std::min<std::int64_t>(a.nq, 24);
  a.nk = std::min<std::int64_t>(a.nk, 300);
  a.d = std::min<std::int64_t>(a.d, 40);
  a.dv = std::min<std::int64_t>(a.dv, 40);
  a.q_stride = a.d + fd.ConsumeIntegralInRange<std::int64_t>(-1, 3);
  a.k_stride = a.d + fd.ConsumeIntegralInRange<std::int64_t>(-1, 3);
  a.v_stride = a.dv + fd.ConsumeIntegralInRange<std::int64_t>(-1, 3);
  a.out_stride = a.dv + fd.ConsumeIntegralInRange<std::int64_t>(-1, 3);
  a.scale = pick_real(fd);
  a.causal = fd.ConsumeBool();
  a.adaptive = fd.ConsumeBool();
  a.num_splits = fd.ConsumeIntegralInRange<std::int64_t>(-1, 5);
  const std::int64_t qs = span_of(a.nq, a.d, a.q_stride), ks = span_of(a.nk, a.d, a.k_stride),
                     vs = span_of(a.nk, a.dv, a.v_stride), os = span_of(a.nq, a.dv, a.out_stride);
  const bool valid = a.nq >= 1 && a.nk >= 1 && qs >= 0 && ks >= 0 && vs >= 0 && os >= 0;
  auto count = [&](std::int64_t x) { return valid ? static_cast<std::size_t>(x) : 1; };
  Buffer q(count(qs), elem), kk(count(ks), elem), v(count(vs), elem), out(count(os), elem);
  q.fill(fd), kk.fill(fd), v.fill(fd);
  Buffer lse(count(a.nq), 4), ent(count(a.nq), 4), beta(count(a.nq), 4);
  Buffer mask(count(a.nk), 1);
  mask.fill(fd);
  const std::uint8_t optional = fd.ConsumeIntegral<std::uint8_t>();
  a.q = q.data(), a.k = kk.data(), a.v = v.data(), a.out = out.data();
  a.lse = optional & 1 ? lse.f() : nullptr;
  a.entropy = optional & 2 ? ent.f() : nullptr;
  a.beta = optional & 4 ? beta.f() : nullptr;
  a.key_mask = optional & 8 ? mask.mem.get() : nullptr;
  k.attention(k.ctx, &a);
  check_gaps(out, a.nq, a.dv, a.out_stride, elem);
}

void merge_entropy_op(const sa_kernel& k, FuzzedDataProvider& fd) {
  const std::int64_t count = fd.ConsumeIntegralInRange<std::int64_t>(-1, 40);
  const std::size_t c = static_cast<std::size_t>(std::max<std::int64_t>(count, 1));
  Buffer a(c * 3, 4), b(c * 3, 4), out(c * 3, 4);
  a.fill(fd), b.fill(fd);
  const bool in_place = fd.ConsumeBool();
  auto* sa = reinterpret_cast<sa_entropy_state*>(a.data());
  auto* sb = reinterpret_cast<sa_entropy_state*>(b.data());
  k.merge_entropy_states(k.ctx, count, sa, sb,
                         in_place ? sa : reinterpret_cast<sa_entropy_state*>(out.data()));
}

void merge_attention_op(const sa_kernel& k, FuzzedDataProvider& fd) {
  const std::int64_t rows = fd.ConsumeIntegralInRange<std::int64_t>(-1, 8);
  const std::int64_t dv = fd.ConsumeIntegralInRange<std::int64_t>(-1, 70);
  const bool valid = rows >= 0 && dv >= 1;
  const std::size_t r = valid ? static_cast<std::size_t>(rows) : 1;
  const std::size_t o = valid ? static_cast<std::size_t>(rows * dv) : 1;
  Buffer oa(o, 4), la(r, 4), ob(o, 4), lb(r, 4), out(o, 4), out_lse(r, 4);
  oa.fill(fd), la.fill(fd), ob.fill(fd), lb.fill(fd);
  if (fd.ConsumeBool())  // out and out_lse may alias a and lse_a (the ABI says so)
    k.merge_attention_states(k.ctx, rows, dv, oa.f(), la.f(), ob.f(), lb.f(), oa.f(), la.f());
  else
    k.merge_attention_states(k.ctx, rows, dv, oa.f(), la.f(), ob.f(), lb.f(), out.f(), out_lse.f());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::vector<sa::Kernel> kernels = sa::builtin_kernels();
  FuzzedDataProvider fd(data, size);
  const sa::Kernel& kernel = kernels[fd.ConsumeIntegralInRange<std::size_t>(0, kernels.size() - 1)];
  if (kernel.memory() != SA_MEMORY_HOST) return 0;  // CUDA kernels: not fuzzed here
  const sa_kernel& k = kernel.raw();
  const int op = fd.ConsumeIntegralInRange<int>(0, 7);
  if (!(k.ops & (1u << op))) return 0;
  if (op <= 4)
    rows_op(k, op, fd);
  else if (op == 5)
    attention_op(k, fd);
  else if (op == 6)
    merge_entropy_op(k, fd);
  else
    merge_attention_op(k, fd);
  return 0;
}
