// Fuzzes what `report` reads (gate/report.cpp, gate/results.cpp): the bytes
// are split at the first two NUL bytes into a results file (`check --json`),
// a sweep file and a variants matrix, written to scratch files, and rendered
// without gnuplot. Any bytes must give a report or std::invalid_argument
// naming one of the files; never a crash or a sanitizer report.
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

#include "fuzz/fuzz_support.hpp"
#include "gate/report.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string all(reinterpret_cast<const char*>(data), size);
  std::string part[3];
  std::size_t at = 0;
  for (int i = 0; i < 3; ++i) {
    const std::size_t nul = i < 2 ? all.find('\0', at) : std::string::npos;
    part[i] = all.substr(at, nul == std::string::npos ? std::string::npos : nul - at);
    if (nul == std::string::npos) break;
    at = nul + 1;
  }
  sa::gate::ReportInputs in;
  in.gnuplot = "";  // no plots: nothing may run an interpreter here
  in.results.push_back(sa::fuzz::write_scratch("results.json", part[0]));
  if (!part[1].empty()) in.sweep = sa::fuzz::write_scratch("sweep.json", part[1]);
  if (!part[2].empty()) in.variants = sa::fuzz::write_scratch("variants.json", part[2]);
  std::ostringstream html;
  try {
    sa::gate::write_report(in, html);
  } catch (const std::invalid_argument& e) {
    if (std::string(e.what()).find(sa::fuzz::scratch_dir()) == std::string::npos)
      __builtin_trap();  // the message must name the file
  }
  return 0;
}
