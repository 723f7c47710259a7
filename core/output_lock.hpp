// An exclusive lock on an output folder, so that two runs writing one folder
// at once (two `sweep --out D` jobs in one workspace) never mix their rows.
//
// The lock is flock(2) on DIR/.softmax-audit.lock, which holds the holder's
// pid for the message a second run prints. The kernel drops an flock when its
// holder dies however it dies (kill -9 included), so a lock file left by a
// dead run is stale and simply taken over; no pid is trusted for that. The
// descriptor is close-on-exec: programs a command starts do not hold it.
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

namespace sa {

class OutputDirLock {
 public:
  static constexpr const char* file_name = ".softmax-audit.lock";

  // Takes the lock on `dir` (which must exist) or throws std::invalid_argument
  // naming `option dir`, the holder's pid and what to do.
  OutputDirLock(const std::string& dir, const std::string& option) {
    path_ = (std::filesystem::path(dir) / file_name).string();
    for (int attempt = 0; attempt < 100; ++attempt) {
      fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
      if (fd_ < 0)
        throw std::invalid_argument(option + " " + dir + ": cannot create the lock file " + path_ +
                                    " (" + std::strerror(errno) + ")");
      if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
        const int err = errno;
        std::string holder;
        {
          std::ifstream in(path_);
          std::getline(in, holder);
        }
        ::close(fd_);
        fd_ = -1;
        if (err != EWOULDBLOCK)
          throw std::invalid_argument(option + " " + dir + ": cannot lock " + path_ + " (" +
                                      std::strerror(err) + ")");
        throw std::invalid_argument(
            option + " " + dir + ": another softmax-audit run is writing this folder (pid " +
            (holder.empty() ? std::string("unknown") : holder) + ", lock file " + path_ +
            "); wait for it to end or use another " + option);
      }
      // The file may have been removed by its previous holder between our
      // open and our flock: then we hold a lock on a name no one else sees.
      struct stat a {
      }, b{};
      if (::fstat(fd_, &a) == 0 && ::lstat(path_.c_str(), &b) == 0 && a.st_dev == b.st_dev &&
          a.st_ino == b.st_ino) {
        const std::string pid = std::to_string(::getpid()) + "\n";
        if (::ftruncate(fd_, 0) == 0) (void)!::pwrite(fd_, pid.data(), pid.size(), 0);
        return;
      }
      ::close(fd_);
      fd_ = -1;
    }
    throw std::invalid_argument(option + " " + dir + ": cannot take the lock " + path_);
  }
  OutputDirLock(const OutputDirLock&) = delete;
  OutputDirLock& operator=(const OutputDirLock&) = delete;
  // Removes the lock file while still holding it, then releases it.
  ~OutputDirLock() {
    if (fd_ < 0) return;
    ::unlink(path_.c_str());
    ::close(fd_);
  }

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace sa
