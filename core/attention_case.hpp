// One batched attention problem as the suite holds it (interface v2,
// include/softmax_audit/kernel.h: sa_attention_v2_args), independent of the
// memory layout a kernel call uses.
//
// Logical storage is packed BSHD: token rows of every sequence one after the
// other (fixed lengths: sequence b's query i is row b * seqlen_q + i; varlen:
// row cu_q[b] + i), each row holding every head's vector. So
//   q[(row * heads_q + h) * d + c],  k[(row * heads_kv + h) * d + c],
//   v[(row * heads_kv + h) * dv + c], out[(row * heads_q + h) * dv + c],
//   lse / entropy / beta[row * heads_q + h].
// Values are float; for bfloat16, float16 and fp8 inputs they must already be
// representable in that type (the handle refuses others, naming the element).
// The call's layout (BSHD or BHSD, padding between rows and heads) is chosen
// by `layout`, `row_pad` and `head_pad`; results always come back packed BSHD.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/dtype.hpp"

namespace sa {

// Element types of an attention call (the quantised ones, fp8, fp4 e2m1 and
// int8, are inputs only).
enum class AttnType { float32, bfloat16, float16, fp8_e4m3, fp8_e5m2, fp4_e2m1, int8 };
inline const char* name_of(AttnType t) {
  switch (t) {
    case AttnType::float32:
      return "float32";
    case AttnType::bfloat16:
      return "bfloat16";
    case AttnType::float16:
      return "float16";
    case AttnType::fp8_e4m3:
      return "fp8_e4m3";
    case AttnType::fp8_e5m2:
      return "fp8_e5m2";
    case AttnType::fp4_e2m1:
      return "fp4_e2m1";
    case AttnType::int8:
      return "int8";
  }
  return "?";
}
inline bool is_fp8(AttnType t) { return t == AttnType::fp8_e4m3 || t == AttnType::fp8_e5m2; }
// Quantised inputs (fp8, fp4, int8): values are elements times their block
// scale (if any) and their descale; the output type is a separate one.
inline bool is_quantised(AttnType t) {
  return is_fp8(t) || t == AttnType::fp4_e2m1 || t == AttnType::int8;
}
// The block scales' type (kernel.h scale_dtype): E8M0 (MXFP8, MXFP4), e4m3
// (NVFP4), float32 (int8 per token and head, or per block).
enum class ScaleType { e8m0, e4m3, f32 };

enum class AttnLayout { bshd, bhsd };

// A mask or bias tensor of a case (kernel.h: sa_mask_tensor), held packed
// over its own extents [nb][nh][nq][nk]; an extent of 1 broadcasts (the call
// passes stride 0 there). Values are floats (the uint8 masks: 0 or 1).
// `kt` lays the call's copy out key-major ([nb][nh][nk][nq]: stride_q 1),
// so a kernel that takes stride_k for 1 reads a transposed mask.
struct MaskTensor {
  std::int64_t nb = 0, nh = 0, nq = 0, nk = 0;
  std::vector<float> v;  // empty: not used
  bool kt = false;
  bool used() const { return !v.empty(); }
  // Element (b, h, i, j), broadcast dimensions at index 0.
  float at(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) const {
    return v[static_cast<std::size_t>(
        (((nb > 1 ? b : 0) * nh + (nh > 1 ? h : 0)) * nq + (nq > 1 ? i : 0)) * nk +
        (nk > 1 ? j : 0))];
  }
};
// A page pool whose named pages start this many bytes or more into it is
// reserved sparsely (only its named pages are memory) by the suite's call
// (kernels/attention_v2_call.cpp) and by the gate's guard (gate/guard.cpp):
// attention_v2.large_offsets puts them past 2^31 elements.
inline constexpr std::int64_t kLargePoolBytes = std::int64_t{1} << 28;

struct AttentionCase {
  AttnType qkv = AttnType::float32;
  AttnType out_type = AttnType::float32;
  std::int64_t batch = 1, heads_q = 1, heads_kv = 1;
  std::int64_t seqlen_q = 0, seqlen_k = 0;  // per sequence (fixed lengths)
  std::int64_t d = 0, dv = 0;
  // Varlen: batch + 1 offsets each (empty: fixed lengths).
  std::vector<std::int32_t> cu_q, cu_k;
  std::vector<float> q, k, v;
  std::vector<std::uint8_t> key_padding_mask;  // empty, or one per key row (packed)
  double scale = 1.0;
  bool causal = false;
  bool top_left = false;  // alignment of causal, window and ALiBi (false: bottom-right)
  std::int64_t window_left = -1, window_right = -1;
  double softcap = 0.0;
  std::vector<float> alibi_slopes;  // empty or heads_q
  std::vector<float> sinks;         // empty or heads_q
  float q_descale = 1.0f, k_descale = 1.0f, v_descale = 1.0f;
  bool adaptive = false;
  std::int64_t num_splits = 0;
  // Call layout.
  AttnLayout layout = AttnLayout::bshd;
  std::int64_t row_pad = 0, head_pad = 0;  // extra elements after each head vector / row
  // seqused_k (kernel.h): empty, or `batch` counts of key slots the call's
  // key buffer holds after each sequence's len_k(b) keys. The call then
  // passes seqused_k[b] = len_k(b), and the extra slots hold NaN (a kernel
  // that reads them fails). The case's keys (k, v, cu_k, seqlen_k,
  // key_padding_mask) are the used ones only, so the reference and every
  // property see exactly the keys a kernel may read.
  std::vector<std::int32_t> kv_extra;
  // A varlen case with equal query lengths called with fixed lengths
  // (q [batch][seqlen_q], k [batch][N]): the sequences' key counts then
  // differ only through seqused_k (flash_attn_with_kvcache's cache_seqlens),
  // so it needs kv_extra.
  bool dense_call = false;
  // Paged KV (kernel.h): 0 contiguous; else tokens per page (1..1024). The
  // call scatters the keys into a pool of pages in the order paged_kv()
  // derives from page_seed, the physical ids from page_id_base up (65,530:
  // ids across 65,535); every other page and slot holds NaN. A base whose
  // pages lie past 2^31 elements of the pool (attention_v2.large_offsets)
  // makes the call reserve the pool sparsely: only the pages from
  // page_id_base up are memory (kLargePoolBytes).
  std::int64_t page_size = 0;
  std::int64_t page_id_base = 0;
  std::uint64_t page_seed = 0;
  // Masks beyond causal and window (kernel.h, forward only): the boolean
  // attn_mask, the additive attn_bias, the block-sparse block_mask (blocks
  // of block_q x block_k) and the speculative-decoding tree_mask, indexed by
  // each sequence's own query and key indices (extents: largest lengths).
  MaskTensor attn_mask, attn_bias, block_mask, tree_mask;
  std::int64_t block_q = 0, block_k = 0;
  // Block scales (kernel.h scale_block): 0 none; else quantised inputs whose
  // values are elements times a scale per run of scale_block head-dim
  // elements, of type scale_type. The values here are the products; the call
  // finds each run's scale (core/quant.hpp run_scale: for E8M0 the smallest
  // power of two that keeps every element within the format) and passes
  // elements and scales.
  std::int64_t scale_block = 0;
  ScaleType scale_type = ScaleType::e8m0;
  // MLA (DeepSeek's latent attention, FlashMLA): V is a prefix view of K.
  // The call passes v.data = k.data with k's strides (kernel.h: k and v may
  // alias), V being the first dv elements of each key vector, whenever the
  // case's v is exactly that (dv <= d); a case derived by changing k or v
  // alone (poisoned keys, say) is called with separate buffers.
  bool v_in_k = false;
  // Descales per (sequence, kv head) (kernel.h q/k/v_descale_bh, FlashAttention
  // 3's (batch, nheads_k) descales): fp8 inputs whose values are fp8 elements
  // times a power of two per (sequence, kv head) slab of q (the query heads of
  // one group), k and v. The values here are the products; the call finds each
  // slab's exponent (the smallest that keeps every element within the format,
  // as for block scales) and passes the elements and 2^e as the descale. The
  // scalar descales still apply on top.
  bool descale_bh = false;

  bool varlen() const { return !cu_q.empty(); }
  std::int64_t total_q() const { return varlen() ? cu_q.back() : batch * seqlen_q; }
  std::int64_t total_k() const { return varlen() ? cu_k.back() : batch * seqlen_k; }
  std::int64_t len_q(std::int64_t b) const { return varlen() ? cu_q[b + 1] - cu_q[b] : seqlen_q; }
  std::int64_t len_k(std::int64_t b) const { return varlen() ? cu_k[b + 1] - cu_k[b] : seqlen_k; }
  std::int64_t row_q(std::int64_t b, std::int64_t i) const {
    return (varlen() ? cu_q[b] : b * seqlen_q) + i;
  }
  std::int64_t row_k(std::int64_t b, std::int64_t j) const {
    return (varlen() ? cu_k[b] : b * seqlen_k) + j;
  }
  // Key/value head read by query head h.
  std::int64_t kv_head(std::int64_t h) const { return h / (heads_q / heads_kv); }
  bool paged() const { return page_size > 0; }
  bool masks() const {
    return attn_mask.used() || attn_bias.used() || block_mask.used() || tree_mask.used();
  }
  std::int64_t max_len_q() const {
    std::int64_t n = 0;
    for (std::int64_t b = 0; b < batch; ++b) n = std::max(n, len_q(b));
    return n;
  }
  std::int64_t max_len_k() const {
    std::int64_t n = 0;
    for (std::int64_t b = 0; b < batch; ++b) n = std::max(n, len_k(b));
    return n;
  }
  // v_in_k and every value of v the first dv elements of its key's k (bitwise).
  bool v_aliases_k() const {
    if (!v_in_k || dv > d) return false;
    for (std::int64_t r = 0; r < total_k() * heads_kv; ++r)
      if (std::memcmp(&v[static_cast<std::size_t>(r * dv)], &k[static_cast<std::size_t>(r * d)],
                      static_cast<std::size_t>(dv) * sizeof(float)) != 0)
        return false;
    return true;
  }
  bool seqused() const { return !kv_extra.empty(); }
  // Whether the call passes cu_seqlens (a varlen case not called dense).
  bool call_varlen() const { return varlen() && !dense_call; }
  // Keys in the call's buffer for sequence b (N_b of kernel.h): its used keys
  // plus kv_extra[b]; with fixed-length calls the largest of those (every
  // sequence's buffer has seqlen_k rows).
  std::int64_t key_buffer(std::int64_t b) const {
    if (call_varlen()) return len_k(b) + (seqused() ? kv_extra[b] : 0);
    std::int64_t n = 0;
    for (std::int64_t x = 0; x < batch; ++x)
      n = std::max<std::int64_t>(n, len_k(x) + (seqused() ? kv_extra[x] : 0));
    return n;
  }
  // Throws std::invalid_argument naming the field and what was expected.
  void validate() const;
  // One line describing the shape and features (for counterexamples).
  std::string describe() const;
};

inline void AttentionCase::validate() const {
  auto fail = [](const std::string& what) {
    throw std::invalid_argument("attention case: " + what);
  };
  auto s = [](std::int64_t x) { return std::to_string(x); };
  if (batch < 1 || heads_q < 1 || heads_kv < 1 || d < 1 || dv < 1)
    fail("batch, heads_q, heads_kv, d, dv must be >= 1 (got " + s(batch) + ", " + s(heads_q) +
         ", " + s(heads_kv) + ", " + s(d) + ", " + s(dv) + ")");
  if (heads_q % heads_kv != 0)
    fail("heads_q = " + s(heads_q) + " is not a multiple of heads_kv = " + s(heads_kv));
  if (varlen()) {
    if (static_cast<std::int64_t>(cu_q.size()) != batch + 1 ||
        static_cast<std::int64_t>(cu_k.size()) != batch + 1)
      fail("cu_q and cu_k need batch + 1 = " + s(batch + 1) + " offsets each");
    if (cu_q[0] != 0 || cu_k[0] != 0) fail("cu_q[0] and cu_k[0] must be 0");
    for (std::int64_t b = 0; b < batch; ++b)
      if (cu_q[b + 1] < cu_q[b] || cu_k[b + 1] < cu_k[b])
        fail("cu offsets must not decrease (at sequence " + s(b) + ")");
  } else {
    if (!cu_k.empty()) fail("cu_k given without cu_q");
    if (seqlen_q < 0 || seqlen_k < 0) fail("seqlen_q and seqlen_k must be >= 0");
  }
  auto expect = [&](const char* f, std::size_t got, std::int64_t want) {
    if (static_cast<std::int64_t>(got) != want)
      fail(std::string(f) + " has " + std::to_string(got) + " values, expected " + s(want));
  };
  expect("q", q.size(), total_q() * heads_q * d);
  expect("k", k.size(), total_k() * heads_kv * d);
  expect("v", v.size(), total_k() * heads_kv * dv);
  if (!key_padding_mask.empty()) expect("key_padding_mask", key_padding_mask.size(), total_k());
  if (!alibi_slopes.empty()) expect("alibi_slopes", alibi_slopes.size(), heads_q);
  if (!sinks.empty()) expect("sinks", sinks.size(), heads_q);
  if (window_left < -1 || window_right < -1) fail("window bounds must be >= -1 (-1: unbounded)");
  if (!(softcap >= 0) || !std::isfinite(softcap)) fail("softcap must be finite and >= 0");
  if (!std::isfinite(scale)) fail("scale must be finite");
  if (is_quantised(out_type))
    fail(std::string(name_of(out_type)) +
         " is an input type only; out_type must be float32/bfloat16/float16");
  if (!is_quantised(qkv) && (q_descale != 1.0f || k_descale != 1.0f || v_descale != 1.0f))
    fail("descales apply to quantised (fp8, fp4, int8) inputs only");
  if (qkv == AttnType::fp4_e2m1 && (d % 2 || dv % 2 || row_pad % 2 || head_pad % 2))
    fail("fp4_e2m1 packs two elements per byte: d, dv, row_pad and head_pad must be even (d = " +
         s(d) + ", dv = " + s(dv) + ", row_pad = " + s(row_pad) + ", head_pad = " + s(head_pad) +
         ")");
  if (row_pad < 0 || head_pad < 0) fail("row_pad and head_pad must be >= 0");
  if (!kv_extra.empty()) {
    expect("kv_extra", kv_extra.size(), batch);
    for (std::int64_t b = 0; b < batch; ++b)
      if (kv_extra[b] < 0 || kv_extra[b] > (1 << 20))
        fail("kv_extra[" + s(b) + "] = " + s(kv_extra[b]) + " is outside 0..2^20");
  }
  if (dense_call) {
    if (!varlen() || kv_extra.empty())
      fail("dense_call needs a varlen case with kv_extra (seqused_k)");
    for (std::int64_t b = 1; b < batch; ++b)
      if (len_q(b) != len_q(0))
        fail("dense_call needs equal query lengths (sequence " + s(b) + " has " + s(len_q(b)) +
             ", sequence 0 " + s(len_q(0)) + ")");
  }
  if (scale_block < 0 || scale_block > 1024)
    fail("scale_block = " + s(scale_block) + " is outside 0..1024 (0: no block scales)");
  if (scale_block > 0 && !is_quantised(qkv))
    fail("block scales (scale_block > 0) need quantised (fp8, fp4, int8) inputs");
  if (scale_block == 0 && scale_type != ScaleType::e8m0)
    fail("scale_type is e4m3 or f32 without block scales (scale_block = 0)");
  if (descale_bh && !is_fp8(qkv)) fail("descales per (sequence, kv head) need fp8 inputs");
  if (page_size < 0 || page_size > 1024)
    fail("page_size = " + s(page_size) + " is outside 0..1024 (0: contiguous)");
  // Page ids are int32 (kernel.h); the pages below page_id_base are never
  // named, so only the pages from the base up count towards the memory.
  if (v_in_k && dv > d)
    fail("v_in_k (V a prefix view of K) needs dv <= d, not dv = " + s(dv) + ", d = " + s(d));
  if (page_id_base < 0 || page_id_base > (std::int64_t{1} << 30))
    fail("page_id_base = " + s(page_id_base) + " is outside 0..2^30");
  // Masks: each extent 1 (broadcast) or the full one.
  auto mask = [&](const MaskTensor& m, const char* name, std::int64_t eq, std::int64_t ek) {
    if (!m.used()) return;
    auto dim = [&](std::int64_t got, std::int64_t full, const char* which) {
      if (got != 1 && got != full)
        fail(std::string(name) + " extent " + which + " = " + s(got) + " is neither 1 nor " +
             s(full));
    };
    dim(m.nb, batch, "batch");
    dim(m.nh, heads_q, "heads");
    dim(m.nq, std::max<std::int64_t>(eq, 1), "q");
    dim(m.nk, std::max<std::int64_t>(ek, 1), "k");
    if (static_cast<std::int64_t>(m.v.size()) != m.nb * m.nh * m.nq * m.nk)
      fail(std::string(name) + " holds " + s(static_cast<std::int64_t>(m.v.size())) +
           " values, not nb*nh*nq*nk = " + s(m.nb * m.nh * m.nq * m.nk));
  };
  const std::int64_t mq = max_len_q(), mk = max_len_k();
  mask(attn_mask, "attn_mask", mq, mk);
  mask(attn_bias, "attn_bias", mq, mk);
  mask(tree_mask, "tree_mask", mq, mq);
  if (block_mask.used()) {
    if (block_q < 1 || block_k < 1 || block_q > (1 << 20) || block_k > (1 << 20))
      fail("block_q = " + s(block_q) + ", block_k = " + s(block_k) + ": both must be 1..2^20");
    mask(block_mask, "block_mask", (mq + block_q - 1) / block_q, (mk + block_k - 1) / block_k);
  }
  for (float x : attn_bias.v)
    if (!std::isfinite(x)) fail("attn_bias holds a non-finite value");
  if (paged()) {
    std::int64_t pages = 4;
    for (std::int64_t b = 0; b < batch; ++b) pages += (key_buffer(b) + page_size - 1) / page_size;
    const std::int64_t elems = pages * page_size * heads_kv * std::max(d, dv);
    if (elems > (std::int64_t{1} << 25))
      fail("the page pool (page_size " + s(page_size) + ") would hold " + s(elems) +
           " elements in its named pages, above 2^25");
    if ((page_id_base + pages) * page_size * heads_kv * std::max(d, dv) > (std::int64_t{1} << 34))
      fail("the page pool (page_id_base " + s(page_id_base) +
           ") would span more than 2^34 elements");
  }
}

// The block table a paged case is called with (kernel.h: block_table,
// block_table_stride, num_pages): sequence b's pages are the first
// ceil(key_buffer(b) / page_size) entries of its row, distinct physical ids
// in a shuffled order, all at or above page_id_base; the other entries of a
// row name spare pages (NaN). Pages below page_id_base are never named.
struct PagedKv {
  std::int64_t stride = 0;                // block_table_stride (entries per row)
  std::int64_t num_pages = 0;             // pool size
  std::vector<std::int32_t> block_table;  // batch x stride
  std::vector<std::int64_t> spare;        // ids no sequence uses (NaN pages)
};

inline PagedKv paged_kv(const AttentionCase& c) {
  PagedKv p;
  if (!c.paged()) return p;
  std::uint64_t x = c.page_seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;
  auto next = [&x] {  // SplitMix64
    std::uint64_t z = (x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  std::vector<std::int64_t> used(static_cast<std::size_t>(c.batch));
  std::int64_t live = 0, most = 0;
  for (std::int64_t b = 0; b < c.batch; ++b) {
    used[b] = (c.key_buffer(b) + c.page_size - 1) / c.page_size;
    live += used[b];
    most = std::max(most, used[b]);
  }
  const std::int64_t spare = 1 + static_cast<std::int64_t>(next() % 3);
  p.stride = std::max<std::int64_t>(1, most) + static_cast<std::int64_t>(next() % 2);
  p.num_pages = c.page_id_base + live + spare;
  std::vector<std::int64_t> ids(static_cast<std::size_t>(live + spare));
  for (std::size_t i = 0; i < ids.size(); ++i)
    ids[i] = c.page_id_base + static_cast<std::int64_t>(i);
  for (std::size_t i = ids.size(); i > 1; --i) std::swap(ids[i - 1], ids[next() % i]);
  p.spare.assign(ids.begin() + live, ids.end());
  p.block_table.resize(static_cast<std::size_t>(c.batch * p.stride));
  std::size_t k = 0;
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t e = 0; e < p.stride; ++e)
      p.block_table[static_cast<std::size_t>(b * p.stride + e)] = static_cast<std::int32_t>(
          e < used[b] ? ids[k++] : p.spare[static_cast<std::size_t>(e) % p.spare.size()]);
  return p;
}

inline std::string AttentionCase::describe() const {
  std::string r = std::string(name_of(qkv)) +
                  (out_type != qkv ? std::string("->") + name_of(out_type) : "") +
                  " batch=" + std::to_string(batch) + " heads=" + std::to_string(heads_q) + "/" +
                  std::to_string(heads_kv);
  if (varlen()) {
    r += " varlen q=[";
    for (std::int64_t b = 0; b < batch; ++b) r += (b ? "," : "") + std::to_string(len_q(b));
    r += "] k=[";
    for (std::int64_t b = 0; b < batch; ++b) r += (b ? "," : "") + std::to_string(len_k(b));
    r += "]";
  } else {
    r += " sq=" + std::to_string(seqlen_q) + " sk=" + std::to_string(seqlen_k);
  }
  r += " d=" + std::to_string(d) + (dv != d ? " dv=" + std::to_string(dv) : "");
  if (causal) r += top_left ? " causal(top-left)" : " causal(bottom-right)";
  if (window_left >= 0 || window_right >= 0)
    r += " window=(" + std::to_string(window_left) + "," + std::to_string(window_right) + ")" +
         (causal     ? ""
          : top_left ? "tl"
                     : "br");
  if (softcap > 0) r += " softcap=" + std::to_string(softcap);
  if (!alibi_slopes.empty()) r += " alibi";
  if (!sinks.empty()) r += " sinks";
  if (!key_padding_mask.empty()) r += " key_padding";
  if (adaptive) r += " adaptive";
  if (num_splits > 1) r += " splits=" + std::to_string(num_splits);
  if (layout == AttnLayout::bhsd) r += " bhsd";
  if (row_pad || head_pad) r += " pad=" + std::to_string(row_pad) + "/" + std::to_string(head_pad);
  if (seqused()) {
    r += " seqused_k(extra=[";
    for (std::int64_t b = 0; b < batch; ++b) r += (b ? "," : "") + std::to_string(kv_extra[b]);
    r += dense_call ? "] dense)" : "])";
  }
  auto ext = [](const MaskTensor& m) {
    return "[" + std::to_string(m.nb) + "," + std::to_string(m.nh) + "," + std::to_string(m.nq) +
           "," + std::to_string(m.nk) + (m.kt ? "]kt" : "]");
  };
  if (attn_mask.used()) r += " attn_mask" + ext(attn_mask);
  if (attn_bias.used()) r += " attn_bias" + ext(attn_bias);
  if (block_mask.used())
    r += " block_mask(" + std::to_string(block_q) + "x" + std::to_string(block_k) + ")" +
         ext(block_mask);
  if (tree_mask.used()) r += " tree_mask" + ext(tree_mask);
  if (paged())
    r += " paged(page_size=" + std::to_string(page_size) +
         (page_id_base ? " ids>=" + std::to_string(page_id_base) : std::string()) +
         " seed=" + std::to_string(page_seed) + ")";
  if (scale_block > 0)
    r += " block_scaled(" + std::to_string(scale_block) +
         (scale_type == ScaleType::e4m3  ? " e4m3"
          : scale_type == ScaleType::f32 ? " f32"
                                         : "") +
         ")";
  if (v_in_k) r += " v=k[:dv]";
  if (descale_bh) r += " descale_bh";
  return r;
}

struct AttentionResult {
  std::vector<float> out;                 // total_q x heads_q x dv
  std::vector<float> lse, entropy, beta;  // total_q x heads_q
};

}  // namespace sa
