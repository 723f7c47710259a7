// Preemption (core/preempt.hpp, issue 34): a SIGTERM outside a journal write
// ends the process at once with exit 143; one that arrives while a journal
// entry is being written ends it with 143 only once the entry is finished.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "core/preempt.hpp"

namespace {

// Runs `body` in a child with the handler installed; returns its exit code
// (or -signal) and what it wrote to the pipe.
template <class Body>
std::pair<int, std::string> in_child(Body body) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    sa::preempt::install();
    body(fds[1]);
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string out;
  char buf[64];
  ssize_t r;
  while ((r = ::read(fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(r));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status), out};
}

TEST(Preempt, SigtermBetweenEntriesExits143AtOnce) {
  const auto [code, out] = in_child([](int fd) {
    (void)!::write(fd, "a", 1);
    ::raise(SIGTERM);
    (void)!::write(fd, "b", 1);  // never reached
  });
  EXPECT_EQ(code, 143);
  EXPECT_EQ(out, "a");
}

TEST(Preempt, SigtermDuringAnEntryWaitsForItsEnd) {
  const auto [code, out] = in_child([](int fd) {
    {
      const sa::preempt::JournalWrite entry;
      (void)!::write(fd, "a", 1);
      ::raise(SIGTERM);
      (void)!::write(fd, "b", 1);  // the rest of the entry is still written
    }
    (void)!::write(fd, "c", 1);  // never reached: the exit comes at the entry's end
  });
  EXPECT_EQ(code, 143);
  EXPECT_EQ(out, "ab");
}

TEST(Preempt, NoSignalNoExit) {
  const auto [code, out] = in_child([](int fd) {
    { const sa::preempt::JournalWrite entry; }
    (void)!::write(fd, "done", 4);
  });
  EXPECT_EQ(code, 0);
  EXPECT_EQ(out, "done");
}

}  // namespace
