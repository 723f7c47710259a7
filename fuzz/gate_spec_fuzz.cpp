// Fuzzes the gate spec parser (gate/spec.cpp, `check --spec`): any bytes must
// give a GateSpec or a SpecError naming the file; never a crash, a hang, a
// sanitizer report or another exception. The bytes reach Debian's compiled
// toml++ (uninstrumented) only through parse_gate_spec's own screening.
#include <cstdint>
#include <string>

#include "gate/spec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const sa::gate::GateSpec spec = sa::gate::parse_gate_spec(text, "fuzz.toml");
    (void)spec;
  } catch (const sa::gate::SpecError& e) {
    if (std::string(e.what()).rfind("fuzz.toml", 0) != 0) __builtin_trap();  // must name the file
  }
  return 0;
}
