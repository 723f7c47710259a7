// One child process of the gate and the channel it reports through.
//
// Everything that runs outside code (a plugin's constructors, entry function,
// kernel calls, destructors) runs in such a child, never in the gate's own
// process. The child:
//   - leads its own process group, so that the gate can kill it together with
//     every helper process the kernel forked (kill_group), and dies with the
//     gate (PR_SET_PDEATHSIG);
//   - writes its standard output to standard error, so that nothing the
//     kernel prints can pose as the gate's own summary on standard output;
//   - reports through a pipe in JSON lines, each stamped with a random token
//     drawn by the gate for this child and the child's pid. A line without the
//     token (a kernel writing to whatever descriptors it finds), or from
//     another process (a kernel that called fork()), is never acted upon: it
//     becomes a protocol violation that the caller turns into a failing
//     verdict, so a stray or forged message can never produce a pass.
#pragma once

#include <sys/types.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

namespace sa::gate {

class ChildChannel;

// The child's side: send() writes one stamped JSON line, whole.
class ChildWriter {
 public:
  void send(nlohmann::json message) const;

 private:
  friend class ChildChannel;
  int fd_ = -1;
  std::string token_;
};

// How a child ended.
struct ChildEnd {
  bool timed_out = false;  // silent for longer than the timeout: killed
  bool deadline = false;   // the overall deadline passed: killed
  bool exited = false;     // exited normally
  int status = 0;          // exit status (exited) or signal number (!exited, !timed_out)
  double silent_s = 0;     // seconds since the last message when it ended
  std::string describe()
      const;  // "exited with status 3", "killed by signal 11 (Segmentation fault)"
};

class ChildChannel {
 public:
  // Forks; the child runs `body(writer)` and then _exit(0)s (body may _exit
  // itself). Throws std::runtime_error when pipe or fork fail.
  explicit ChildChannel(const std::function<void(const ChildWriter&)>& body);
  ~ChildChannel();
  ChildChannel(const ChildChannel&) = delete;
  ChildChannel& operator=(const ChildChannel&) = delete;

  pid_t pid() const { return pid_; }

  // Reads messages until the child closes the pipe, stays silent for
  // `silence_s`, or `deadline` (a steady-clock time in seconds, 0 = none)
  // passes. Each authentic message goes to on_message; anything else to
  // on_violation with a description. Then kills the child's process group
  // and reaps the child. While `suite_busy` (when given) returns true, the
  // silence does not count: the child is running the suite's own code (its
  // reference, say, slow under a sanitizer), not the kernel; only `deadline`
  // bounds that.
  ChildEnd run(double silence_s, double deadline,
               const std::function<void(const nlohmann::json&)>& on_message,
               const std::function<void(const std::string&)>& on_violation,
               const std::function<bool()>& suite_busy = {});

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  std::string token_;
  bool reaped_ = false;
};

// Seconds on the steady clock (for deadlines).
double steady_seconds();

// Kills the process group led by `pid` (SIGKILL); ESRCH is not an error.
void kill_group(pid_t pid);

}  // namespace sa::gate
