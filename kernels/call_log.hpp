// A record of kernel calls, for replayable counterexamples (issue 35).
//
// While a Capture is alive on a thread, every call that thread makes through
// sa::Kernel's row operations, attention_v2 and attention_backward is
// recorded with its arguments, its inputs as the kernel received them
// (already of the call's element type) and what the kernel returned. The
// property search (properties/search.hpp) captures the calls of its final
// evaluation of a shrunk failing case, and a sink set by the program (the
// `check` command: gate/case_file.hpp) writes them out as a case file that
// `softmax-audit replay` runs again. Nothing is recorded, and nothing costs
// more than one thread-local test per call, while no Capture is alive.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/attention_case.hpp"
#include "core/dtype.hpp"
#include "core/verdict.hpp"

namespace sa::call_log {

// One array of a call: float32 values (every element type travels as the
// float32 values it holds exactly), or bytes (masks), or int32 (offsets).
struct Array {
  std::string name;
  char kind = 'f';  // 'f' float32, 'u' uint8, 'i' int32
  std::vector<std::int64_t> shape;
  std::vector<float> f;
  std::vector<std::uint8_t> u8;
  std::vector<std::int32_t> i32;
};

// One scalar argument: a number, or a word (a dtype, a layout).
struct Arg {
  std::string name;
  double number = 0;
  std::string word;  // non-empty: the argument is this word
};

struct Call {
  std::string op;  // name_of(Op)
  std::vector<Arg> args;
  std::vector<Array> inputs;  // what the kernel read
  std::vector<Array> got;     // what it returned
};

// A row call with more input elements than this is not recorded (its case
// file would be too large to be useful; the counterexample text names it).
inline constexpr std::size_t kMaxRecordedElements = std::size_t(1) << 22;

// True while a Capture records on this thread.
bool recording();
// Appends a call to the innermost Capture of this thread (no-op otherwise).
void record(Call c);

class Capture {
 public:
  Capture();
  ~Capture();
  Capture(const Capture&) = delete;
  Capture& operator=(const Capture&) = delete;
  std::vector<Call> take();

 private:
  std::vector<Call> calls_;
  Capture* outer_;
  friend void record(Call c);
};

// The arrays and arguments of calls, both ways (record, replay). Finders
// return null / throw std::invalid_argument naming what is missing.
const Array* find(const std::vector<Array>& v, const std::string& name);
const Arg* find(const std::vector<Arg>& v, const std::string& name);
Array floats(std::string name, std::vector<std::int64_t> shape, std::vector<float> values);
// A row operation's call: `x` (rows x stride, as passed, padding included),
// n, stride, out_stride, in_place, temperature, dtype.
Call rows_call(const char* op, DType t, std::int64_t rows, std::int64_t n, std::int64_t stride,
               std::int64_t out_stride, bool in_place, double temperature,
               const std::vector<float>& data);
// An attention_v2 call: every field of the case (attention_case.hpp).
Call attention_call(const char* op, const AttentionCase& c);
// The case back from a recorded attention call.
AttentionCase attention_case_of(const Call& c);

// Where failing verdicts' calls go: set by a program that writes case files
// (unset: dropped). Called in the process that judges (the gate's judge).
using Sink = std::function<void(const Verdict&, const std::vector<Call>&)>;
void set_sink(Sink s);
void publish(const Verdict& v, const std::vector<Call>& calls);
// The calls of a failing case between the search and its verdict's emission,
// keyed by the counterexample text (this thread; claim removes them).
void stash(const std::string& key, std::vector<Call> calls);
std::vector<Call> claim(const std::string& key);

}  // namespace sa::call_log
