// Output files that are either this run's, whole, or absent.
//
// Every result file the tool writes (JUnit, JSON, the report, sweep series)
// goes through write_file_atomically: the content goes to a temporary file in
// the same directory, is flushed to disk (fsync), and is renamed over the
// target, so a crash, a kill or a full disk never leaves a truncated file
// behind; every write is checked. prepare_output runs before any work: it
// checks that the path can be written and removes an earlier run's file, so
// a run that dies early leaves no stale passing file that looks like its own
// (check_output only checks, for a command that must keep the earlier files
// until its inputs are read: report). refuse_overlapping_paths refuses an
// output that would replace an input or another output.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace sa {

// An output could not be written; what() names the path and the reason.
struct OutputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// "-": the output is standard output, not a file.
inline bool is_stdout_path(const std::string& path) { return path == "-"; }

// Writes `content` to standard output (after anything buffered in stdout),
// every byte or an OutputError.
inline void write_stdout(const std::string& content) {
  std::fflush(stdout);
  const char* p = content.data();
  std::size_t left = content.size();
  while (left) {
    const ssize_t w = ::write(STDOUT_FILENO, p, left);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw OutputError(std::string("standard output ('-'): writing failed (") +
                        std::strerror(errno) + ")");
    }
    p += w;
    left -= static_cast<std::size_t>(w);
  }
}

// Throws std::invalid_argument naming `path` when it cannot be written: its
// directory is missing or not writable, or something other than a regular
// file (or a symbolic link, which is replaced, never followed) is there: a
// directory, a device, a FIFO. Changes nothing.
inline void check_output(const std::string& path, const std::string& what = "output file") {
  namespace fs = std::filesystem;
  if (path.empty() || is_stdout_path(path)) return;
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
    throw std::invalid_argument(what + " " + path + ": " +
                                (S_ISDIR(st.st_mode) ? "is a directory" : "is not a regular file") +
                                "; expected a file path");
  std::error_code ec;
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  if (!fs::is_directory(dir, ec))
    throw std::invalid_argument(what + " " + path + ": directory " + dir.string() +
                                " does not exist");
  if (access(dir.c_str(), W_OK) != 0)
    throw std::invalid_argument(what + " " + path + ": directory " + dir.string() +
                                " is not writable");
}

// check_output, then removes an earlier run's file (or a link) at `path`.
inline void prepare_output(const std::string& path, const std::string& what = "output file") {
  if (path.empty() || is_stdout_path(path)) return;
  check_output(path, what);
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && unlink(path.c_str()) != 0)
    throw std::invalid_argument(what + " " + path + ": cannot remove the earlier run's file (" +
                                std::strerror(errno) + ")");
}

// A path a command reads or writes, with the option that named it.
struct NamedPath {
  std::string option;  // e.g. "--junit"
  std::string path;
};

// Refuses (std::invalid_argument, one line naming both options) an output
// that is the same file as an input or as another output: by device and inode
// where the file exists (links, "./x", "a/../x" and hard links all count),
// by normalised absolute path where it does not. Two outputs that are both
// standard output ("-") are refused the same way. Call before any work.
inline void refuse_overlapping_paths(const std::vector<NamedPath>& inputs,
                                     const std::vector<NamedPath>& outputs) {
  namespace fs = std::filesystem;
  struct Id {
    bool exists = false;
    dev_t dev = 0;
    ino_t ino = 0;
    std::string norm;
    bool operator==(const Id& o) const {
      return exists == o.exists && (exists ? dev == o.dev && ino == o.ino : norm == o.norm);
    }
  };
  auto id_of = [](const std::string& p) {
    Id id;
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0) {
      id.exists = true;
      id.dev = st.st_dev;
      id.ino = st.st_ino;
    } else {
      std::error_code ec;
      fs::path n = fs::weakly_canonical(fs::absolute(p, ec), ec);
      id.norm = (ec ? fs::absolute(p, ec).lexically_normal() : n).string();
    }
    return id;
  };
  std::vector<std::pair<const NamedPath*, Id>> seen;
  for (const auto& i : inputs)
    if (!i.path.empty()) seen.emplace_back(&i, id_of(i.path));
  const std::size_t n_inputs = seen.size();
  const NamedPath* to_stdout = nullptr;
  for (const auto& o : outputs) {
    if (is_stdout_path(o.path)) {
      if (to_stdout)
        throw std::invalid_argument(to_stdout->option + " - and " + o.option +
                                    " -: both are standard output; expected at most one output "
                                    "'-' (nothing was done)");
      to_stdout = &o;
    }
    if (o.path.empty() || is_stdout_path(o.path)) continue;
    const Id id = id_of(o.path);
    for (std::size_t k = 0; k < seen.size(); ++k)
      if (seen[k].second == id)
        throw std::invalid_argument(
            o.option + " " + o.path + " and " + seen[k].first->option + " " + seen[k].first->path +
            " are the same file; expected an output path that is " +
            (k < n_inputs ? "not an input" : "not another output") + " (nothing was done)");
    seen.emplace_back(&o, id);
  }
}

namespace detail {
// Writes `content` to a new temporary file beside `path` (O_EXCL, never a
// followed link), flushed to disk; returns its name. Throws OutputError.
inline std::string stage_file(const std::string& path, const std::string& content) {
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
  return tmpl;
}

// Renames a staged file over `path` (a link there is replaced, not followed)
// and flushes the directory. Throws OutputError.
inline void commit_file(const std::string& tmp, const std::string& path) {
  namespace fs = std::filesystem;
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    unlink(tmp.c_str());
    throw OutputError(path + ": renaming the finished file into place failed (" + why + ")");
  }
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    fsync(dfd);
    ::close(dfd);
  }
}
}  // namespace detail

// Writes `content` to `path` whole or not at all ("-": to standard output);
// throws OutputError naming the path and the reason.
inline void write_file_atomically(const std::string& path, const std::string& content) {
  if (is_stdout_path(path)) return write_stdout(content);
  detail::commit_file(detail::stage_file(path, content), path);
}

// Writes several files that belong together (a report and its JSON twin):
// every one is written and flushed to a temporary file first, and only when
// all of them are whole are they renamed into place, so an error (a full
// disk) leaves every earlier file as it was. Throws OutputError.
// A file named "-" goes to standard output once every real file is in place.
inline void write_files_atomically(const std::vector<std::pair<std::string, std::string>>& all) {
  std::vector<std::pair<std::string, std::string>> files;
  for (const auto& f : all)
    if (!is_stdout_path(f.first)) files.push_back(f);
  std::vector<std::string> staged;
  try {
    for (const auto& [path, content] : files) staged.push_back(detail::stage_file(path, content));
  } catch (...) {
    for (const auto& t : staged) unlink(t.c_str());
    throw;
  }
  for (std::size_t i = 0; i < files.size(); ++i) {
    try {
      detail::commit_file(staged[i], files[i].first);
    } catch (...) {
      for (std::size_t j = i + 1; j < staged.size(); ++j) unlink(staged[j].c_str());
      throw;
    }
  }
  for (const auto& f : all)
    if (is_stdout_path(f.first)) write_stdout(f.second);
}

}  // namespace sa
