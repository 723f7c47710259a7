// The vector steps of the CPU attention backward (kernels/cpu/backward.cpp),
// one block of query rows x one tile of keys of one head at a time, compiled
// per Highway target in kernels/cpu/backward_tile.cpp:
//
//   block_weights    P = exp(s - lse) and dS = P (dO.v - D) softcap'(x) of the
//                    block, 0 where a key is not visible (the scores are
//                    kernel.h's: scale, softcap, ALiBi, in that order);
//   accumulate_rows  dst[r] += sum_j coef[r][j] src[j]   (dQ += dS K);
//   accumulate_cols  dst[j] += sum_r coef[r][j] src[r]   (dK += dS^T Q, dV += P^T dO).
//
// Sums run in a fixed order (key by key, row by row, each output element in
// one lane), whatever the target or the thread count. Accuracy: float32
// throughout; Highway's Exp and Tanh are within 1 and 4 ulp. Where a source
// holds NaN or inf, a coefficient that is exactly 0 for every row (or key) of
// a register group skips its source row, so a masked key's NaN or inf never
// reaches a gradient.
#pragma once

#include <cstdint>

namespace sa::kernels::bwd {

// Keys per tile and the padding of packed rows (floats): every target's
// vector length divides both.
constexpr std::int64_t kBk = 64;
constexpr std::int64_t kPad = 16;
constexpr std::int64_t padded(std::int64_t n) { return (n + kPad - 1) / kPad * kPad; }

struct Block {
  std::int64_t nr = 0;  // query rows (any count)
  std::int64_t nc = 0;  // keys of the tile, <= kBk
  std::int64_t d = 0, dv = 0;
  const float* q = nullptr;  // nr rows, q_stride apart (d used)
  std::int64_t q_stride = 0;
  const float* dout = nullptr;  // nr rows, dout_stride apart (dv used)
  std::int64_t dout_stride = 0;
  const float* kt = nullptr;   // d x kBk: the key tile transposed (columns >= nc unused)
  const float* vt = nullptr;   // dv x kBk: the value tile transposed
  const float* lse = nullptr;  // row r's at lse[r * ld_stride]; -inf: the row sees nothing
  const float* D = nullptr;    // dO . O per row, D[r * ld_stride]
  std::int64_t ld_stride = 0;
  const std::int64_t* lo = nullptr;  // row r sees tile keys [lo[r], hi[r]) ...
  const std::int64_t* hi = nullptr;
  const std::uint8_t* key_visible = nullptr;  // ... whose byte is not 0 (null: all)
  float scale = 1.0f, softcap = 0.0f;
  bool alibi = false;
  float slope = 0.0f;
  const std::int64_t* diag = nullptr;  // row r's diagonal key, tile-relative (ALiBi)
};

// p, ds: nr x kBk each (row r at r * kBk); every column < kBk is written.
void block_weights(const Block& b, float* p, float* ds);
// dst (rows dst_stride apart, width w, a multiple of kPad) += coef (nr x kBk,
// keys < nc) times src (nc rows, src_stride apart). src_finite: every src
// value is finite (else keys whose coefficients are all 0 are skipped, so
// that 0 times a masked key's NaN never reaches dst; the same bits otherwise).
void accumulate_rows(std::int64_t nr, std::int64_t nc, std::int64_t w, const float* coef,
                     const float* src, std::int64_t src_stride, float* dst, std::int64_t dst_stride,
                     bool src_finite);
// dst (nc rows, dst_stride apart, width w) += coef^T (keys < nc of nr x kBk)
// times src (nr rows, src_stride apart); src_finite as above, for rows.
void accumulate_cols(std::int64_t nr, std::int64_t nc, std::int64_t w, const float* coef,
                     const float* src, std::int64_t src_stride, float* dst, std::int64_t dst_stride,
                     bool src_finite);

}  // namespace sa::kernels::bwd
