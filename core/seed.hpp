// Seeds as the tool prints them: decimal integers in [0, 2^64 - 1], read
// back exactly by every subcommand (--seed), the gate spec (`seed`, an
// integer or, past TOML's 2^63 - 1, a string of digits) and the Python entry.
#pragma once

#include <string>

namespace sa {

// Returns false (and leaves `out` alone) for anything but a decimal integer
// from 0 to 2^64 - 1: a sign, spaces, other characters, or a larger value
// (never clamped: a clamped seed would silently draw other inputs than the
// run it came from).
inline bool parse_seed(const std::string& s, unsigned long long& out) {
  if (s.empty() || s.size() > 20) return false;
  unsigned long long v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    const unsigned d = static_cast<unsigned>(c - '0');
    if (v > (~0ull - d) / 10) return false;  // past 2^64 - 1
    v = v * 10 + d;
  }
  out = v;
  return true;
}

}  // namespace sa
