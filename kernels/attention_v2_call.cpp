// sa::Kernel::attention_v2: lays an AttentionCase out the way the case asks
// (BSHD or BHSD, padded strides, varlen), stages it, calls the kernel's
// attention_v2, checks that nothing outside the output rows was written, and
// returns the results packed BSHD. Cases outside the kernel's capabilities
// throw NotApplicable before any call.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#include "core/bfloat16.hpp"
#include "core/float16.hpp"
#include "core/fp8.hpp"
#include "core/quant.hpp"
#include "kernels/call_internal.hpp"
#include "kernels/call_log.hpp"
#include "kernels/kernel.hpp"

namespace sa {
namespace {

sa_dtype abi_of(AttnType t) {
  switch (t) {
    case AttnType::float32:
      return SA_F32;
    case AttnType::bfloat16:
      return SA_BF16;
    case AttnType::float16:
      return SA_F16;
    case AttnType::fp8_e4m3:
      return SA_FP8_E4M3;
    case AttnType::fp8_e5m2:
      return SA_FP8_E5M2;
    case AttnType::fp4_e2m1:
      return SA_FP4_E2M1;
    case AttnType::int8:
      return SA_INT8;
  }
  return SA_F32;
}

std::uint32_t bit_of(AttnType t) {
  switch (t) {
    case AttnType::float32:
      return SA_DTYPE_F32;
    case AttnType::bfloat16:
      return SA_DTYPE_BF16;
    case AttnType::float16:
      return SA_DTYPE_F16;
    case AttnType::fp8_e4m3:
      return SA_DTYPE_FP8_E4M3;
    case AttnType::fp8_e5m2:
      return SA_DTYPE_FP8_E5M2;
    case AttnType::fp4_e2m1:
      return SA_DTYPE_FP4_E2M1;
    case AttnType::int8:
      return SA_DTYPE_INT8;
  }
  return 0;
}

// Bytes per element (fp4 e2m1: bytes_of, two elements per byte).
std::size_t size_of(AttnType t) {
  return t == AttnType::float32 ? 4 : (t == AttnType::bfloat16 || t == AttnType::float16) ? 2 : 1;
}
// Bytes of n elements.
std::size_t bytes_of(AttnType t, std::size_t n) {
  return t == AttnType::fp4_e2m1 ? (n + 1) / 2 : n * size_of(t);
}

// The bytes of a buffer: a vector, or for a large page pool
// (kLargePoolBytes) a sparse reservation of which only [live_from, n) is
// memory. The reservation also covers live_from bytes before the buffer's
// start, where an offset computed in 32 bits lands once it wraps (an offset
// between 2^31 and 2^32 elements becomes negative). This process maps the
// rest as zero pages (readable, never memory), so a kernel called in this
// process reads zeros there rather than crashing the suite; the gate's guard
// (gate/guard.cpp) leaves all of it inaccessible to the kernel.
class Bytes {
 public:
  explicit Bytes(std::size_t n) : vec_(n), p_(vec_.data()), n_(n) {}
  Bytes(std::size_t n, std::size_t live_from) : n_(n), live_(live_from) {
    const std::size_t P = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    const std::size_t head = (live_from + P - 1) / P * P, total = head + (n + P - 1) / P * P;
    void* m = mmap(nullptr, total, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
      throw std::runtime_error("attention call: cannot reserve " + std::to_string(total >> 20) +
                               " MiB of address space for a large page pool");
    map_ = std::shared_ptr<void>(m, [total](void* q) { munmap(q, total); });
    p_ = static_cast<unsigned char*>(m) + head;
    unsigned char* live = p_ + live_from / P * P;
    if (mprotect(live, static_cast<std::size_t>(static_cast<unsigned char*>(m) + total - live),
                 PROT_READ | PROT_WRITE) != 0)
      throw std::runtime_error("attention call: cannot map a large page pool's pages");
  }
  Bytes(const Bytes& o) : vec_(o.vec_), map_(o.map_), n_(o.n_), live_(o.live_) {
    p_ = map_ ? o.p_ : vec_.data();
  }
  Bytes& operator=(const Bytes&) = delete;
  unsigned char& operator[](std::size_t i) { return p_[i]; }
  const unsigned char& operator[](std::size_t i) const { return p_[i]; }
  unsigned char* data() { return p_; }
  const unsigned char* data() const { return p_; }
  std::size_t size() const { return n_; }
  std::size_t live_from() const { return live_; }

 private:
  std::vector<unsigned char> vec_;
  std::shared_ptr<void> map_;  // the sparse reservation, or null
  unsigned char* p_ = nullptr;
  std::size_t n_ = 0, live_ = 0;
};

// A typed element buffer.
struct Buffer {
  AttnType t;
  Bytes bytes;
  Buffer(AttnType type, std::size_t count) : t(type), bytes(bytes_of(type, count)) {}
  // A page pool whose elements below live_from are never named (sparse).
  Buffer(AttnType type, std::size_t count, std::size_t live_from)
      : t(type), bytes(bytes_of(type, count), bytes_of(type, live_from)) {}
  void set(std::size_t i, float x, const char* what) {
    switch (t) {
      case AttnType::float32:
        std::memcpy(&bytes[i * 4], &x, 4);
        return;
      case AttnType::bfloat16: {
        if (!std::isnan(x) && round_to_bf16(x) != x)
          throw std::invalid_argument(std::string("attention call: ") + what + " element " +
                                      std::to_string(i) + " = " + std::to_string(x) +
                                      " is not a bfloat16 value; round inputs before the call");
        const std::uint16_t b = bf16_from_float(x);
        std::memcpy(&bytes[i * 2], &b, 2);
        return;
      }
      case AttnType::fp8_e4m3:
      case AttnType::fp8_e5m2: {
        const Fp8Format f = t == AttnType::fp8_e4m3 ? Fp8Format::e4m3 : Fp8Format::e5m2;
        const std::uint8_t b = fp8_from_float(x, f, false);
        if (!std::isnan(x) && fp8_to_float(b, f) != x)
          throw std::invalid_argument(std::string("attention call: ") + what + " element " +
                                      std::to_string(i) + " = " + std::to_string(x) + " is not a " +
                                      name_of(t) + " value");
        bytes[i] = b;
        return;
      }
      case AttnType::fp4_e2m1:
      case AttnType::int8: {
        if (!is_elem(t, x))
          throw std::invalid_argument(std::string("attention call: ") + what + " element " +
                                      std::to_string(i) + " = " + std::to_string(x) + " is not a " +
                                      name_of(t) + " value (times its run's scale)");
        if (t == AttnType::int8) {
          bytes[i] = static_cast<unsigned char>(static_cast<std::int8_t>(x));
          return;
        }
        const std::uint8_t code = fp4_from_float(x);  // element i: low nibble when i is even
        unsigned char& by = bytes[i / 2];
        by = i % 2 ? static_cast<unsigned char>((by & 0x0f) | (code << 4))
                   : static_cast<unsigned char>((by & 0xf0) | code);
        return;
      }
      case AttnType::float16: {
        if (!std::isnan(x) && round_to_f16(x) != x)
          throw std::invalid_argument(std::string("attention call: ") + what + " element " +
                                      std::to_string(i) + " = " + std::to_string(x) +
                                      " is not a float16 value; round inputs before the call");
        const std::uint16_t b = f16_from_float(x);
        std::memcpy(&bytes[i * 2], &b, 2);
        return;
      }
    }
  }
  float get(std::size_t i) const {
    switch (t) {
      case AttnType::float32: {
        float x;
        std::memcpy(&x, &bytes[i * 4], 4);
        return x;
      }
      case AttnType::bfloat16: {
        std::uint16_t b;
        std::memcpy(&b, &bytes[i * 2], 2);
        return float_from_bf16(b);
      }
      case AttnType::fp8_e4m3:
        return fp8_to_float(bytes[i], Fp8Format::e4m3);
      case AttnType::fp8_e5m2:
        return fp8_to_float(bytes[i], Fp8Format::e5m2);
      case AttnType::fp4_e2m1:
        return load_fp4(bytes.data(), static_cast<std::int64_t>(i));
      case AttnType::int8:
        return static_cast<float>(static_cast<std::int8_t>(bytes[i]));
      case AttnType::float16: {
        std::uint16_t b;
        std::memcpy(&b, &bytes[i * 2], 2);
        return float_from_f16(b);
      }
    }
    return NAN;
  }
  // NaN in every element; fp4 and int8 have none: their largest value (6,
  // 127), so that a kernel reading an unused slot still moves its outputs.
  void fill_nan() {
    if (t == AttnType::fp4_e2m1 || t == AttnType::int8) {
      for (std::size_t i = bytes.live_from(); i < bytes.size(); ++i)
        bytes[i] = t == AttnType::int8 ? 0x7f : 0x77;
      return;
    }
    for (std::size_t i = bytes.live_from() / size_of(t); i < bytes.size() / size_of(t); ++i) {
      if (t == AttnType::float32) {
        const float n = NAN;
        std::memcpy(&bytes[i * 4], &n, 4);
      } else if (t == AttnType::bfloat16 || t == AttnType::float16) {
        const std::uint16_t n = t == AttnType::bfloat16 ? 0x7fc0 : 0x7e00;
        std::memcpy(&bytes[i * 2], &n, 2);
      } else {
        bytes[i] = 0x7f;  // NaN in both fp8 formats
      }
    }
  }
};

// Strides of one tensor in the call's layout (elements).
struct Strides {
  std::int64_t b = 0, h = 0, s = 0;
  std::int64_t count = 0;  // elements the buffer needs
};

// `varlen`: the call passes cu_seqlens (packed rows); else `batch` blocks of
// `seqlen` rows (for a page pool: `batch` pages of `seqlen` slots).
Strides layout_of(const AttentionCase& c, bool varlen, std::int64_t batch, std::int64_t heads,
                  std::int64_t seqlen, std::int64_t total, std::int64_t dim) {
  Strides st;
  if (c.layout == AttnLayout::bshd) {
    st.h = dim + c.head_pad;
    st.s = heads * st.h + c.row_pad;
    st.b = seqlen * st.s;
    st.count = (varlen ? total : batch * seqlen) * st.s;
  } else {
    st.s = dim + c.row_pad;
    const std::int64_t rows = varlen ? total : seqlen;
    st.h = rows * st.s + c.head_pad;
    st.b = heads * st.h;
    st.count = (varlen ? 1 : batch) * st.b;
  }
  if (st.count == 0) st.count = 1;  // never hand out a zero-sized buffer
  return st;
}

Strides layout_of(const AttentionCase& c, std::int64_t heads, std::int64_t seqlen,
                  std::int64_t total, std::int64_t dim) {
  return layout_of(c, c.varlen(), c.batch, heads, seqlen, total, dim);
}

// Offset of (packed row r of sequence b, head h) in a tensor of strides st.
std::int64_t offset(bool varlen, const Strides& st, std::int64_t b, std::int64_t r,
                    std::int64_t seq_start, std::int64_t h) {
  if (varlen) return r * st.s + h * st.h;
  return b * st.b + (r - seq_start) * st.s + h * st.h;
}

std::int64_t offset(const AttentionCase& c, const Strides& st, std::int64_t b, std::int64_t r,
                    std::int64_t seq_start, std::int64_t h) {
  return offset(c.varlen(), st, b, r, seq_start, h);
}

// A case's mask or bias tensor as the call passes it: its values in the
// element type (uint8 or float32), row-major [nb][nh][EQ][EK], or key-major
// [nb][nh][EK][EQ] when m.kt; stride 0 for every extent of 1 (broadcast).
// EQ, EK are the call's extents (kernel.h: from seqlen_q and seqlen_k, the
// key buffer's largest length) where the case's are not 1; entries past the
// case's own (keys no sequence uses) are masked (0).
struct MaskCall {
  std::vector<unsigned char> bytes;
  std::int64_t sb = 0, sh = 0, sq = 0, sk = 0;
};

MaskCall mask_call(const MaskTensor& m, bool as_float, std::int64_t eq, std::int64_t ek) {
  MaskCall r;
  const std::int64_t EQ = m.nq > 1 ? std::max(eq, m.nq) : 1, EK = m.nk > 1 ? std::max(ek, m.nk) : 1;
  const std::int64_t inner_q = m.kt ? 1 : EK, inner_k = m.kt ? EQ : 1;
  r.sq = m.nq > 1 ? inner_q : 0;
  r.sk = m.nk > 1 ? inner_k : 0;
  r.sh = m.nh > 1 ? EQ * EK : 0;
  r.sb = m.nb > 1 ? m.nh * EQ * EK : 0;
  const std::size_t e = as_float ? 4 : 1;
  r.bytes.assign(static_cast<std::size_t>(std::max<std::int64_t>(m.nb * m.nh * EQ * EK, 1)) * e, 0);
  for (std::int64_t b = 0; b < m.nb; ++b)
    for (std::int64_t h = 0; h < m.nh; ++h)
      for (std::int64_t i = 0; i < m.nq; ++i)
        for (std::int64_t j = 0; j < m.nk; ++j) {
          const float x = m.v[static_cast<std::size_t>(((b * m.nh + h) * m.nq + i) * m.nk + j)];
          const std::size_t o =
              static_cast<std::size_t>((b * m.nh + h) * EQ * EK + (m.kt ? j * EQ + i : i * EK + j));
          if (as_float)
            std::memcpy(&r.bytes[o * 4], &x, 4);
          else
            r.bytes[o] = x != 0 ? 1 : 0;
        }
  return r;
}

}  // namespace

std::string Kernel::why_not_applicable(const AttentionCase& c) const {
  if (abi_ < 2 || k_->attention_v2 == nullptr)
    return "the kernel implements no attention_v2 (interface v1 kernel, or op not claimed)";
  const sa_capabilities* cap = k_->capabilities;
  const std::uint32_t in_types = cap && cap->op_dtypes[8] ? cap->op_dtypes[8] : k_->dtypes;
  if ((in_types & bit_of(c.qkv)) == 0)
    return std::string("input type ") + name_of(c.qkv) +
           " is not among the kernel's declared types";
  if (c.out_type != c.qkv || is_quantised(c.qkv)) {
    const std::uint32_t outs = cap ? cap->op_out_dtypes[8] : 0;
    if (c.out_type != c.qkv && (outs & bit_of(c.out_type)) == 0)
      return std::string("output type ") + name_of(c.out_type) + " for " + name_of(c.qkv) +
             " inputs is not declared";
  }
  if (!cap) return {};
  const std::uint32_t f = attention_features(c.qkv);
  const AttentionDomainCaps dom = attention_domain();
  auto need = [&](bool used, std::uint32_t bit, const char* what) -> std::string {
    return used && (f & bit) == 0 ? std::string("feature not declared: ") + what : std::string();
  };
  for (const std::string& why :
       {need(c.batch > 1 || c.heads_q > 1, SA_ATTN_BATCHED, "batch or heads > 1"),
        need(c.heads_kv < c.heads_q, SA_ATTN_GQA, "GQA/MQA"),
        need(c.varlen(), SA_ATTN_VARLEN, "varlen"),
        need(c.layout != AttnLayout::bshd || c.row_pad || c.head_pad, SA_ATTN_STRIDED,
             "strided layout"),
        need(c.causal, SA_ATTN_CAUSAL, "causal"),
        need(c.window_left >= 0 || c.window_right >= 0, SA_ATTN_WINDOW, "sliding window"),
        need(c.softcap > 0, SA_ATTN_SOFTCAP, "softcap"),
        need(!c.alibi_slopes.empty(), SA_ATTN_ALIBI, "ALiBi"),
        need(!c.sinks.empty(), SA_ATTN_SINKS, "sinks"),
        need(!c.key_padding_mask.empty(), SA_ATTN_KEY_PADDING, "key padding mask"),
        need(c.adaptive, SA_ATTN_ADAPTIVE, "adaptive temperature"),
        need(c.dv != c.d, SA_ATTN_UNEQUAL_HEAD_DIMS, "head_dim_v != head_dim"),
        need(c.paged(), SA_ATTN_PAGED_KV, "paged KV cache"),
        need(c.seqused(), SA_ATTN_SEQUSED_K, "seqused_k (used key lengths)"),
        need(c.attn_mask.used(), SA_ATTN_BOOL_MASK, "boolean attn_mask"),
        need(c.attn_bias.used(), SA_ATTN_BIAS, "additive attn_bias"),
        need(c.block_mask.used(), SA_ATTN_BLOCK_MASK, "block-sparse mask"),
        need(c.tree_mask.used(), SA_ATTN_TREE_MASK, "tree mask (speculative decoding)"),
        need(c.scale_block > 0 && c.scale_type == ScaleType::e8m0, SA_ATTN_BLOCK_SCALED,
             "block scales (E8M0: MXFP8, MXFP4)"),
        need(c.scale_block > 0 && c.scale_type == ScaleType::e4m3, SA_ATTN_SCALE_E4M3,
             "e4m3 block scales (NVFP4)"),
        need(c.scale_block > 0 && c.scale_type == ScaleType::f32, SA_ATTN_SCALE_F32,
             "float32 block scales"),
        need(c.descale_bh, SA_ATTN_DESCALE_BH, "descales per (sequence, kv head)")})
    if (!why.empty()) return why;
  // The declared domain: features every call must have, the forms taken only
  // in part, head dims' multiple.
  const bool window = c.window_left >= 0 || c.window_right >= 0;
  if ((dom.required & SA_ATTN_CAUSAL) && !c.causal)
    return "the kernel is causal-only (attention_required)";
  if ((dom.required & SA_ATTN_WINDOW) && !window)
    return "the kernel needs a window (attention_required)";
  if ((dom.required & SA_ATTN_SOFTCAP) && !(c.softcap > 0))
    return "the kernel needs a softcap (attention_required)";
  if ((dom.required & SA_ATTN_ALIBI) && c.alibi_slopes.empty())
    return "the kernel needs ALiBi slopes (attention_required)";
  if ((dom.required & SA_ATTN_SINKS) && c.sinks.empty())
    return "the kernel needs sinks (attention_required)";
  if ((dom.required & SA_ATTN_VARLEN) && !c.varlen())
    return "the kernel needs varlen (attention_required)";
  if ((dom.required & SA_ATTN_KEY_PADDING) && c.key_padding_mask.empty())
    return "the kernel needs a key padding mask (attention_required)";
  if ((dom.constraints & SA_ATTN_ONLY_BOTTOM_RIGHT) && c.top_left &&
      (c.causal || window || !c.alibi_slopes.empty()))
    return "top-left alignment: the kernel aligns bottom-right only";
  if ((dom.constraints & SA_ATTN_ONLY_WINDOW_RIGHT_0) && window && c.window_right != 0 && !c.causal)
    return "window_right " + std::to_string(c.window_right) +
           ": the kernel takes window_right 0 only";
  if (dom.constraints & SA_ATTN_ONLY_Q_LE_K)
    for (std::int64_t b = 0; b < c.batch; ++b)
      if (c.len_q(b) > c.len_k(b))
        return "sequence " + std::to_string(b) + " has more queries (" +
               std::to_string(c.len_q(b)) + ") than keys (" + std::to_string(c.len_k(b)) +
               "): the kernel takes seqlen_q <= seqlen_k only";
  if (dom.head_dim_multiple > 1 &&
      (c.d % dom.head_dim_multiple != 0 || c.dv % dom.head_dim_multiple != 0))
    return "head dim " + std::to_string(c.d) + "/" + std::to_string(c.dv) +
           " is not a multiple of " + std::to_string(dom.head_dim_multiple);
  auto dim_ok = [&](std::int64_t d) {
    if (cap->max_head_dim > 0 && d > cap->max_head_dim) return false;
    if (cap->head_dims && cap->num_head_dims > 0) {
      for (int i = 0; i < cap->num_head_dims; ++i)
        if (cap->head_dims[i] == d) return true;
      return false;
    }
    return true;
  };
  if (!dim_ok(c.d) || !dim_ok(c.dv))
    return "head dim " + std::to_string(c.d) + "/" + std::to_string(c.dv) + " is not supported";
  std::int64_t mq = 0, mk = 0;
  for (std::int64_t b = 0; b < c.batch; ++b)
    mq = std::max(mq, c.len_q(b)), mk = std::max(mk, c.len_k(b));
  if (cap->max_seqlen_q > 0 && mq > cap->max_seqlen_q)
    return "query length " + std::to_string(mq) + " > max_seqlen_q " +
           std::to_string(cap->max_seqlen_q);
  if (cap->max_seqlen_k > 0 && mk > cap->max_seqlen_k)
    return "key length " + std::to_string(mk) + " > max_seqlen_k " +
           std::to_string(cap->max_seqlen_k);
  if (cap->max_batch > 0 && c.batch > cap->max_batch) return "batch above max_batch";
  if (cap->max_heads > 0 && c.heads_q > cap->max_heads) return "heads above max_heads";
  return {};
}

std::uint32_t Kernel::attention_features(AttnType t) const {
  if (abi_ < 2 || k_->attention_v2 == nullptr) return 0;
  const sa_capabilities* cap = k_->capabilities;
  if (!cap) return ~0u;
  const std::size_t end = offsetof(sa_capabilities, attention_features_by_dtype) +
                          sizeof cap->attention_features_by_dtype;
  if (cap->struct_size >= end) {
    const std::uint32_t own = cap->attention_features_by_dtype[static_cast<int>(abi_of(t))];
    if (own != 0) return own;
  }
  return cap->attention_features;
}

Kernel::AttentionDomainCaps Kernel::attention_domain() const {
  AttentionDomainCaps d;
  const sa_capabilities* cap = abi_ >= 2 ? k_->capabilities : nullptr;
  if (!cap) return d;
  if (cap->struct_size >= offsetof(sa_capabilities, attention_required) + 4)
    d.required = cap->attention_required;
  if (cap->struct_size >= offsetof(sa_capabilities, attention_constraints) + 4)
    d.constraints = cap->attention_constraints;
  if (cap->struct_size >= offsetof(sa_capabilities, head_dim_multiple) + 4)
    d.head_dim_multiple = cap->head_dim_multiple;
  return d;
}

bool Kernel::declares(std::uint32_t attention_feature) const {
  if (abi_ < 2 || k_->attention_v2 == nullptr) return false;
  return k_->capabilities == nullptr || (k_->capabilities->attention_features & attention_feature);
}

AttentionResult Kernel::attention_v2(const AttentionCase& c) const {
  c.validate();
  if (const std::string why = why_not_applicable(c); !why.empty())
    throw NotApplicable("kernel '" + name_ + "' attention_v2: " + why);
  // The call's own form: cu_seqlens or fixed lengths (a dense call of a
  // varlen case), each sequence's key buffer N_b (used keys plus the poisoned
  // ones past seqused_k), contiguous or paged keys.
  const bool cv = c.call_varlen();
  const std::int64_t Sq = c.varlen() ? (cv ? 0 : (c.batch ? c.len_q(0) : 0)) : c.seqlen_q;
  std::vector<std::int32_t> cu_kb{0};  // the call's cu_seqlens_k (buffer lengths)
  std::int64_t max_nk = 0;
  for (std::int64_t b = 0; b < c.batch; ++b) {
    const std::int64_t n = c.key_buffer(b);
    if (cv && cu_kb.back() + n > INT32_MAX)
      throw std::invalid_argument("attention call: cu_seqlens_k passes 2^31 - 1");
    cu_kb.push_back(static_cast<std::int32_t>(cu_kb.back() + n));
    max_nk = std::max(max_nk, n);
  }
  const std::int64_t Nk = cv ? 0 : max_nk;  // fixed calls: every buffer has Nk rows
  const std::int64_t total_kb = cv ? cu_kb.back() : c.batch * Nk;
  const PagedKv pk = paged_kv(c);
  const Strides sq = layout_of(c, cv, c.batch, c.heads_q, Sq, c.total_q(), c.d),
                so = layout_of(c, cv, c.batch, c.heads_q, Sq, c.total_q(), c.dv),
                sk = c.paged() ? layout_of(c, false, pk.num_pages, c.heads_kv, c.page_size, 0, c.d)
                               : layout_of(c, cv, c.batch, c.heads_kv, Nk, total_kb, c.d),
                sv = c.paged() ? layout_of(c, false, pk.num_pages, c.heads_kv, c.page_size, 0, c.dv)
                               : layout_of(c, cv, c.batch, c.heads_kv, Nk, total_kb, c.dv);
  // Offset of key slot j (0 <= j < N_b) of sequence b, head h.
  auto key_at = [&](const Strides& st, std::int64_t b, std::int64_t j, std::int64_t h) {
    if (c.paged()) {
      const std::int64_t page =
          pk.block_table[static_cast<std::size_t>(b * pk.stride + j / c.page_size)];
      return page * st.b + (j % c.page_size) * st.s + h * st.h;
    }
    return cv ? (cu_kb[b] + j) * st.s + h * st.h : b * st.b + j * st.s + h * st.h;
  };
  // A pool whose pages start past kLargePoolBytes is reserved sparsely.
  auto pool = [&](const Strides& st) {
    const std::int64_t from = c.paged() ? c.page_id_base * st.b : 0;
    if (static_cast<std::int64_t>(bytes_of(c.qkv, static_cast<std::size_t>(from))) <
        kLargePoolBytes)
      return Buffer(c.qkv, static_cast<std::size_t>(st.count));
    return Buffer(c.qkv, static_cast<std::size_t>(st.count), static_cast<std::size_t>(from));
  };
  // MLA: V a prefix view of K (kernel.h: k and v may alias), when the case's
  // values are that; its buffer is then K's.
  // (A view of K with dv < d has K's strides: only for a kernel taking any.)
  const bool v_alias = c.v_aliases_k() && (c.dv == c.d || declares(SA_ATTN_STRIDED));
  Buffer q(c.qkv, sq.count), k = pool(sk), v = v_alias ? Buffer(c.qkv, 1) : pool(sv),
                             o(c.out_type, so.count);
  q.fill_nan();
  k.fill_nan();
  v.fill_nan();
  o.fill_nan();
  // Block scales: one scale (of scale_type: E8M0 or e4m3 bytes, float32) per
  // run of scale_block elements, laid out as the elements are with a row of
  // ceil(dim / scale_block) scales; NaN in every scale no element of the
  // case uses.
  const std::int64_t sbk = c.scale_block;
  auto runs = [&](std::int64_t dim) { return sbk > 0 ? (dim + sbk - 1) / sbk : 1; };
  const Strides ssq = layout_of(c, cv, c.batch, c.heads_q, Sq, c.total_q(), runs(c.d)),
                ssk = c.paged()
                          ? layout_of(c, false, pk.num_pages, c.heads_kv, c.page_size, 0, runs(c.d))
                          : layout_of(c, cv, c.batch, c.heads_kv, Nk, total_kb, runs(c.d)),
                ssv = c.paged() ? layout_of(c, false, pk.num_pages, c.heads_kv, c.page_size, 0,
                                            runs(c.dv))
                                : layout_of(c, cv, c.batch, c.heads_kv, Nk, total_kb, runs(c.dv));
  const ScaleType sty = c.scale_type;
  const std::size_t ssz = scale_size(sty);
  auto scales = [&](const Strides& st) {
    std::vector<std::uint8_t> r(sbk > 0 ? static_cast<std::size_t>(st.count) * ssz : 0);
    const std::uint32_t nan = scale_bits(sty, NAN);
    for (std::size_t i = 0; i < r.size(); i += ssz) std::memcpy(&r[i], &nan, ssz);
    return r;
  };
  std::vector<std::uint8_t> qsc = scales(ssq), ksc = scales(ssk), vsc = scales(ssv);
  // One head's row of n values at element offset off (scale offset soff).
  auto put = [&](Buffer& buf, std::vector<std::uint8_t>& sc, std::int64_t off, std::int64_t soff,
                 const float* x, std::int64_t n, const char* what) {
    if (sbk == 0) {
      for (std::int64_t i = 0; i < n; ++i) buf.set(static_cast<std::size_t>(off + i), x[i], what);
      return;
    }
    for (std::int64_t r0 = 0; r0 < n; r0 += sbk) {
      const std::int64_t m = std::min(sbk, n - r0);
      const float s = run_scale(c.qkv, sty, x + r0, m);
      const std::uint32_t bits = scale_bits(sty, s);
      std::memcpy(&sc[static_cast<std::size_t>(soff + r0 / sbk) * ssz], &bits, ssz);
      for (std::int64_t i = r0; i < r0 + m; ++i) {
        if (std::isnan(s)) {  // (fp4, int8: the scale carries the run's NaN)
          buf.set(static_cast<std::size_t>(off + i), 0.0f, what);
          continue;
        }
        const float e = x[i] / s;
        if (std::isfinite(x[i]) && e * s != x[i])
          throw std::invalid_argument(std::string("attention call: ") + what + " value " +
                                      std::to_string(x[i]) + " is no " + name_of(c.qkv) +
                                      " element times its run's " + name_of(sty) + " scale " +
                                      std::to_string(s));
        buf.set(static_cast<std::size_t>(off + i), e, what);
      }
    }
  };
  // Descales per (sequence, kv head): each slab's exponent, the smallest that
  // keeps every element of the slab within the format (as block scales'); the
  // rows are passed divided by it. V a view of K takes K's.
  const std::int64_t group = c.heads_q / c.heads_kv;
  // (2^e per (sequence, kv head), descales_bh)
  const std::vector<float> dq = descales_bh(c, 0), dk = descales_bh(c, 1),
                           dv = v_alias ? dk : descales_bh(c, 2);
  std::vector<float> row_tmp;
  // A row divided by its slab's descale (exact: a power of two).
  auto descaled = [&](const float* x, std::int64_t n, const std::vector<float>& d, std::int64_t b,
                      std::int64_t g) {
    if (d.empty()) return x;
    const float s = d[static_cast<std::size_t>(b * c.heads_kv + g)];
    row_tmp.assign(x, x + n);
    for (float& e : row_tmp) e /= s;
    return static_cast<const float*>(row_tmp.data());
  };
  std::vector<unsigned char> live(static_cast<std::size_t>(so.count), 0);
  for (std::int64_t b = 0; b < c.batch; ++b) {
    const std::int64_t q0 = c.row_q(b, 0), k0 = c.row_k(b, 0);
    for (std::int64_t i = 0; i < c.len_q(b); ++i)
      for (std::int64_t h = 0; h < c.heads_q; ++h) {
        const std::int64_t r = q0 + i;
        const std::int64_t qo = offset(cv, sq, b, r, q0, h), oo = offset(cv, so, b, r, q0, h);
        put(q, qsc, qo, offset(cv, ssq, b, r, q0, h),
            descaled(&c.q[(r * c.heads_q + h) * c.d], c.d, dq, b, h / group), c.d, "q");
        for (std::int64_t x = 0; x < c.dv; ++x) live[static_cast<std::size_t>(oo + x)] = 1;
      }
    // The used keys only: slots past them (seqused_k), the rest of the last
    // page and every page no sequence uses stay NaN.
    for (std::int64_t j = 0; j < c.len_k(b); ++j)
      for (std::int64_t h = 0; h < c.heads_kv; ++h) {
        const std::int64_t r = k0 + j;
        const std::int64_t ko = key_at(sk, b, j, h), vo = key_at(sv, b, j, h);
        put(k, ksc, ko, key_at(ssk, b, j, h),
            descaled(&c.k[(r * c.heads_kv + h) * c.d], c.d, dk, b, h), c.d, "k");
        if (!v_alias)  // (aliased: V is K's first dv elements, with K's scale bytes)
          put(v, vsc, vo, key_at(ssv, b, j, h),
              descaled(&c.v[(r * c.heads_kv + h) * c.dv], c.dv, dv, b, h), c.dv, "v");
      }
  }
  // The key padding mask indexed by the call's key rows; slots past a
  // sequence's used keys are unmasked (1), so reading them reads NaN.
  std::vector<std::uint8_t> kpm;
  if (!c.key_padding_mask.empty()) {
    kpm.assign(static_cast<std::size_t>(std::max<std::int64_t>(total_kb, 1)), 1);
    for (std::int64_t b = 0; b < c.batch; ++b)
      for (std::int64_t j = 0; j < c.len_k(b); ++j)
        kpm[static_cast<std::size_t>(cv ? cu_kb[b] + j : b * Nk + j)] =
            c.key_padding_mask[static_cast<std::size_t>(c.row_k(b, j))];
  }
  std::vector<std::int32_t> seqused;
  if (c.seqused())
    for (std::int64_t b = 0; b < c.batch; ++b)
      seqused.push_back(static_cast<std::int32_t>(c.len_k(b)));
  const Buffer o0 = o;
  const auto rows = static_cast<std::size_t>(c.total_q() * c.heads_q);
  const bool want_lse = declares(SA_ATTN_LSE), want_H = declares(SA_ATTN_ENTROPY);
  // Per-query outputs in the ABI's order, NaN until written.
  const std::size_t abi_rows =
      cv ? rows : static_cast<std::size_t>(c.batch * c.heads_q * std::max<std::int64_t>(Sq, 0));
  std::vector<float> lse(want_lse ? abi_rows : 0, NAN), ent(want_H ? abi_rows : 0, NAN),
      beta(c.adaptive ? abi_rows : 0, NAN);
  detail::Stage st(memory());
  sa_attention_v2_args a{};
  a.struct_size = sizeof a;
  a.qkv_dtype = abi_of(c.qkv);
  a.out_dtype = abi_of(c.out_type);
  a.batch = c.batch;
  a.heads_q = c.heads_q;
  a.heads_kv = c.heads_kv;
  std::int64_t mq = Sq;
  if (cv) {
    mq = 0;
    for (std::int64_t b = 0; b < c.batch; ++b) mq = std::max(mq, c.len_q(b));
  }
  a.seqlen_q = mq;
  a.seqlen_k = max_nk;
  a.head_dim = c.d;
  a.head_dim_v = c.dv;
  if (cv) {
    a.cu_seqlens_q = static_cast<const std::int32_t*>(st.in(c.cu_q.data(), c.cu_q.size() * 4));
    a.cu_seqlens_k = static_cast<const std::int32_t*>(st.in(cu_kb.data(), cu_kb.size() * 4));
  }
  a.q = {st.in(q.bytes.data(), q.bytes.size()), sq.b, sq.h, sq.s};
  a.k = {st.in(k.bytes.data(), k.bytes.size()), sk.b, sk.h, sk.s};
  a.v = v_alias ? sa_tensor{a.k.data, sk.b, sk.h, sk.s}
                : sa_tensor{st.in(v.bytes.data(), v.bytes.size()), sv.b, sv.h, sv.s};
  a.out = st.out(o.bytes.data(), o.bytes.size());
  a.out_stride_b = so.b;
  a.out_stride_h = so.h;
  a.out_stride_s = so.s;
  a.lse = want_lse ? static_cast<float*>(st.out(lse.data(), abi_rows * 4)) : nullptr;
  a.entropy = want_H ? static_cast<float*>(st.out(ent.data(), abi_rows * 4)) : nullptr;
  a.beta = c.adaptive ? static_cast<float*>(st.out(beta.data(), abi_rows * 4)) : nullptr;
  a.key_padding_mask =
      kpm.empty() ? nullptr : static_cast<const std::uint8_t*>(st.in(kpm.data(), kpm.size()));
  a.scale = c.scale;
  a.causal = c.causal ? 1 : 0;
  a.alignment = c.top_left ? SA_ALIGN_TOP_LEFT : SA_ALIGN_BOTTOM_RIGHT;
  a.window_left = c.window_left;
  a.window_right = c.window_right;
  a.softcap = c.softcap;
  a.alibi_slopes =
      c.alibi_slopes.empty()
          ? nullptr
          : static_cast<const float*>(st.in(c.alibi_slopes.data(), c.alibi_slopes.size() * 4));
  a.sinks = c.sinks.empty() ? nullptr
                            : static_cast<const float*>(st.in(c.sinks.data(), c.sinks.size() * 4));
  a.q_descale = c.q_descale;
  a.k_descale = c.k_descale;
  a.v_descale = c.v_descale;
  a.adaptive = c.adaptive ? 1 : 0;
  a.num_splits = c.num_splits;
  if (c.descale_bh) {
    a.q_descale_bh = static_cast<const float*>(st.in(dq.data(), dq.size() * 4));
    a.k_descale_bh = static_cast<const float*>(st.in(dk.data(), dk.size() * 4));
    a.v_descale_bh = static_cast<const float*>(st.in(dv.data(), dv.size() * 4));
  }
  if (c.seqused())
    a.seqused_k = static_cast<const std::int32_t*>(st.in(seqused.data(), seqused.size() * 4));
  if (c.paged()) {
    a.block_table =
        static_cast<const std::int32_t*>(st.in(pk.block_table.data(), pk.block_table.size() * 4));
    a.block_table_stride = pk.stride;
    a.page_size = c.page_size;
    a.num_pages = pk.num_pages;
  }
  // Masks beyond causal and window: each tensor by its own strides.
  MaskCall am, ab, bm, tm;
  auto pass = [&](const MaskTensor& m, bool as_float, MaskCall& mc, sa_mask_tensor& t,
                  std::int64_t eq, std::int64_t ek) {
    if (!m.used()) return;
    mc = mask_call(m, as_float, eq, ek);
    t = {st.in(mc.bytes.data(), mc.bytes.size()), mc.sb, mc.sh, mc.sq, mc.sk};
  };
  pass(c.attn_mask, false, am, a.attn_mask, a.seqlen_q, a.seqlen_k);
  pass(c.attn_bias, true, ab, a.attn_bias, a.seqlen_q, a.seqlen_k);
  if (c.block_mask.used())
    pass(c.block_mask, false, bm, a.block_mask, (a.seqlen_q + c.block_q - 1) / c.block_q,
         (a.seqlen_k + c.block_k - 1) / c.block_k);
  pass(c.tree_mask, false, tm, a.tree_mask, a.seqlen_q, a.seqlen_q);
  if (c.block_mask.used()) {
    a.block_q = c.block_q;
    a.block_k = c.block_k;
  }
  if (sbk > 0) {
    a.scale_block = sbk;
    a.scale_dtype = sty == ScaleType::e4m3  ? SA_FP8_E4M3
                    : sty == ScaleType::f32 ? SA_F32
                                            : static_cast<sa_dtype>(0);
    a.q_scale = {st.in(qsc.data(), qsc.size()), ssq.b, ssq.h, ssq.s};
    a.k_scale = {st.in(ksc.data(), ksc.size()), ssk.b, ssk.h, ssk.s};
    a.v_scale = v_alias ? a.k_scale : sa_tensor{st.in(vsc.data(), vsc.size()), ssv.b, ssv.h, ssv.s};
  }
  detail::check_status(*this, detail::timed_call([&] { return k_->attention_v2(k_->ctx, &a); }),
                       Op::attention_v2);
  st.fetch();
  // Nothing outside the output's rows may change (padding between heads and rows).
  const std::size_t es = size_of(c.out_type);
  for (std::size_t i = 0; i < live.size(); ++i)
    if (!live[i] && std::memcmp(&o.bytes[i * es], &o0.bytes[i * es], es) != 0)
      throw KernelError(SA_INTERNAL_ERROR,
                        "kernel '" + name_ + "' attention_v2 wrote output element " +
                            std::to_string(i) + ", which is padding outside every output row (" +
                            c.describe() + ")");
  AttentionResult r;
  r.out.resize(static_cast<std::size_t>(c.total_q() * c.heads_q * c.dv));
  r.lse.resize(want_lse ? rows : 0);
  r.entropy.resize(want_H ? rows : 0);
  r.beta.resize(c.adaptive ? rows : 0);
  for (std::int64_t b = 0; b < c.batch; ++b) {
    const std::int64_t q0 = c.row_q(b, 0);
    for (std::int64_t i = 0; i < c.len_q(b); ++i)
      for (std::int64_t h = 0; h < c.heads_q; ++h) {
        const std::int64_t row = q0 + i;
        const std::int64_t oo = offset(cv, so, b, row, q0, h);
        for (std::int64_t x = 0; x < c.dv; ++x)
          r.out[(row * c.heads_q + h) * c.dv + x] = o.get(static_cast<std::size_t>(oo + x));
        // ABI order: [batch][heads_q][seqlen_q], or [heads_q][total_q] with varlen.
        const std::size_t abi =
            static_cast<std::size_t>(cv ? h * c.total_q() + row : (b * c.heads_q + h) * Sq + i);
        const std::size_t mine = static_cast<std::size_t>(row * c.heads_q + h);
        if (want_lse) r.lse[mine] = lse[abi];
        if (want_H) r.entropy[mine] = ent[abi];
        if (c.adaptive) r.beta[mine] = beta[abi];
      }
  }
  if (call_log::recording()) {
    call_log::Call rc = call_log::attention_call("attention_v2", c);
    const std::int64_t tq = c.total_q();
    rc.got.push_back(call_log::floats("out", {tq, c.heads_q, c.dv}, r.out));
    if (!r.lse.empty()) rc.got.push_back(call_log::floats("lse", {tq, c.heads_q}, r.lse));
    if (!r.entropy.empty())
      rc.got.push_back(call_log::floats("entropy", {tq, c.heads_q}, r.entropy));
    if (!r.beta.empty()) rc.got.push_back(call_log::floats("beta", {tq, c.heads_q}, r.beta));
    call_log::record(std::move(rc));
  }
  return r;
}

// ---- attention (interface v1): the single-head special case of the same case type ----

std::string Kernel::why_not_applicable_v1(const AttentionCase& c) const {
  if (k_->attention == nullptr) return "the kernel implements no attention (interface v1 slot)";
  if (c.qkv != AttnType::float32 && c.qkv != AttnType::bfloat16)
    return std::string("input type ") + name_of(c.qkv) +
           ": interface v1 attention is checked in float32 and bfloat16 (float16 and fp8 "
           "through attention_v2)";
  if ((k_->dtypes & bit_of(c.qkv)) == 0)
    return std::string("input type ") + name_of(c.qkv) +
           " is not among the kernel's declared types";
  if (c.out_type != c.qkv)
    return std::string("output type ") + name_of(c.out_type) + " for " + name_of(c.qkv) +
           " inputs: interface v1 attention writes its input type";
  if (c.batch != 1 || c.heads_q != 1 || c.heads_kv != 1)
    return "batch or heads > 1: interface v1 attention is single-head";
  if (c.varlen()) return "varlen: not in interface v1 attention";
  if (c.seqlen_q < 1 || c.seqlen_k < 1)
    return "an empty sequence: interface v1 attention takes nq, nk >= 1";
  if (c.causal && c.top_left) return "top-left alignment: interface v1 attention is bottom-right";
  if (c.window_left >= 0 || c.window_right >= 0)
    return "sliding window: not in interface v1 attention";
  if (c.softcap > 0) return "softcap: not in interface v1 attention";
  if (!c.alibi_slopes.empty()) return "ALiBi: not in interface v1 attention";
  if (!c.sinks.empty()) return "sinks: not in interface v1 attention";
  if (c.masks()) return "attn_mask, attn_bias, block or tree mask: not in interface v1 attention";
  return {};
}

// One sequence and one head. The layout is v1's own: contiguous rows, or,
// when the case pads (row_pad + head_pad = p > 0), each operand its own row
// stride (q d + p, k d + p + 1, v dv + p + 2, out dv + p + 3) with NaN
// between rows, as kernel.h lets a v1 caller choose. The key padding mask is
// v1's key_mask; causal is bottom-right. lse, entropy and beta always come
// back (v1 writes all three; beta is 1 without the adaptive temperature).
AttentionResult Kernel::attention(const AttentionCase& c) const {
  c.validate();
  if (const std::string why = why_not_applicable_v1(c); !why.empty())
    throw NotApplicable("kernel '" + name_ + "' attention: " + why);
  const std::int64_t pad = c.row_pad + c.head_pad;
  const std::int64_t qs = c.d + pad, ks = c.d + pad + (pad ? 1 : 0),
                     vs = c.dv + pad + (pad ? 2 : 0), os = c.dv + pad + (pad ? 3 : 0);
  auto count = [](std::int64_t rows, std::int64_t stride) {
    return static_cast<std::size_t>(std::max<std::int64_t>(rows * stride, 1));
  };
  Buffer q(c.qkv, count(c.seqlen_q, qs)), k(c.qkv, count(c.seqlen_k, ks)),
      v(c.qkv, count(c.seqlen_k, vs)), o(c.out_type, count(c.seqlen_q, os));
  q.fill_nan();
  k.fill_nan();
  v.fill_nan();
  o.fill_nan();
  std::vector<unsigned char> live(count(c.seqlen_q, os), 0);
  for (std::int64_t i = 0; i < c.seqlen_q; ++i) {
    for (std::int64_t x = 0; x < c.d; ++x)
      q.set(static_cast<std::size_t>(i * qs + x), c.q[i * c.d + x], "q");
    for (std::int64_t x = 0; x < c.dv; ++x) live[static_cast<std::size_t>(i * os + x)] = 1;
  }
  for (std::int64_t j = 0; j < c.seqlen_k; ++j) {
    for (std::int64_t x = 0; x < c.d; ++x)
      k.set(static_cast<std::size_t>(j * ks + x), c.k[j * c.d + x], "k");
    for (std::int64_t x = 0; x < c.dv; ++x)
      v.set(static_cast<std::size_t>(j * vs + x), c.v[j * c.dv + x], "v");
  }
  const Buffer o0 = o;
  const auto rows = static_cast<std::size_t>(c.seqlen_q);
  AttentionResult r;
  r.lse.assign(rows, NAN);
  r.entropy.assign(rows, NAN);
  r.beta.assign(rows, NAN);
  detail::Stage st(memory());
  sa_attention_args a{};
  a.dtype = abi_of(c.qkv);
  a.nq = c.seqlen_q;
  a.nk = c.seqlen_k;
  a.d = c.d;
  a.dv = c.dv;
  a.q = st.in(q.bytes.data(), q.bytes.size());
  a.q_stride = qs;
  a.k = st.in(k.bytes.data(), k.bytes.size());
  a.k_stride = ks;
  a.v = st.in(v.bytes.data(), v.bytes.size());
  a.v_stride = vs;
  a.out = st.out(o.bytes.data(), o.bytes.size());
  a.out_stride = os;
  a.lse = static_cast<float*>(st.out(r.lse.data(), rows * 4));
  a.entropy = static_cast<float*>(st.out(r.entropy.data(), rows * 4));
  a.beta = static_cast<float*>(st.out(r.beta.data(), rows * 4));
  a.key_mask = c.key_padding_mask.empty()
                   ? nullptr
                   : static_cast<const std::uint8_t*>(
                         st.in(c.key_padding_mask.data(), c.key_padding_mask.size()));
  a.scale = c.scale;
  a.causal = c.causal ? 1 : 0;
  a.adaptive = c.adaptive ? 1 : 0;
  a.num_splits = c.num_splits;
  detail::check_status(*this, detail::timed_call([&] { return k_->attention(k_->ctx, &a); }),
                       Op::attention);
  st.fetch();
  const std::size_t es = size_of(c.out_type);
  for (std::size_t i = 0; i < live.size(); ++i)
    if (!live[i] && std::memcmp(&o.bytes[i * es], &o0.bytes[i * es], es) != 0)
      throw KernelError(SA_INTERNAL_ERROR,
                        "kernel '" + name_ + "' attention wrote output element " +
                            std::to_string(i) + ", which is padding outside every output row (" +
                            c.describe() + ")");
  r.out.resize(static_cast<std::size_t>(c.seqlen_q * c.dv));
  for (std::int64_t i = 0; i < c.seqlen_q; ++i)
    for (std::int64_t x = 0; x < c.dv; ++x)
      r.out[static_cast<std::size_t>(i * c.dv + x)] = o.get(static_cast<std::size_t>(i * os + x));
  // Recorded for case files as op `attention` with the case's own encoding:
  // `replay` calls the v1 slot again through this function.
  if (call_log::recording()) {
    call_log::Call rc = call_log::attention_call("attention", c);
    const std::int64_t tq = c.total_q();
    rc.got.push_back(call_log::floats("out", {tq, 1, c.dv}, r.out));
    rc.got.push_back(call_log::floats("lse", {tq, 1}, r.lse));
    rc.got.push_back(call_log::floats("entropy", {tq, 1}, r.entropy));
    rc.got.push_back(call_log::floats("beta", {tq, 1}, r.beta));
    call_log::record(std::move(rc));
  }
  return r;
}

}  // namespace sa

// ---- attention_backward (interface v2) ----
namespace sa {
namespace {

// Copies packed-BSHD values into a call-layout buffer (query side: q_side,
// else key side), marking the elements of live rows.
void scatter(const AttentionCase& c, bool q_side, std::int64_t heads, std::int64_t dim,
             const Strides& st, const float* src, Buffer* dst, std::vector<unsigned char>* live,
             const char* what) {
  for (std::int64_t b = 0; b < c.batch; ++b) {
    const std::int64_t r0 = q_side ? c.row_q(b, 0) : c.row_k(b, 0);
    const std::int64_t len = q_side ? c.len_q(b) : c.len_k(b);
    for (std::int64_t i = 0; i < len; ++i)
      for (std::int64_t h = 0; h < heads; ++h) {
        const std::int64_t o = offset(c, st, b, r0 + i, r0, h);
        for (std::int64_t x = 0; x < dim; ++x) {
          if (dst && src)
            dst->set(static_cast<std::size_t>(o + x), src[((r0 + i) * heads + h) * dim + x], what);
          if (live) (*live)[static_cast<std::size_t>(o + x)] = 1;
        }
      }
  }
}

std::vector<float> gather(const AttentionCase& c, bool q_side, std::int64_t heads, std::int64_t dim,
                          const Strides& st, const Buffer& src) {
  std::vector<float> out(
      static_cast<std::size_t>((q_side ? c.total_q() : c.total_k()) * heads * dim));
  for (std::int64_t b = 0; b < c.batch; ++b) {
    const std::int64_t r0 = q_side ? c.row_q(b, 0) : c.row_k(b, 0);
    const std::int64_t len = q_side ? c.len_q(b) : c.len_k(b);
    for (std::int64_t i = 0; i < len; ++i)
      for (std::int64_t h = 0; h < heads; ++h) {
        const std::int64_t o = offset(c, st, b, r0 + i, r0, h);
        for (std::int64_t x = 0; x < dim; ++x)
          out[static_cast<std::size_t>(((r0 + i) * heads + h) * dim + x)] =
              src.get(static_cast<std::size_t>(o + x));
      }
  }
  return out;
}

void check_padding(const Kernel& k, const AttentionCase& c, const char* what, const Buffer& before,
                   const Buffer& after, const std::vector<unsigned char>& live) {
  const std::size_t es = size_of(after.t);
  for (std::size_t i = 0; i < live.size(); ++i)
    if (!live[i] && std::memcmp(&after.bytes[i * es], &before.bytes[i * es], es) != 0)
      throw KernelError(SA_INTERNAL_ERROR, "kernel '" + k.name() + "' attention_backward wrote " +
                                               what + " element " + std::to_string(i) +
                                               ", which is padding outside every row (" +
                                               c.describe() + ")");
}

}  // namespace

std::string Kernel::why_not_applicable_backward(const AttentionCase& c) const {
  if (abi_ < 2 || k_->attention_backward == nullptr)
    return "the kernel implements no attention_backward (interface v1 kernel, or op not claimed)";
  if (c.adaptive) return "adaptive attention has no backward (kernel.h)";
  if (c.paged() || c.seqused())
    return "paged KV and seqused_k are forward only (kernel.h): no backward";
  if (c.masks())
    return "attn_mask, attn_bias, block and tree masks are forward only (kernel.h): no backward";
  if (c.scale_block > 0) return "block scales are forward only (kernel.h): no backward";
  if (c.descale_bh) return "descales per (sequence, kv head) are forward only (kernel.h)";
  if (is_quantised(c.qkv))
    return std::string(name_of(c.qkv)) +
           " inputs: the backward is checked for float32/bfloat16/float16";
  const sa_capabilities* cap = k_->capabilities;
  const std::uint32_t types = cap && cap->op_dtypes[11] ? cap->op_dtypes[11] : k_->dtypes;
  if ((types & bit_of(c.qkv)) == 0)
    return std::string("input type ") + name_of(c.qkv) +
           " is not among the types declared for attention_backward";
  // The forward's conditions (attention_features, head dims, limits) cover
  // both directions: a backward needs its forward's out and lse anyway.
  if (k_->attention_v2 == nullptr)
    return "the kernel implements no attention_v2 (the backward reads its forward's out and lse)";
  return why_not_applicable(c);
}

AttentionBackwardResult Kernel::attention_backward(const AttentionCase& c,
                                                   std::span<const float> out,
                                                   std::span<const float> lse,
                                                   std::span<const float> dout,
                                                   bool deterministic) const {
  c.validate();
  if (const std::string why = why_not_applicable_backward(c); !why.empty())
    throw NotApplicable("kernel '" + name_ + "' attention_backward: " + why);
  const std::size_t rows = static_cast<std::size_t>(c.total_q() * c.heads_q);
  if (out.size() != rows * c.dv || dout.size() != rows * c.dv || lse.size() != rows)
    throw std::invalid_argument(
        "attention_backward call: out, dout need total_q x heads_q x dv = " +
        std::to_string(rows * c.dv) + " values and lse " + std::to_string(rows) + " (got " +
        std::to_string(out.size()) + ", " + std::to_string(dout.size()) + ", " +
        std::to_string(lse.size()) + ")");
  const Strides sq = layout_of(c, c.heads_q, c.seqlen_q, c.total_q(), c.d),
                sk = layout_of(c, c.heads_kv, c.seqlen_k, c.total_k(), c.d),
                sv = layout_of(c, c.heads_kv, c.seqlen_k, c.total_k(), c.dv),
                so = layout_of(c, c.heads_q, c.seqlen_q, c.total_q(), c.dv);
  Buffer q(c.qkv, sq.count), k(c.qkv, sk.count), v(c.qkv, sv.count), o(c.out_type, so.count),
      go(c.out_type, so.count), dq(c.qkv, sq.count), dk(c.qkv, sk.count), dv(c.qkv, sv.count);
  for (Buffer* b : {&q, &k, &v, &o, &go, &dq, &dk, &dv}) b->fill_nan();
  std::vector<unsigned char> live_q(static_cast<std::size_t>(sq.count), 0),
      live_k(static_cast<std::size_t>(sk.count), 0), live_v(static_cast<std::size_t>(sv.count), 0);
  scatter(c, true, c.heads_q, c.d, sq, c.q.data(), &q, &live_q, "q");
  scatter(c, false, c.heads_kv, c.d, sk, c.k.data(), &k, &live_k, "k");
  scatter(c, false, c.heads_kv, c.dv, sv, c.v.data(), &v, &live_v, "v");
  scatter(c, true, c.heads_q, c.dv, so, out.data(), &o, nullptr, "out");
  scatter(c, true, c.heads_q, c.dv, so, dout.data(), &go, nullptr, "dout");
  const Buffer dq0 = dq, dk0 = dk, dv0 = dv;
  // lse in the ABI's order: [batch][heads_q][seqlen_q], or [heads_q][total_q] with varlen.
  std::vector<float> lse_abi(
      c.varlen() ? rows : static_cast<std::size_t>(c.batch * c.heads_q * c.seqlen_q), NAN);
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t i = 0; i < c.len_q(b); ++i)
      for (std::int64_t h = 0; h < c.heads_q; ++h) {
        const std::int64_t row = c.row_q(b, i);
        lse_abi[static_cast<std::size_t>(c.varlen() ? h * c.total_q() + row
                                                    : (b * c.heads_q + h) * c.seqlen_q + i)] =
            lse[static_cast<std::size_t>(row * c.heads_q + h)];
      }
  std::vector<float> dsinks(c.sinks.size(), NAN);
  detail::Stage st(memory());
  sa_attention_v2_args a{};
  a.struct_size = sizeof a;
  a.qkv_dtype = abi_of(c.qkv);
  a.out_dtype = abi_of(c.out_type);
  a.batch = c.batch;
  a.heads_q = c.heads_q;
  a.heads_kv = c.heads_kv;
  std::int64_t mq = c.seqlen_q, mk = c.seqlen_k;
  if (c.varlen()) {
    mq = mk = 0;
    for (std::int64_t b = 0; b < c.batch; ++b)
      mq = std::max(mq, c.len_q(b)), mk = std::max(mk, c.len_k(b));
    a.cu_seqlens_q = static_cast<const std::int32_t*>(st.in(c.cu_q.data(), c.cu_q.size() * 4));
    a.cu_seqlens_k = static_cast<const std::int32_t*>(st.in(c.cu_k.data(), c.cu_k.size() * 4));
  }
  a.seqlen_q = mq;
  a.seqlen_k = mk;
  a.head_dim = c.d;
  a.head_dim_v = c.dv;
  a.q = {st.in(q.bytes.data(), q.bytes.size()), sq.b, sq.h, sq.s};
  a.k = {st.in(k.bytes.data(), k.bytes.size()), sk.b, sk.h, sk.s};
  a.v = {st.in(v.bytes.data(), v.bytes.size()), sv.b, sv.h, sv.s};
  a.out = st.in(o.bytes.data(), o.bytes.size());
  a.out_stride_b = so.b;
  a.out_stride_h = so.h;
  a.out_stride_s = so.s;
  a.lse = static_cast<float*>(st.in(lse_abi.data(), lse_abi.size() * 4));
  a.key_padding_mask = c.key_padding_mask.empty()
                           ? nullptr
                           : static_cast<const std::uint8_t*>(
                                 st.in(c.key_padding_mask.data(), c.key_padding_mask.size()));
  a.scale = c.scale;
  a.causal = c.causal ? 1 : 0;
  a.alignment = c.top_left ? SA_ALIGN_TOP_LEFT : SA_ALIGN_BOTTOM_RIGHT;
  a.window_left = c.window_left;
  a.window_right = c.window_right;
  a.softcap = c.softcap;
  a.alibi_slopes =
      c.alibi_slopes.empty()
          ? nullptr
          : static_cast<const float*>(st.in(c.alibi_slopes.data(), c.alibi_slopes.size() * 4));
  a.sinks = c.sinks.empty() ? nullptr
                            : static_cast<const float*>(st.in(c.sinks.data(), c.sinks.size() * 4));
  a.q_descale = c.q_descale;
  a.k_descale = c.k_descale;
  a.v_descale = c.v_descale;
  a.num_splits = c.num_splits;
  sa_attention_backward_args ba{};
  ba.struct_size = sizeof ba;
  ba.forward = &a;
  ba.dout = {st.in(go.bytes.data(), go.bytes.size()), so.b, so.h, so.s};
  ba.dq = {st.out(dq.bytes.data(), dq.bytes.size()), sq.b, sq.h, sq.s};
  ba.dk = {st.out(dk.bytes.data(), dk.bytes.size()), sk.b, sk.h, sk.s};
  ba.dv = {st.out(dv.bytes.data(), dv.bytes.size()), sv.b, sv.h, sv.s};
  ba.dsinks =
      c.sinks.empty() ? nullptr : static_cast<float*>(st.out(dsinks.data(), dsinks.size() * 4));
  ba.deterministic = deterministic ? 1 : 0;
  detail::check_status(*this,
                       detail::timed_call([&] { return k_->attention_backward(k_->ctx, &ba); }),
                       Op::attention_backward);
  st.fetch();
  check_padding(*this, c, "dq", dq0, dq, live_q);
  check_padding(*this, c, "dk", dk0, dk, live_k);
  check_padding(*this, c, "dv", dv0, dv, live_v);
  AttentionBackwardResult g;
  g.dq = gather(c, true, c.heads_q, c.d, sq, dq);
  g.dk = gather(c, false, c.heads_kv, c.d, sk, dk);
  g.dv = gather(c, false, c.heads_kv, c.dv, sv, dv);
  g.dsinks = dsinks;
  if (call_log::recording()) {
    call_log::Call rc = call_log::attention_call("attention_backward", c);
    const std::int64_t tq = c.total_q(), tk = c.total_k();
    rc.args.push_back({"deterministic", deterministic ? 1.0 : 0.0, {}});
    rc.inputs.push_back(call_log::floats("out", {tq, c.heads_q, c.dv}, {out.begin(), out.end()}));
    rc.inputs.push_back(call_log::floats("lse", {tq, c.heads_q}, {lse.begin(), lse.end()}));
    rc.inputs.push_back(
        call_log::floats("dout", {tq, c.heads_q, c.dv}, {dout.begin(), dout.end()}));
    rc.got.push_back(call_log::floats("dq", {tq, c.heads_q, c.d}, g.dq));
    rc.got.push_back(call_log::floats("dk", {tk, c.heads_kv, c.d}, g.dk));
    rc.got.push_back(call_log::floats("dv", {tk, c.heads_kv, c.dv}, g.dv));
    if (!g.dsinks.empty()) rc.got.push_back(call_log::floats("dsinks", {c.heads_q}, g.dsinks));
    call_log::record(std::move(rc));
  }
  return g;
}

}  // namespace sa
