// Fuzzes toml++ 3.3.0 itself, compiled here header-only with the sanitizers
// and coverage (the project links Debian's compiled libtomlplusplus, which
// the fuzzer cannot see into). Crashes found here are toml++'s, not ours:
// each becomes an input of fuzz/corpus/gate_spec/ that parse_gate_spec must
// turn into a one-line SpecError (docs/fuzzing.md, "toml++"). This harness is
// therefore built but not a test: it is expected to find them (docs/fuzzing.md).
#define TOML_HEADER_ONLY 1
#include <toml++/toml.h>

#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    toml::table t = toml::parse(text, std::string_view("fuzz.toml"));
    (void)t;
  } catch (const toml::parse_error&) {
  }
  return 0;
}
