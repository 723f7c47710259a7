// Output files that are either this run's, whole, or absent.
//
// Every result file the tool writes (JUnit, JSON, the report, sweep series)
// goes through write_file_atomically: the content goes to a temporary file in
// the same directory, is flushed to disk (fsync), and is renamed over the
// target, so a crash, a kill or a full disk never leaves a truncated file
// behind; every write is checked. prepare_output runs before any work: it
// checks that the path can be written and removes an earlier run's file, so
// a run that dies early leaves no stale passing file that looks like its own.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace sa {

// An output could not be written; what() names the path and the reason.
struct OutputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Throws std::invalid_argument naming `path` when it cannot be written (its
// directory is missing or not writable, or the path is a directory); else
// removes an existing file there.
inline void prepare_output(const std::string& path, const std::string& what = "output file") {
  namespace fs = std::filesystem;
  if (path.empty()) return;
  std::error_code ec;
  if (fs::is_directory(path, ec))
    throw std::invalid_argument(what + " " + path + ": is a directory; expected a file path");
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  if (!fs::is_directory(dir, ec))
    throw std::invalid_argument(what + " " + path + ": directory " + dir.string() +
                                " does not exist");
  if (access(dir.c_str(), W_OK) != 0)
    throw std::invalid_argument(what + " " + path + ": directory " + dir.string() +
                                " is not writable");
  if (fs::exists(path, ec) && unlink(path.c_str()) != 0)
    throw std::invalid_argument(what + " " + path + ": cannot remove the earlier run's file (" +
                                std::strerror(errno) + ")");
}

// Writes `content` to `path` whole or not at all; throws OutputError naming
// the path and the reason.
inline void write_file_atomically(const std::string& path, const std::string& content) {
  namespace fs = std::filesystem;
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  std::string tmpl = (dir / ("." + fs::path(path).filename().string() + ".XXXXXX")).string();
  const int fd = mkstemp(tmpl.data());
  if (fd < 0)
    throw OutputError(path + ": cannot create a temporary file beside it (" + std::strerror(errno) +
                      ")");
  auto fail = [&](const char* step) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    unlink(tmpl.c_str());
    throw OutputError(path + ": " + step + " failed (" + why + "); the file was not written");
  };
  const char* p = content.data();
  std::size_t left = content.size();
  while (left) {
    const ssize_t w = ::write(fd, p, left);
    if (w < 0) {
      if (errno == EINTR) continue;
      fail("writing");
    }
    p += w;
    left -= static_cast<std::size_t>(w);
  }
  if (fchmod(fd, 0644) != 0) fail("fchmod");
  if (fsync(fd) != 0) fail("fsync");
  if (::close(fd) != 0) {
    const std::string why = std::strerror(errno);
    unlink(tmpl.c_str());
    throw OutputError(path + ": closing failed (" + why + "); the file was not written");
  }
  if (std::rename(tmpl.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    unlink(tmpl.c_str());
    throw OutputError(path + ": renaming the finished file into place failed (" + why + ")");
  }
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace sa
