// Batched-attention mutants (interface v2): the naive kernel's attention_v2
// with one bug a real attention kernel has shipped, introduced by changing
// what the naive kernel is handed (so each bug is exactly the one named).
#include "attention_v2_mutants.hpp"

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/naive/attention_v2.hpp"

namespace sa::mutants {
namespace {

enum class Bug { window_edge, gqa_mapping, varlen_offset, past_128_tile };

std::size_t elem_size(sa_dtype t) {
  return t == SA_F32 ? 4 : (t == SA_BF16 || t == SA_F16) ? 2 : 1;
}

// Copies one tensor into a contiguous packed-BSHD buffer with `heads_out`
// heads, head h of the copy read from head map(h) of the original.
template <class Map>
std::vector<unsigned char> regather(const sa_attention_v2_args* a, const sa_tensor& t,
                                    std::int64_t rows_per_seq, std::int64_t total,
                                    std::int64_t heads_out, std::int64_t dim, Map map) {
  const std::size_t e = elem_size(a->qkv_dtype);
  const bool varlen = a->cu_seqlens_q != nullptr;
  const std::int64_t rows = varlen ? total : a->batch * rows_per_seq;
  std::vector<unsigned char> out(static_cast<std::size_t>(rows * heads_out * dim) * e);
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t b = varlen ? 0 : r / std::max<std::int64_t>(rows_per_seq, 1);
    const std::int64_t s = varlen ? r : r % std::max<std::int64_t>(rows_per_seq, 1);
    for (std::int64_t h = 0; h < heads_out; ++h) {
      const std::int64_t off = (varlen ? 0 : b * t.stride_b) + map(h) * t.stride_h + s * t.stride_s;
      std::memcpy(&out[static_cast<std::size_t>((r * heads_out + h) * dim) * e],
                  static_cast<const unsigned char*>(t.data) + static_cast<std::size_t>(off) * e,
                  static_cast<std::size_t>(dim) * e);
    }
  }
  return out;
}

sa_status mutant_call(const Bug bug, const sa_attention_v2_args* a) {
  sa_attention_v2_args m = *a;
  std::vector<std::int32_t> cu_k;
  std::vector<unsigned char> k, v;
  const bool varlen = a->cu_seqlens_q != nullptr;
  const std::int64_t tk = varlen ? a->cu_seqlens_k[a->batch] : a->batch * a->seqlen_k;
  const std::int64_t dk = a->head_dim, dvv = a->head_dim_v;
  switch (bug) {
    case Bug::window_edge:  // the left window edge one key too far
      if (m.window_left >= 0) ++m.window_left;
      break;
    case Bug::gqa_mapping: {  // query head h reads key/value head h % heads_kv
      const std::int64_t hk = a->heads_kv;
      auto wrong = [hk](std::int64_t h) { return h % hk; };
      k = regather(a, a->k, a->seqlen_k, tk, a->heads_q, dk, wrong);
      v = regather(a, a->v, a->seqlen_k, tk, a->heads_q, dvv, wrong);
      m.heads_kv = a->heads_q;
      m.k = {k.data(), a->seqlen_k * a->heads_q * dk, dk, a->heads_q * dk};
      m.v = {v.data(), a->seqlen_k * a->heads_q * dvv, dvv, a->heads_q * dvv};
      break;
    }
    case Bug::varlen_offset:  // every key sequence after the first starts one row late
      if (varlen) {
        cu_k.assign(a->cu_seqlens_k, a->cu_seqlens_k + a->batch + 1);
        for (std::int64_t b = 1; b < a->batch; ++b)
          if (cu_k[b] + 1 <= cu_k[b + 1]) ++cu_k[b];
        m.cu_seqlens_k = cu_k.data();
      }
      break;
    case Bug::past_128_tile: {  // keys past the first 128 of a sequence are read scaled by 1 + 2^-7
      if (a->qkv_dtype != SA_F32) break;
      auto same = [](std::int64_t h) { return h; };
      k = regather(a, a->k, a->seqlen_k, tk, a->heads_kv, dk, same);
      auto* kf = reinterpret_cast<float*>(k.data());
      for (std::int64_t b = 0; b < a->batch; ++b) {
        const std::int64_t k0 = varlen ? a->cu_seqlens_k[b] : b * a->seqlen_k;
        const std::int64_t Lk = varlen ? a->cu_seqlens_k[b + 1] - k0 : a->seqlen_k;
        for (std::int64_t j = 128; j < Lk; ++j)
          for (std::int64_t x = 0; x < a->heads_kv * dk; ++x)
            kf[(k0 + j) * a->heads_kv * dk + x] *= 1.0f + 0x1p-7f;
      }
      m.k = {k.data(), a->seqlen_k * a->heads_kv * dk, dk, a->heads_kv * dk};
      break;
    }
  }
  return kernels::naive_attention_v2(nullptr, &m);
}

template <Bug B>
sa_status call(void*, const sa_attention_v2_args* a) {
  return mutant_call(B, a);
}

const char* last_error(void*) {
  const std::string& e = kernels::naive_last_error();
  return e.empty() ? nullptr : e.c_str();
}

sa_kernel make(const char* name, const char* what,
               sa_status (*fn)(void*, const sa_attention_v2_args*)) {
  sa_kernel k{};
  k.abi_version = SA_KERNEL_ABI_VERSION;
  k.struct_size = sizeof(sa_kernel);
  k.name = name;
  k.description = what;
  k.ops = SA_OP_ATTENTION_V2;
  k.dtypes = SA_DTYPE_F32 | SA_DTYPE_BF16;
  k.memory = SA_MEMORY_HOST;
  k.capabilities = kernels::naive_capabilities();
  k.attention_v2 = fn;
  k.last_error = last_error;
  return k;
}

}  // namespace

std::vector<Mutant> attention_v2_mutants() {
  static const sa_kernel ks[] = {
      make("mutant_v2_window_edge", "sliding window: left edge off by one",
           call<Bug::window_edge>),
      make("mutant_v2_gqa_mapping", "GQA head mapping h % heads_kv instead of h / group",
           call<Bug::gqa_mapping>),
      make("mutant_v2_varlen_offset", "varlen: key offsets of later sequences off by one",
           call<Bug::varlen_offset>),
      make("mutant_v2_past_128_tile", "a bug only past a 128-wide key tile (keys scaled)",
           call<Bug::past_128_tile>),
  };
  std::vector<Mutant> out;
  for (const auto& k : ks) out.push_back({k.description, &k});
  return out;
}

}  // namespace sa::mutants
