// The kernel the gate checks, as the gate's own process knows it.
//
// A plugin is never opened in the gate's process: its constructors, its entry
// function and its destructors run only in children (gate/child.hpp) under a
// time limit. probe_plugin opens it once in a child to validate the
// descriptor and learn the kernel's identity, then closes it there; every
// kernel host of the run (gate/host.hpp) opens the same file again. A constructor that
// exits, crashes or hangs is therefore a load error naming the file (exit 2),
// never a silent exit 0 of the gate, and a destructor that ends the process
// cannot change the gate's exit code.
//
// The path is resolved once (realpath) and that exact file is loaded: a bare
// `libk.so` means ./libk.so, never a copy found on the library search path.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "kernels/kernel.hpp"

namespace sa::gate {

struct KernelIdentity {
  std::string name, origin, description;
  sa_memory memory = SA_MEMORY_HOST;
};

class KernelSource {
 public:
  // A kernel this process may hold: built into this binary, or handed over
  // by a library user (gate/gtest.hpp).
  explicit KernelSource(Kernel in_process);

  // A kernel that `open` builds afresh in each child (the Python adapter,
  // python/): `id` describes it without opening it in this process.
  KernelSource(KernelIdentity id, std::function<Kernel()> open);

  // Resolves `path`, then opens, validates and closes the plugin in a child
  // that must finish within `timeout_s`. Throws std::invalid_argument naming
  // the file and what happened.
  static KernelSource probe_plugin(const std::string& path, int index, double timeout_s);

  const KernelIdentity& identity() const { return id_; }
  const std::string& name() const { return id_.name; }
  sa_memory memory() const { return id_.memory; }
  bool is_plugin() const { return !in_process_.has_value() && !opener_; }
  // Opened by a function given by the caller (the Python adapter), which
  // expects to run on the thread that forked (it re-initialises the
  // interpreter there).
  bool has_opener() const { return static_cast<bool>(opener_); }
  const std::string& path() const { return path_; }  // resolved; plugins only

  // The kernel itself. For a plugin this loads the library: call it only in a
  // kernel host (or the gate itself under --no-isolation), never in the gate
  // or a judge.
  Kernel open() const;

  // Empty when the kernel can run here; else why not (a CUDA kernel without
  // a usable device). Never initialises CUDA in this process.
  std::string why_cannot_run() const;

  // What went wrong when the probe closed the plugin (its destructors), or
  // empty. Reported as a failing gate.no_crash verdict by the run.
  const std::string& unload_problem() const { return unload_problem_; }

 private:
  KernelSource() = default;
  std::optional<Kernel> in_process_;
  KernelIdentity id_;
  std::string path_;
  int index_ = -1;
  std::string cannot_run_, unload_problem_;
  std::function<Kernel()> opener_;  // set by the opener constructor only
};

}  // namespace sa::gate
