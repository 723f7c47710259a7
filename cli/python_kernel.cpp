#include "cli/python_kernel.hpp"

#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <vector>

namespace sa::cli {

namespace {

bool identifier_start(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}
bool identifier_char(char c) { return identifier_start(c) || (c >= '0' && c <= '9'); }

// Dotted identifiers: a.b_c.d2 (ASCII only).
bool dotted(const std::string& s) {
  if (s.empty()) return false;
  bool start = true;
  for (char c : s) {
    if (start) {
      if (!identifier_start(c)) return false;
      start = false;
    } else if (c == '.') {
      start = true;
    } else if (!identifier_char(c)) {
      return false;
    }
  }
  return !start;
}

bool readable_file(const std::string& path) { return access(path.c_str(), R_OK) == 0; }

}  // namespace

std::string python_kernel_name_error(const std::string& name) {
  const char* expected =
      "expected package.module:object (dotted ASCII Python identifiers, one colon, at most "
      "256 characters), e.g. examples.python.torch_kernel:kernel";
  if (name.size() > 256) return expected;
  const auto colon = name.find(':');
  if (colon == std::string::npos || name.find(':', colon + 1) != std::string::npos) return expected;
  if (!dotted(name.substr(0, colon)) || !dotted(name.substr(colon + 1))) return expected;
  return "";
}

PythonKernelHook& python_kernel_hook() {
  static PythonKernelHook hook;
  return hook;
}

void exec_python_check() {
#if !defined(SA_PYTHON_EXECUTABLE)
  throw std::invalid_argument(
      "--python: this softmax-audit was built without the Python package (CMake found no "
      "Python 3 development files or no pybind11); nothing was checked");
#else
  // Which package directory: the build tree's when this binary is the build
  // tree's; else the one installed beside it (<prefix>/bin/softmax-audit and
  // <prefix>/<site>, wherever `cmake --install --prefix` or a package put the
  // two); else the configured prefix's.
  std::string dir = SA_PYTHON_INSTALL_PACKAGE_DIR;
  char exe[PATH_MAX];
  const ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (len > 0) {
    exe[len] = '\0';
    std::string self(exe);
    const std::string build_cli = SA_CLI_BUILD_DIR;
    const std::string bin = "/bin/";
    if (self.rfind(build_cli + "/", 0) == 0) {
      dir = SA_PYTHON_BUILD_PACKAGE_DIR;
    } else if (const auto at = self.rfind(bin);
               at != std::string::npos && self.find('/', at + bin.size()) == std::string::npos) {
      const std::string beside = self.substr(0, at) + "/" + SA_PYTHON_INSTALL_REL_DIR;
      if (readable_file(beside + "/softmax_audit/__init__.py")) dir = beside;
    }
  }
  if (!readable_file(dir + "/softmax_audit/__init__.py"))
    throw std::invalid_argument("--python: the Python package softmax_audit is not in " + dir +
                                " (install it with cmake --install, README \"From Python\"); "
                                "nothing was checked");
  // This command's own arguments, unchanged, as the kernel sees them: argv
  // from /proc/self/cmdline (NUL-separated).
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  for (std::size_t i = 0; i < all.size();) {
    const std::size_t end = all.find('\0', i);
    args.push_back(all.substr(i, end == std::string::npos ? std::string::npos : end - i));
    if (end == std::string::npos) break;
    i = end + 1;
  }
  if (args.size() < 2)
    throw std::invalid_argument("--python: cannot read this command's arguments");
  std::vector<std::string> argv_s = {SA_PYTHON_EXECUTABLE, "-m", "softmax_audit"};
  argv_s.insert(argv_s.end(), args.begin() + 1, args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  const char* old = std::getenv("PYTHONPATH");
  const std::string path = dir + (old && *old ? ":" + std::string(old) : std::string());
  setenv("PYTHONPATH", path.c_str(), 1);
  std::fflush(nullptr);
  execv(SA_PYTHON_EXECUTABLE, argv.data());
  throw std::invalid_argument(std::string("--python: cannot run ") + SA_PYTHON_EXECUTABLE + ": " +
                              std::strerror(errno));
#endif
}

}  // namespace sa::cli
