#include "gate/kernel_source.hpp"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "gate/child.hpp"
#include "gate/isolation.hpp"

namespace sa::gate {

using json = nlohmann::json;

KernelSource::KernelSource(Kernel in_process) : in_process_(std::move(in_process)) {
  id_.name = in_process_->name();
  id_.origin = in_process_->origin();
  id_.description = in_process_->description();
  id_.memory = in_process_->memory();
}

KernelSource::KernelSource(KernelIdentity id, std::function<Kernel()> open)
    : id_(std::move(id)), opener_(std::move(open)) {}

KernelSource KernelSource::probe_plugin(const std::string& path, int index, double timeout_s) {
  const std::string what = "plugin " + path;
  struct stat st {};
  if (stat(path.c_str(), &st) != 0)
    throw std::invalid_argument(what + ": " + std::strerror(errno) +
                                "; expected a shared library (.so) exporting sa_kernel_entry "
                                "(see include/softmax_audit/kernel.h)");
  if (!S_ISREG(st.st_mode))
    throw std::invalid_argument(what + ": not a regular file; expected a shared library (.so)");
  char resolved[PATH_MAX];
  if (!realpath(path.c_str(), resolved))
    throw std::invalid_argument(what + ": cannot resolve the path (" + std::strerror(errno) + ")");

  KernelSource src;
  src.path_ = resolved;
  src.index_ = index;
  const std::string file = src.path_;
  bool have_identity = false, unloaded = false;
  std::string load_error, violation;

  ChildChannel child([&](const ChildWriter& w) {
    {
      std::optional<Kernel> k;
      try {
        k.emplace(load_plugin(file, index));
      } catch (const std::exception& e) {
        w.send({{"t", "error"}, {"what", e.what()}});
        _exit(0);
      }
      std::string why;
      if (k->memory() == SA_MEMORY_CUDA) {
        const DeviceMemory& dm = device_memory();
        if (!dm.alloc) why = dm.why_unavailable ? dm.why_unavailable() : "no CUDA device";
      }
      w.send({{"t", "identity"},
              {"name", k->name()},
              {"description", k->description()},
              {"memory", static_cast<int>(k->memory())},
              {"cannot_run", why}});
    }  // the library is closed here: its destructors run
    w.send({{"t", "unloaded"}});
  });
  const ChildEnd end = child.run(
      timeout_s, 0,
      [&](const json& m) {
        const std::string t = m.value("t", "");
        if (t == "error") {
          load_error = m.value("what", "");
        } else if (t == "identity") {
          have_identity = true;
          src.id_.name = m.value("name", "");
          src.id_.description = m.value("description", "");
          src.id_.memory = static_cast<sa_memory>(m.value("memory", 0));
          src.cannot_run_ = m.value("cannot_run", "");
        } else if (t == "unloaded") {
          unloaded = true;
        }
      },
      [&](const std::string& v) {
        if (violation.empty()) violation = v;
      });
  // The message names the path as given; the origin recorded is the resolved file.
  src.id_.origin = src.path_;
  if (!load_error.empty()) throw std::invalid_argument(load_error);
  if (!have_identity) {
    std::string how = end.describe();
    if (end.timed_out) how = "did not finish within " + std::to_string(timeout_s) + " s";
    throw std::invalid_argument(
        what + ": the process loading it " + how +
        " before the kernel descriptor was read (its constructors or sa_kernel_entry" +
        (end.timed_out ? " hang" : " ended the process") + "); nothing was checked" +
        (violation.empty() ? std::string() : "; it also wrote " + violation));
  }
  if (!violation.empty())
    throw std::invalid_argument(what + ": while loading it wrote " + violation);
  if (!unloaded)
    src.unload_problem_ =
        "closing the plugin (dlclose, which runs its destructors) in the probe process: the "
        "process " +
        end.describe();
  return src;
}

Kernel KernelSource::open() const {
  if (in_process_) return *in_process_;
  if (opener_) return opener_();
  return load_plugin(path_, index_);
}

std::string KernelSource::why_cannot_run() const {
  if (in_process_) return why_kernel_cannot_run(*in_process_);
  if (cannot_run_.empty()) return "";
  return "kernel '" + id_.name +
         "' works on CUDA device memory, but no CUDA device is usable here (" + cannot_run_ + ")";
}

}  // namespace sa::gate
