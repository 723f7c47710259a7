// `check --python package.module:object`: a kernel written in Python.
//
// The softmax-audit binary does not embed Python. When it is given --python
// it validates the name, then replaces itself (execv, no shell) with
//   <python> -m softmax_audit <its own arguments>
// where <python> is the interpreter CMake configured the package for
// (/usr/bin/python3 by default) and PYTHONPATH starts with the directory
// holding the package (the build tree's, or the installed one). The package
// runs this same `check` command with the hook below set, so options, outputs,
// isolation, time limits and exit codes are the ones of --plugin. The module
// is imported only in the gate's child processes, never in the gate's own;
// nothing of the name is evaluated beyond importing the module and reading
// the dotted attribute.
#pragma once

#include <functional>
#include <string>

#include "gate/kernel_source.hpp"

namespace sa::cli {

// Empty when `name` is package.module:object (dotted Python identifiers, one
// colon, at most 256 characters); else what was expected, in one line.
std::string python_kernel_name_error(const std::string& name);

// Set by the Python package (python/src/module.cpp): turns a validated name
// into the kernel to check, probing it in a child within `timeout_s`.
// Throws std::invalid_argument (a load error, exit 2).
using PythonKernelHook =
    std::function<gate::KernelSource(const std::string& name, double timeout_s)>;
PythonKernelHook& python_kernel_hook();

// Re-executes this command under Python (see above). Returns only by
// throwing std::invalid_argument when that cannot be done (a build without the
// Python package, or the package not found).
void exec_python_check();

}  // namespace sa::cli
