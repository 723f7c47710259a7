// A case id that is the same everywhere: the same 64-bit number for the same
// case from every build (gcc or clang, libstdc++ or libc++, any machine), so
// that shards on different machines agree on which cases each one runs and
// on the rows each one draws (issue 34). std::hash is not used: its values
// are the standard library's own choice.
//
// The hash (docs/scale-out.md, "Case ids"):
//
//   mix(z)   = z ^= z >> 30, z *= 0xBF58476D1CE4E5B9,
//              z ^= z >> 27, z *= 0x94D049BB133111EB,
//              z ^ (z >> 31)                      (SplitMix64's finaliser)
//   hash(B)  = h := len(B);
//              for each 8-byte word w of B, little-endian, the last one padded
//              with zero bytes: h := mix((h ^ w) + 0x9E3779B97F4A7C15);
//              result mix(h + 0x9E3779B97F4A7C15)
//
// over a canonical byte encoding B of the case: a sequence of fields, each a
// one-byte tag followed by its value:
//
//   tag 's' string:  u64 byte length, then the bytes (UTF-8, no terminator)
//   tag 'u' integer: u64, two's complement for a signed value
//   tag 'd' real:    the IEEE-754 binary64 bits as a u64
//   tag 'v' shape:   u64 rank, then each extent as a u64
//
// every u64 written as 8 bytes little-endian. The fields of a case, in order
// (case_id below): the domain string "softmax-audit case v1", the kernel's
// identity (a plugin's SHA-256 in hex, a built-in's "builtin:<name>"), the
// operation, the dtype's name, the shape, the distribution, theta, the
// generator level, the seed and the case index. A sweep row's input seed
// (sweep_row_seed) is the hash of "softmax-audit sweep row v1", the seed, n
// and the distribution: the same rows for every kernel.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace sa {

// SplitMix64's output function (Steele, Lea and Flood 2014; Vigna's splitmix64.c).
constexpr std::uint64_t splitmix64_mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

inline constexpr std::uint64_t kSplitMix64Gamma = 0x9E3779B97F4A7C15ull;

// The hash above of a byte string.
inline std::uint64_t splitmix64_hash(const std::string& bytes) {
  std::uint64_t h = static_cast<std::uint64_t>(bytes.size());
  for (std::size_t i = 0; i < bytes.size(); i += 8) {
    std::uint64_t w = 0;
    for (std::size_t b = 0; b < 8 && i + b < bytes.size(); ++b)
      w |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[i + b])) << (8 * b);
    h = splitmix64_mix((h ^ w) + kSplitMix64Gamma);
  }
  return splitmix64_mix(h + kSplitMix64Gamma);
}

// Builds the canonical encoding field by field.
class CaseEncoder {
 public:
  CaseEncoder& str(const std::string& s) {
    bytes_ += 's';
    u64(s.size());
    bytes_ += s;
    return *this;
  }
  CaseEncoder& integer(std::uint64_t v) {
    bytes_ += 'u';
    u64(v);
    return *this;
  }
  CaseEncoder& sinteger(std::int64_t v) { return integer(static_cast<std::uint64_t>(v)); }
  CaseEncoder& real(double x) {
    std::uint64_t bits = 0;
    static_assert(sizeof bits == sizeof x, "binary64");
    std::memcpy(&bits, &x, sizeof bits);
    bytes_ += 'd';
    u64(bits);
    return *this;
  }
  CaseEncoder& shape(const std::vector<std::int64_t>& extents) {
    bytes_ += 'v';
    u64(extents.size());
    for (std::int64_t e : extents) u64(static_cast<std::uint64_t>(e));
    return *this;
  }
  const std::string& bytes() const { return bytes_; }
  std::uint64_t hash() const { return splitmix64_hash(bytes_); }

 private:
  void u64(std::uint64_t v) {
    for (int b = 0; b < 8; ++b) bytes_ += static_cast<char>((v >> (8 * b)) & 0xFF);
  }
  std::string bytes_;
};

// What identifies one case.
struct CaseKey {
  std::string kernel;               // "builtin:<name>" or a plugin's SHA-256 (hex)
  std::string op;                   // "sweep" for a sweep row; an Op's name for a property case
  std::string dtype;                // name_of(DType)
  std::vector<std::int64_t> shape;  // {n} for a row
  std::string distribution;
  double theta = 1;
  std::int64_t level = 1;
  std::uint64_t seed = 1;
  std::uint64_t index = 0;  // the case's index within its property (0 for a sweep row)
};

inline std::uint64_t case_id(const CaseKey& k) {
  return CaseEncoder()
      .str("softmax-audit case v1")
      .str(k.kernel)
      .str(k.op)
      .str(k.dtype)
      .shape(k.shape)
      .str(k.distribution)
      .real(k.theta)
      .sinteger(k.level)
      .integer(k.seed)
      .integer(k.index)
      .hash();
}

// The seed a sweep row's logits are drawn from: the same for every kernel,
// dtype, temperature and level (the sweep's rows differ only by seed, n and
// distribution, as they always have).
inline std::uint64_t sweep_row_seed(std::uint64_t seed, std::int64_t n,
                                    const std::string& distribution) {
  return CaseEncoder()
      .str("softmax-audit sweep row v1")
      .integer(seed)
      .sinteger(n)
      .str(distribution)
      .hash();
}

}  // namespace sa
