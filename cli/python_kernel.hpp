// `check --python package.module:object`: a kernel written in Python.
//
// The softmax-audit binary does not embed Python. When it is given --python
// it validates the name, then replaces itself (execv, no shell) with
//   <python> -c <bootstrap> <package dir> ... <its own arguments>
// where <python> is the interpreter the user runs: the active virtual
// environment's (VIRTUAL_ENV), else python3 on PATH, else the one CMake
// configured the package for (/usr/bin/python3 by default). The bootstrap
// imports the package from <package dir> (the build tree's, or the installed
// one) with the working directory off sys.path, so a softmax_audit.py or
// softmax_audit/ there never replaces the gate; an interpreter that cannot
// import the package (or its compiled module) is a one-line exit 2 naming it.
// The working directory goes back on sys.path after the package, for the
// kernel's own modules. The package runs this same `check` command with the
// hook below set, so options, outputs, isolation, time limits and exit codes
// are the ones of --plugin. The module is imported only in the gate's child
// processes, never in the gate's own; nothing of the name is evaluated beyond
// importing the module and reading the dotted attribute.
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
