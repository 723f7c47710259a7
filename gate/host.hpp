// The kernel host: the only process that runs a kernel's code.
//
// Issue 29: a kernel that shares a process with the code computing its
// verdicts can forge them (scan memory for the message token, overwrite
// references or counters). So the process that runs the property suite (the
// judge, a child of the gate: gate/isolation.hpp) never loads the kernel.
// It hands the suite an sa_kernel whose function pointers are trampolines:
// each call is forwarded to a kernel host, a process forked by the judge
// that opens the kernel (KernelSource::open) and does nothing but execute
// calls. docs/isolation.md has the picture; in short:
//
//   - Buffers cross in one shared arena (a MAP_SHARED mapping made by the
//     judge before it forks a host, so it lies at the same address in both).
//     The guard (gate/guard.hpp) lays every buffer out there with its guard
//     regions and canaries; argument structures are copied there too, with
//     arena addresses inside. In the host the whole arena is inaccessible
//     except during a call, when exactly that call's data pages are made
//     readable (inputs) or writable (outputs).
//   - A request (a SOCK_SEQPACKET packet) is an op, a seq number and the
//     call's arguments as machine words; the table of buffers the host must
//     map is at the start of the arena. The reply is the status, the
//     kernel's last_error text (bounded) and the floating-point state after
//     the call, stamped with the seq and the host's pid. No verdict, no
//     reference value and no output crosses the socket.
//   - The judge checks canaries, inputs (compared with its own copies), NaN
//     outputs and the reported floating-point state in its own process, and
//     copies the outputs out.
//   - A host that dies in a call (its fault handler names the buffer and
//     offset in the shared CallBox first) or does not answer within the call
//     timeout (killed with its process group) is a HostEvent; the call is
//     answered with an error and the next call starts a fresh host. A reply
//     that is malformed, from another process (the kernel forked) or for
//     another call is a protocol event and is ignored.
//   - The host leads its own process group, dies with the judge
//     (PR_SET_PDEATHSIG), keeps no descriptor but its socket and standard
//     error, drops every capability, may not ptrace or use
//     process_vm_readv/writev (seccomp), and the judge is not dumpable: the
//     host can neither read nor write the judge's memory.
//
//   - A CUDA-memory kernel (SA_MEMORY_CUDA: a plugin, the built-in CUDA
//     kernel, a Python kernel with device = "cuda") is hosted the same way.
//     The judge sees it as a host-memory kernel and lays its buffers out in
//     the arena; the host copies each buffer the call points into to the
//     device (through its own CUDA runtime, kernels/device_memory.cpp),
//     calls the kernel with device pointers while the arena is
//     inaccessible, and copies every staged buffer, inputs included, back
//     into the arena, where the judge checks canaries and inputs as for any
//     kernel. The judge never initialises CUDA (a context does not survive
//     the fork of the next host).
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>

#include "gate/guard.hpp"
#include "gate/kernel_source.hpp"

namespace sa::gate {

// Something a kernel host did that the judge reports.
struct HostEvent {
  enum class Kind { crash, hang, protocol };
  Kind kind = Kind::crash;
  std::string op, dtype;  // the call it happened in; op "" while the host opened the kernel
  std::string fault;      // crash: what the host's fault handler recorded, or ""
  std::string how;        // crash: how it ended; protocol: what the judge saw
  double silent_s = 0;    // hang: seconds without an answer
};

struct HostOptions {
  double call_timeout_s = 60;   // the longest one call, or opening the kernel, may take
  CallBox* gate_box = nullptr;  // the gate's: each host's pid is written there (orphan cleanup)
};

class KernelHost {
 public:
  // Makes the arena and starts the first host, which opens the kernel.
  // Throws std::runtime_error saying what happened when that host cannot
  // open it (the error, or how the process ended; a crash or hang is also
  // reported through on_event). on_start is called for every host started.
  KernelHost(const KernelSource& source, HostOptions options,
             std::function<void(const HostEvent&)> on_event, std::function<void()> on_start);
  ~KernelHost();  // kills the current host and its process group
  KernelHost(const KernelHost&) = delete;
  KernelHost& operator=(const KernelHost&) = delete;

  // The kernel as the judge sees it: the host's descriptor (name, ops,
  // capabilities) with trampolines. Give it to a GuardedKernel: the guard
  // places the buffers in the arena.
  const Kernel& kernel() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace sa::gate
