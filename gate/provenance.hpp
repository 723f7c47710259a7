// Provenance of an audit: what produced a result, on what, from what.
//
// Every results file (`check --json`) and every report records it so that an
// auditor can say exactly which tool, build, machine, kernel binary and seeds
// a verdict comes from. Version and commit are embedded at configure time
// (gate/CMakeLists.txt; "-dirty" when the tree had uncommitted changes then).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace sa::gate {

// "0.2.0" (the CMake project version).
const char* tool_version();
// The git commit the build was configured from ("unknown" outside a git checkout).
const char* git_commit();
// The compiler that built this program, e.g. "GCC 12.2.0".
std::string compiler_id();
// /proc/cpuinfo's "model name" (or "unknown"), with the logical CPU count.
std::string host_cpu();
// The command line of this process, each argument shell-quoted where needed
// (read from /proc/self/cmdline).
std::string command_line();
// SHA-256 of a file's bytes as 64 lowercase hex digits; "" when it cannot be read.
std::string sha256_file(const std::string& path);
// SHA-256 of bytes (FIPS 180-4), 64 lowercase hex digits.
std::string sha256_hex(const std::string& bytes);

// The provenance object written in results files (docs/schema/results.schema.json):
// tool_version, git_commit, compiler, host_cpu, command_line; callers add the
// kernel's own fields (library path and sha256, SIMD target, seed, precision).
nlohmann::json base_provenance();

}  // namespace sa::gate
