#include "gate/child.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

namespace sa::gate {

using json = nlohmann::json;

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void kill_group(pid_t pid) {
  if (pid > 0) kill(-pid, SIGKILL);
}

std::string ChildEnd::describe() const {
  if (deadline) return "killed at the run's overall deadline";
  if (timed_out) return "killed after " + std::to_string(silent_s) + " s without an answer";
  if (exited) return "exited with status " + std::to_string(status);
  const char* s = strsignal(status);
  return "killed by signal " + std::to_string(status) + (s ? std::string(" (") + s + ")" : "");
}

void ChildWriter::send(json message) const {
  message["k"] = token_;
  message["p"] = static_cast<long long>(getpid());
  std::string line = message.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  const char* p = line.data();
  std::size_t left = line.size();
  while (left) {
    const ssize_t w = write(fd_, p, left);
    if (w < 0) {
      if (errno == EINTR) continue;
      _exit(3);  // the gate is gone
    }
    p += w;
    left -= static_cast<std::size_t>(w);
  }
}

namespace {
std::string draw_token() {
  std::random_device rd;
  static const char* hex = "0123456789abcdef";
  std::string t;
  for (int i = 0; i < 4; ++i) {
    std::uint32_t x = rd();
    for (int j = 0; j < 8; ++j, x >>= 4) t += hex[x & 15];
  }
  return t;
}
}  // namespace

ChildChannel::ChildChannel(const std::function<void(const ChildWriter&)>& body)
    : token_(draw_token()) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("gate: pipe: ") + std::strerror(errno));
  std::fflush(nullptr);
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ < 0) {
    close(fds[0]);
    close(fds[1]);
    throw std::runtime_error(std::string("gate: fork: ") + std::strerror(errno));
  }
  if (pid_ == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(3);  // the gate died before the line above
    close(fds[0]);
    dup2(STDERR_FILENO, STDOUT_FILENO);
    signal(SIGPIPE, SIG_DFL);
    ChildWriter w;
    w.fd_ = fds[1];
    w.token_ = token_;
    try {
      body(w);
    } catch (...) {
      _exit(4);
    }
    _exit(0);
  }
  setpgid(pid_, pid_);  // also here, so that kill_group works before the child ran
  close(fds[1]);
  fd_ = fds[0];
}

ChildChannel::~ChildChannel() {
  if (fd_ >= 0) close(fd_);
  if (!reaped_ && pid_ > 0) {
    kill_group(pid_);
    while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
}

ChildEnd ChildChannel::run(double silence_s, double deadline,
                           const std::function<void(const json&)>& on_message,
                           const std::function<void(const std::string&)>& on_violation,
                           const std::function<bool()>& suite_busy) {
  ChildEnd end;
  std::string buffer;
  std::vector<char> chunk(1 << 16);
  double last = steady_seconds();
  bool child_gone = false;
  int status = 0;

  auto take_lines = [&] {
    std::size_t start = 0, nl;
    while ((nl = buffer.find('\n', start)) != std::string::npos) {
      const std::string line = buffer.substr(start, nl - start);
      start = nl + 1;
      json m;
      try {
        m = json::parse(line);
      } catch (const std::exception&) {
        on_violation("a line on the gate's pipe that is not a gate message: \"" +
                     line.substr(0, 120) + (line.size() > 120 ? "...\"" : "\""));
        continue;
      }
      if (!m.is_object() || m.value("k", std::string()) != token_) {
        on_violation(
            "a message on the gate's pipe without this child's token (written by the "
            "kernel, not the gate): " +
            line.substr(0, 120));
        continue;
      }
      const long long from = m.value("p", -1LL);
      if (from != static_cast<long long>(pid_)) {
        on_violation("a gate message from process " + std::to_string(from) +
                     ", not from the kernel's process " + std::to_string(pid_) +
                     " (the kernel called fork(), and the copy went on running the suite)");
        continue;
      }
      last = steady_seconds();
      on_message(m);
    }
    buffer.erase(0, start);
  };

  for (;;) {
    const double now = steady_seconds();
    const double silence_left = silence_s - (now - last);
    const double deadline_left = deadline > 0 ? deadline - now : 1e18;
    if (suite_busy && suite_busy()) {
      // The suite's own work, not a kernel call: the silence a kernel call
      // is held to starts when the call does (seen within the 0.2 s poll).
      last = now;
      if (deadline_left > 0 && silence_left <= 0) continue;
    }
    if (silence_left <= 0 || deadline_left <= 0) {
      end.timed_out = silence_left <= 0;
      end.deadline = !end.timed_out;
      break;
    }
    const double wait_s = std::min({silence_left, deadline_left, 0.2});
    pollfd p{fd_, POLLIN, 0};
    const int r = poll(&p, 1, static_cast<int>(wait_s * 1000) + 1);
    if (r < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (r > 0) {
      const ssize_t got = read(fd_, chunk.data(), chunk.size());
      if (got < 0) {
        if (errno == EINTR) continue;
        break;
      }
      if (got == 0) break;  // every writer closed the pipe
      buffer.append(chunk.data(), static_cast<std::size_t>(got));
      take_lines();
      continue;
    }
    // Silent: the child may be gone while a process it forked holds the pipe open.
    if (!child_gone) {
      const pid_t w = waitpid(pid_, &status, WNOHANG);
      if (w == pid_) {
        child_gone = reaped_ = true;
        // Drain what is already in the pipe, then stop.
        fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) | O_NONBLOCK);
        for (ssize_t got; (got = read(fd_, chunk.data(), chunk.size())) > 0;)
          buffer.append(chunk.data(), static_cast<std::size_t>(got));
        take_lines();
        break;
      }
    }
  }
  end.silent_s = steady_seconds() - last;
  // The pipe closed: give the child a moment to exit on its own (it closes the
  // pipe just before _exit), so that its status is its own and not our SIGKILL.
  if (!end.timed_out && !end.deadline && !child_gone)
    for (int i = 0; i < 200 && !child_gone; ++i) {
      if (waitpid(pid_, &status, WNOHANG) == pid_)
        child_gone = reaped_ = true;
      else
        usleep(10000);
    }
  kill_group(pid_);
  close(fd_);
  fd_ = -1;
  if (!child_gone) {
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    reaped_ = true;
  }
  kill_group(pid_);  // helpers the kernel forked, still in the group
  if (!end.timed_out && !end.deadline) {
    end.exited = WIFEXITED(status);
    end.status = end.exited ? WEXITSTATUS(status) : WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  }
  return end;
}

}  // namespace sa::gate
