// Guarded calls: a wrapper around a host-memory kernel that hands it every
// buffer inside its own guarded mapping, so that an out-of-bounds access
// becomes a precise finding instead of silent corruption.
//
// Where: the wrapper sits at the C ABI (softmax_audit/kernel.h), i.e. exactly
// where buffers cross from the suite to the kernel; sa::Kernel's staging is
// untouched. It is a second sa_kernel whose function pointers copy each
// buffer into a mapping laid out as
//
//     [PROT_NONE 64 KiB][head canary][data, 64-byte aligned][tail canary < 64 B][PROT_NONE 64 KiB]
//
// with input buffers made read-only. An access past either end of a buffer
// (beyond the canary slack) or a write into an input faults at once; the
// fault handler (install_fault_handler) names the buffer and offset in the
// shared CallBox before the process dies, and the gate reports it. Smaller
// overruns land in the canaries, which are checked after every call.
//
// Every call starts in the default floating-point environment; a call that
// leaves it changed (rounding mode, flush-to-zero, denormals-are-zero,
// unmasked exceptions) is an "fp_environment" incident, and the default is
// restored before anything else runs.
//
// The wrapper also checks NaN outputs: by kernel.h an output is NaN only when
// its row holds a NaN input, so a NaN output for a row without NaN (or +inf,
// where the convention is a limit) is reported. A CUDA-memory kernel in this
// process (--no-isolation) is not wrapped (its buffers live on the device);
// a hosted one is presented to the judge as a host-memory kernel and wrapped
// like any other (gate/host.hpp stages its buffers in the kernel host).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "kernels/kernel.hpp"

namespace sa::gate {

struct GuardIncident {
  std::string kind;    // "out_of_bounds_write" (canary), "nan_output", "fp_environment"
  std::string op;      // operation called
  std::string dtype;   // element type of the call ("float32", "bfloat16", "float16"; "" merges)
  std::string detail;  // what exactly was seen
};

struct GuardOptions {
  bool guard_buffers = true;  // guard pages + canaries around every buffer
  bool check_nan = true;      // report NaN outputs for rows without NaN inputs
};

// Where the current call and a fault are recorded; the gate puts it in memory
// shared with the parent so that it survives the child's death. Plain chars
// only: the fault handler writes it.
struct CallBox {
  volatile int in_call;  // 1 while a kernel call is running
  char op[32];
  char dtype[16];
  char fault[512];        // set by the fault handler: which buffer, which offset
  volatile int host_pid;  // the judge's current kernel host (gate/host.hpp), 0 if none
};

void set_call_box(CallBox* box);  // null to stop recording
// SIGSEGV/SIGBUS handler (on an alternate stack): writes the fault into the
// CallBox, then lets the signal kill the process as it would have.
void install_fault_handler();

// ------------------------------------------------------- remote calls --
// Used by gate/host.hpp, where the kernel runs in another process (the
// kernel host) than the guard (the judge).

// The floating-point state after a call: rounding mode and, on x86, MXCSR.
struct FpState {
  int round = 0;
  unsigned csr = 0x1f80u;
};
FpState read_fp_state();
void restore_default_fp_env();
// While set, a guarded call judges this state (the host's, as it reported
// it) instead of this process's own environment.
void set_remote_fp(const FpState* state);

// Guarded buffers come from [base, base + bytes), a mapping shared with the
// kernel host, from `reserved` bytes on (the part before is the call's
// table of buffers). Null base: private mappings again (in-process calls).
// With an arena, every buffer of a guarded call is placed in it even when
// GuardOptions::guard_buffers is off: it is how buffers reach the host.
void use_arena(void* base, std::size_t bytes, std::size_t reserved);
bool in_arena(const void* p);

// One buffer of the call in progress as the host must map it: the data
// pages readable (inputs) or writable (outputs), the guard regions around
// them left inaccessible.
struct BufferRange {
  std::uintptr_t map_begin = 0, map_end = 0;    // guard regions included
  std::uintptr_t data_begin = 0, data_end = 0;  // the buffer's own bytes
  std::uintptr_t guard = 0;                     // bytes of each guard region
  // A sparse buffer (a large page pool): its first accessible byte; the
  // pages from map_begin up to it are never accessible. 0: not sparse.
  std::uintptr_t live_begin = 0;
  bool read_only = false;
  const char* name = "";
};
// The arena buffers alive now (those of the call in progress), in order.
std::vector<BufferRange> live_buffers();

// Read-only copies in the arena of what a call passes by pointer besides its
// buffers (its argument structures), alive as long as this object.
class ArenaInputs {
 public:
  ArenaInputs();
  ~ArenaInputs();
  ArenaInputs(const ArenaInputs&) = delete;
  ArenaInputs& operator=(const ArenaInputs&) = delete;
  const void* add(const char* name, const void* src, std::size_t bytes);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The host's side: the buffers of the call it is about to run, so that the
// fault handler names a buffer and an offset (the first 64 are named).
void register_fault_regions(const BufferRange* ranges, std::size_t count);
void clear_fault_regions();

class GuardedKernel {
 public:
  using Report = std::function<void(const GuardIncident&)>;
  GuardedKernel(const Kernel& inner, GuardOptions options, Report report);
  ~GuardedKernel();
  GuardedKernel(const GuardedKernel&) = delete;
  GuardedKernel& operator=(const GuardedKernel&) = delete;

  // The handle to give the suite: same name, ops, dtypes as the inner kernel.
  const Kernel& kernel() const { return *wrapped_; }

  // From now on, calls of these ops return SA_INTERNAL_ERROR without reaching
  // the kernel (last_error says why): the gate's answer to an op that hung.
  // Wrapped kernels only (not a device kernel run in this process).
  void refuse(const std::set<Op>& ops);

  struct State;

 private:
  std::unique_ptr<State> state_;
  std::unique_ptr<Kernel> wrapped_;
};

}  // namespace sa::gate
