#include "cli/python_kernel.hpp"

#include <limits.h>
#include <sys/stat.h>
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

bool executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

#if defined(SA_PYTHON_EXECUTABLE)
// The interpreter the user runs: the active virtual environment's
// ($VIRTUAL_ENV/bin/python3 or python), else the first python3 on PATH, else
// the one CMake configured the package for. `why` says which, for messages;
// `may_fall_back` is set for python3 on PATH (the user did not choose it as
// explicitly as an environment): when it cannot import the package or has no
// torch, the bootstrap runs the configured interpreter instead.
std::string user_python(std::string& why, bool& may_fall_back) {
  may_fall_back = false;
  if (const char* venv = std::getenv("VIRTUAL_ENV"); venv && *venv) {
    for (const char* name : {"/bin/python3", "/bin/python"}) {
      const std::string p = std::string(venv) + name;
      if (executable_file(p)) {
        why = "the active virtual environment's (VIRTUAL_ENV)";
        return p;
      }
    }
  }
  if (const char* path = std::getenv("PATH"); path && *path) {
    const std::string all(path);
    for (std::size_t i = 0; i <= all.size();) {
      std::size_t end = all.find(':', i);
      if (end == std::string::npos) end = all.size();
      const std::string dir = all.substr(i, end - i);
      // Only absolute entries: an empty or relative one is the working directory.
      if (!dir.empty() && dir[0] == '/' && executable_file(dir + "/python3")) {
        why = "python3 on PATH";
        const std::string p = dir + "/python3";
        char a[PATH_MAX], b[PATH_MAX];
        may_fall_back = !(realpath(p.c_str(), a) && realpath(SA_PYTHON_EXECUTABLE, b) &&
                          std::string(a) == std::string(b));
        return p;
      }
      i = end + 1;
    }
  }
  why = "the interpreter softmax-audit was built for";
  return SA_PYTHON_EXECUTABLE;
}

// Run with `python -c` (no file or module is looked up in the working
// directory before it runs): puts the package's directory first on sys.path,
// drops the working directory while the package is imported, so that a
// softmax_audit.py or softmax_audit/ there can never stand in for the gate,
// then puts the working directory back after the package (the kernel's own
// modules may live there) and runs the package's main. argv[1..4]: the
// package directory, which interpreter this is (words), the configured one,
// and "1" when the configured one is to run instead if this one cannot import
// the package or torch (the bootstrap is then re-run under it, with "0").
constexpr const char* kBootstrap = R"PY(import os, sys
d, why, built, fallback = sys.argv[1:5]
del sys.argv[1:5]
sys.argv[0] = "softmax_audit"
cwd = os.getcwd()
sys.path[:] = [d] + [p for p in sys.path if p not in ("", ".", cwd)]
def fall_back(what):
    a = open("/proc/self/cmdline", "rb").read().split(b"\0")
    code = a[a.index(b"-c") + 1]
    os.execv(built, [built, "-c", code, d, "the interpreter softmax-audit was built for; %s at %s %s" % (why, sys.executable, what), built, "0"] + sys.argv[1:])
if fallback == "1":
    import importlib.util
    try:
        import softmax_audit._core
    except Exception as e:
        fall_back("cannot import the package (%s)" % e)
    if importlib.util.find_spec("torch") is None:
        fall_back("has no torch")
def fail(what):
    sys.stderr.write("softmax-audit check: error: --python: %s (Python %s at %s, %s; softmax-audit was built for %s); activate an environment whose python can import it, or run with that interpreter; nothing was checked\n" % (what, sys.version.split()[0], sys.executable, why, built))
    sys.stderr.flush()
    os._exit(2)
try:
    import softmax_audit, softmax_audit.__main__ as m
    from softmax_audit import _core
except Exception as e:
    fail("the softmax_audit package in %s cannot be imported (%s)" % (d, e))
if os.path.dirname(os.path.realpath(softmax_audit.__file__)) != os.path.realpath(os.path.join(d, "softmax_audit")):
    fail("softmax_audit was imported from %s, not from %s" % (softmax_audit.__file__, d))
sys.path.insert(1, cwd)
m.run()
)PY";
#endif

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
                                " (install it with cmake --install, docs/python.md); "
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
  std::string why;
  bool may_fall_back = false;
  const std::string python = user_python(why, may_fall_back);
  std::vector<std::string> argv_s = {
      python, "-c", kBootstrap, dir, why, SA_PYTHON_EXECUTABLE, may_fall_back ? "1" : "0"};
  argv_s.insert(argv_s.end(), args.begin() + 1, args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  const char* old = std::getenv("PYTHONPATH");
  const std::string path = dir + (old && *old ? ":" + std::string(old) : std::string());
  setenv("PYTHONPATH", path.c_str(), 1);
  std::fflush(nullptr);
  execv(python.c_str(), argv.data());
  throw std::invalid_argument("--python: cannot run " + python + " (" + why +
                              "): " + std::strerror(errno));
#endif
}

}  // namespace sa::cli
