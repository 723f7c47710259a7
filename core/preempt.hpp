// Preemption (issue 34): on SIGTERM (what Slurm, Kubernetes and GNU parallel
// send before they kill a job) a command that writes an append-only journal
// stops with exit 143 (128 + 15), and a rerun of the same command resumes
// from the journal.
//
// Every journal entry is one write() and fsync() (properties/sweep.cpp), so
// the journal is durable between entries: the handler abandons the case in
// progress at once (_exit(143), nothing to flush) unless an entry is being
// written, in which case that entry is finished and fsync'd first (the
// JournalWrite scope ends with the exit). Only async-signal-safe calls run in
// the handler. A lock held by the process (core/output_lock.hpp) is dropped by
// the kernel at exit; the rerun takes it over.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

namespace sa::preempt {

inline constexpr int kExitCode = 143;

inline std::atomic<int> g_installed{0}, g_writing{0}, g_pending{0};

inline void stop_now() {
  static const char msg[] =
      "\nsoftmax-audit: SIGTERM: stopped (exit 143); every finished case is in the journal "
      "(fsync'd); run the same command again to resume\n";
  (void)!::write(STDERR_FILENO, msg, sizeof msg - 1);
  ::_exit(kExitCode);
}

inline void on_sigterm(int) {
  if (g_writing.load()) {
    g_pending.store(1);
    return;
  }
  stop_now();
}

// Installs the handler (once per process).
inline void install() {
  if (g_installed.exchange(1)) return;
  struct sigaction sa {};
  sa.sa_handler = on_sigterm;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGTERM, &sa, nullptr);
}

// Around one journal entry's write and fsync: a SIGTERM meanwhile takes
// effect when the entry is durable.
struct JournalWrite {
  JournalWrite() { g_writing.store(1); }
  ~JournalWrite() {
    g_writing.store(0);
    if (g_pending.load()) stop_now();
  }
  JournalWrite(const JournalWrite&) = delete;
  JournalWrite& operator=(const JournalWrite&) = delete;
};

}  // namespace sa::preempt
