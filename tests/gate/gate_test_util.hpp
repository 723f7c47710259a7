// Helpers for the gate's tests: run the CLI, read its outputs.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "gate/results.hpp"

namespace gate_test {

struct Ran {
  int rc = -1;         // exit status, or -signal when killed by one
  std::string output;  // stdout and stderr together
};

inline Ran run(const std::string& cmd) {
  Ran r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  while (std::size_t n = fread(buf, 1, sizeof buf, p)) r.output.append(buf, n);
  const int st = pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? -WTERMSIG(st) : -1000;
  return r;
}

inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::string temp_dir() {
  char t[] = "/tmp/sa-gate-test-XXXXXX";
  return mkdtemp(t) ? std::string(t) : std::string("/tmp");
}

inline std::string q(const std::string& s) { return "'" + s + "'"; }

// The escaping the report and JUnit writers apply (gate/results.hpp).
inline std::string html_escape(const std::string& s) { return sa::gate::xml_escape(s); }

}  // namespace gate_test
