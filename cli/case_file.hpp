// Replayable counterexamples (issue 35): case files and their format.
//
// A case file is an uncompressed .npz archive (a zip of "stored" .npy
// members, what numpy.savez writes and numpy.load and torch read): one .npy
// array per input of each recorded kernel call, per value the kernel
// returned ("got_*") and per correctly rounded reference value
// ("expected_*"), plus a member case.json that names the verdict, every
// argument of each call and which array is which. The same JSON is written
// beside it (NAME.json) for reading without unpacking. Call 0's arrays have
// plain names (q, k, v, x, got_out, expected_out); call i > 0's carry the
// prefix "call<i>_". docs/cli.md, "Replayable counterexamples".
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/call_log.hpp"

namespace sa::cli {

// CRC-32 (IEEE 802.3, the zip format's), of `size` bytes.
std::uint32_t crc32(const void* data, std::size_t size);

// One .npy array: little-endian float32, uint8 or int32 (Array::kind).
std::string npy_bytes(const call_log::Array& a);
// Parses what npy_bytes writes (and numpy writes for those dtypes, C order).
// Throws std::invalid_argument naming `what` and what was expected.
call_log::Array parse_npy(const std::string& bytes, const std::string& what);

// A zip of stored members, in order. Throws std::invalid_argument when a
// member is too large for a zip without zip64 (4 GiB).
std::string zip_stored(const std::vector<std::pair<std::string, std::string>>& members);
// The members of a zip of stored members (the CRC of each checked). Throws
// std::invalid_argument naming `what` and what was expected.
std::map<std::string, std::string> unzip_stored(const std::string& bytes, const std::string& what);

// Writes DIR/NAME.npz and DIR/NAME.json for a failing verdict's calls, the
// expected values computed by the reference; returns the .npz path. NAME is
// made of the property, op and dtype (characters outside [A-Za-z0-9._-]
// become '_').
std::string write_case_file(const std::string& dir, const Verdict& v,
                            const std::vector<call_log::Call>& calls);
// The file name write_case_file gives a verdict's case (without directory).
std::string case_file_name(const Verdict& v);

// A case file read back: its JSON and the calls it records.
struct CaseFile {
  nlohmann::json meta;
  std::vector<call_log::Call> calls;
  // Expected values per call, by output name (empty where none was computed).
  std::vector<std::map<std::string, call_log::Array>> expected;
};
// Throws std::invalid_argument naming the file and what was expected.
CaseFile read_case_file(const std::string& path);

// The error of `got` against `expected` (a value of type `dtype`) in ulps of
// that type at max(|expected|, scale): 0 when both are the same NaN/infinity
// or equal; infinity when one is not finite and they differ.
double ulp_error(const std::string& dtype, double got, double expected, double scale = 0);

// What `replay` holds each output to, unless --tolerance-ulps: this many ulps
// of the largest exact value of that output (an error budget of the output's
// scale, as the gate's attention and backward budgets are: a correct kernel's
// rounding errors stay within a few such ulps, a wrong result does not).
inline constexpr double kDefaultToleranceUlps = 4;

}  // namespace sa::cli
