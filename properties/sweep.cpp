#include "properties/sweep.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "core/case_id.hpp"
#include "core/output_file.hpp"
#include "core/preempt.hpp"
#include "properties/baseline.hpp"
#include "properties/budgets.hpp"
#include "properties/generators.hpp"
#include "properties/suite.hpp"
#include "reference/mpfr.hpp"
#include "reference/rounding.hpp"
#include "reference/softmax_cr.hpp"
#include "theory/critical_size.hpp"
#include "theory/dispersion.hpp"

namespace sa::props {
std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> f;
  std::string cur;
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char ch = line[i];
    if (quoted) {
      if (ch == '"' && i + 1 < line.size() && line[i + 1] == '"')
        cur += '"', ++i;
      else if (ch == '"')
        quoted = false;
      else
        cur += ch;
    } else if (ch == '"' && cur.empty()) {
      quoted = true;
    } else if (ch == ',') {
      f.push_back(cur), cur.clear();
    } else {
      cur += ch;
    }
  }
  f.push_back(cur);
  return f;
}

namespace {

// Neumaier's compensated sum: error <= 2u|sum| + O(n u^2) sum|x_i|.
struct CompensatedSum {
  double s = 0, c = 0;
  void add(double x) {
    const double t = s + x;
    c += std::abs(s) >= std::abs(x) ? (s - t) + x : (x - t) + s;
    s = t;
  }
  double value() const { return s + c; }
};

const char* const kColumns[] = {"key",
                                "kernel",
                                "dtype",
                                "distribution",
                                "temperature",
                                "log2n",
                                "n",
                                "seed",
                                "spread",
                                "max_ulp_sampled",
                                "ulp_budget_at_worst",
                                "rel_err_sampled",
                                "t7_bound",
                                "sum_minus_one",
                                "pmax_kernel",
                                "pmax_exact",
                                "t1_upper",
                                "n_star",
                                "dispersed",
                                "H_kernel",
                                "H_exact",
                                "log_n",
                                "H_err",
                                "H_budget",
                                "lse_kernel",
                                "lse_exact",
                                "lse_err",
                                "seconds",
                                "elements_checked",
                                "max_ulp_all",
                                "ulp_budget_all",
                                "rel_err_all",
                                "baseline_rel_err",
                                "vectorised_threshold",
                                "checked_fraction",
                                "fallback_fraction",
                                "max_ulps_from_cr",
                                "cr_equal_fraction"};

std::string num(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

// RFC 4180: a field holding a comma, a quote or a line break is quoted, its
// quotes doubled (kernel names may hold any printable text).
std::string csv_field(const std::string& f) {
  if (f.find_first_of(",\"\r\n") == std::string::npos) return f;
  std::string o = "\"";
  for (char c : f) o += c == '"' ? std::string("\"\"") : std::string(1, c);
  return o + "\"";
}

std::string to_line(const SweepRow& r) {
  std::ostringstream os;
  os << csv_field(r.key) << ',' << csv_field(r.kernel) << ',' << csv_field(r.dtype) << ','
     << csv_field(r.distribution) << ',' << num(r.temperature) << ',' << r.log2n << ',' << r.n
     << ',' << r.seed << ',' << num(r.spread) << ',' << num(r.max_ulp_sampled) << ','
     << num(r.ulp_budget_at_worst) << ',' << num(r.rel_err_sampled) << ',' << num(r.t7_bound) << ','
     << num(r.sum_minus_one) << ',' << num(r.pmax_kernel) << ',' << num(r.pmax_exact) << ','
     << num(r.t1_upper) << ',' << num(r.n_star) << ',' << r.dispersed << ',' << num(r.H_kernel)
     << ',' << num(r.H_exact) << ',' << num(r.log_n) << ',' << num(r.H_err) << ','
     << num(r.H_budget) << ',' << num(r.lse_kernel) << ',' << num(r.lse_exact) << ','
     << num(r.lse_err) << ',' << num(r.seconds) << ',' << r.elements_checked << ','
     << num(r.max_ulp_all) << ',' << num(r.ulp_budget_all) << ',' << num(r.rel_err_all) << ','
     << num(r.baseline_rel_err) << ',' << num(r.vectorised_threshold) << ','
     << num(r.checked_fraction) << ',' << num(r.fallback_fraction) << ',' << num(r.max_ulps_from_cr)
     << ',' << num(r.cr_equal_fraction) << '\n';
  return os.str();
}

SweepRow from_fields(const std::vector<std::string>& f) {
  SweepRow r;
  auto d = [&](std::size_t i) { return std::strtod(f[i].c_str(), nullptr); };
  r.key = f[0], r.kernel = f[1], r.dtype = f[2], r.distribution = f[3];
  r.temperature = d(4);
  r.log2n = std::atoi(f[5].c_str());
  r.n = std::atoll(f[6].c_str());
  r.seed = std::strtoull(f[7].c_str(), nullptr, 10);
  r.spread = d(8), r.max_ulp_sampled = d(9), r.ulp_budget_at_worst = d(10),
  r.rel_err_sampled = d(11);
  r.t7_bound = d(12), r.sum_minus_one = d(13), r.pmax_kernel = d(14), r.pmax_exact = d(15),
  r.t1_upper = d(16);
  r.n_star = d(17);
  r.dispersed = std::atoi(f[18].c_str());
  r.H_kernel = d(19), r.H_exact = d(20), r.log_n = d(21), r.H_err = d(22), r.H_budget = d(23);
  r.lse_kernel = d(24), r.lse_exact = d(25), r.lse_err = d(26), r.seconds = d(27);
  r.elements_checked = std::atoll(f[28].c_str());
  r.max_ulp_all = d(29), r.ulp_budget_all = d(30), r.rel_err_all = d(31),
  r.baseline_rel_err = d(32), r.vectorised_threshold = d(33);
  r.checked_fraction = d(34), r.fallback_fraction = d(35), r.max_ulps_from_cr = d(36),
  r.cr_equal_fraction = d(37);
  return r;
}

// A number field, whole: anything else makes the line not a row of the table.
bool numeric(const std::string& f) {
  if (f.empty()) return false;
  char* end = nullptr;
  std::strtod(f.c_str(), &end);
  return end == f.c_str() + f.size();
}

// The table's identity (its first line): the configuration every row shares.
// Rows of another kernel, seed, sample count or generator level are never
// mixed into one table (and so into one plotted series). "draw=2": the rows'
// logits come from sweep_row_seed (core/case_id.hpp, issue 34); a table
// written before it (no draw field: seeds from std::hash) holds other rows and
// is refused as another configuration, never resumed with rows of both.
std::string identity_line(const std::string& kernel, std::uint64_t seed, int samples, int level) {
  std::string k;
  for (unsigned char c : kernel) {
    if (std::isalnum(c) || c == '_' || c == '-' || c == '.') {
      k += static_cast<char>(c);
    } else {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%%%02X", c);
      k += hex;
    }
  }
  return "# softmax-audit sweep table: kernel=" + k + "; seed=" + std::to_string(seed) +
         "; samples=" + std::to_string(samples) + "; level=" + std::to_string(level) + "; draw=2";
}

// Parses one row line strictly; throws std::invalid_argument naming the line.
SweepRow parse_row(const std::string& path, std::size_t lineno, const std::string& line);

void write_all(int fd, const std::string& s, const std::string& path) {
  const preempt::JournalWrite entry;  // a SIGTERM now takes effect once the line is durable
  std::size_t done = 0;
  while (done < s.size()) {
    const ssize_t w = ::write(fd, s.data() + done, s.size() - done);
    if (w < 0)
      throw std::runtime_error("sweep: cannot write " + path + ": " + std::strerror(errno));
    done += static_cast<std::size_t>(w);
  }
  if (::fsync(fd) != 0)
    throw std::runtime_error("sweep: cannot fsync " + path + ": " + std::strerror(errno));
}

// Opens the table for appending: creates it with its identity line and the
// header, or checks both and drops a partial last line (a kill mid-write);
// returns the keys already present. Throws std::invalid_argument when the
// file is a table of another configuration, another version, or holds a line
// that is not one of its rows.
int open_table(const std::string& path, const std::string& identity, std::set<std::string>& keys) {
  // Never through a link planted at the table's path (it would write into the
  // link's target, or create it), and never anything but a regular file.
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    throw std::invalid_argument(
        "sweep: " + path + ": " +
        (S_ISLNK(st.st_mode) ? "is a symbolic link" : "is not a regular file") +
        "; expected the sweep table itself (remove it, or use another --out)");
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0644);
  if (fd < 0)
    throw std::invalid_argument("sweep: cannot open " + path + ": " + std::strerror(errno));
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw std::invalid_argument("sweep: " + path +
                                ": is not a regular file; expected the sweep table");
  }
  std::string content;
  {
    char buf[1 << 16];
    ssize_t r;
    ::lseek(fd, 0, SEEK_SET);
    while ((r = ::read(fd, buf, sizeof buf)) > 0) content.append(buf, static_cast<std::size_t>(r));
  }
  const std::string head = identity + "\n" + sweep_csv_header() + "\n";
  auto refuse = [&](const std::string& why) {
    ::close(fd);
    throw std::invalid_argument("sweep: " + path + ": " + why);
  };
  const std::size_t keep =
      content.find_last_of('\n') == std::string::npos ? 0 : content.find_last_of('\n') + 1;
  if (content.size() >= head.size() || keep >= head.size()) {
    if (content.rfind(head, 0) != 0) {
      const std::string first = content.substr(0, content.find('\n'));
      if (first.rfind("# softmax-audit sweep table:", 0) == 0 &&
          content.compare(first.size() + 1, sweep_csv_header().size(), sweep_csv_header()) == 0)
        refuse("the table was made by another configuration (its first line is \"" + first +
               "\", this run's is \"" + identity +
               "\"); rows of different kernels, seeds, sample counts, levels or draws are never "
               "mixed: "
               "use another --out, or remove the table to start again");
      refuse(
          "exists but is not a sweep table of this version (its first lines differ from "
          "the expected identity and header); use another path");
    }
  } else if (head.rfind(content, 0) != 0) {
    refuse("exists but is not a sweep table of this version; use another path");
  }
  if (keep < content.size()) {  // a kill mid-write left a partial line: drop it
    if (::ftruncate(fd, static_cast<off_t>(keep)) != 0 || ::fsync(fd) != 0)
      refuse("cannot truncate the partial last line");
    content.resize(keep);
  }
  if (content.size() < head.size()) {  // new, or even the head was partial
    if (::ftruncate(fd, 0) != 0) refuse("cannot truncate");
    content.clear();
    ::lseek(fd, 0, SEEK_SET);
    write_all(fd, head, path);
  }
  std::istringstream is(content.substr(std::min(content.size(), head.size())));
  std::string line;
  std::size_t lineno = 2;
  while (std::getline(is, line)) {
    ++lineno;
    if (line.empty()) continue;
    try {
      keys.insert(parse_row(path, lineno, line).key);
    } catch (const std::invalid_argument& e) {
      refuse(std::string(e.what()).substr(std::string("sweep: " + path + ": ").size()));
    }
  }
  ::lseek(fd, 0, SEEK_END);
  return fd;
}

// floor(log2 n), n >= 1.
int floor_log2(std::int64_t n) {
  int k = 0;
  while ((std::int64_t(2) << k) <= n) ++k;
  return k;
}

// The row's logits are drawn from sweep_row_seed(seed, n, distribution)
// (core/case_id.hpp): the same on every build and for every kernel.
SweepRow measure(const Kernel& k, DType t, const std::string& dist, int level, double theta,
                 std::int64_t n_row, std::uint64_t seed, int samples) {
  const int log2n = floor_log2(n_row);
  SweepRow row;
  row.kernel = k.name();
  row.dtype = name_of(t);
  row.distribution = dist;
  row.temperature = theta;
  row.log2n = log2n;
  row.n = n_row;
  row.seed = seed;
  RowParams p;
  p.dist = dist;
  p.n = row.n;
  p.level = level;
  p.temperature = theta;
  p.seed = sweep_row_seed(seed, n_row, dist);
  const RowBatch b = materialise(p, t);
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<float> w = k.softmax(t, b, theta);
  if (k.supports(Op::entropy)) row.H_kernel = k.entropy(t, b, theta)[0];
  if (k.supports(Op::logsumexp)) row.lse_kernel = k.logsumexp(t, b, theta)[0];
  // Whole-row exact-enough quantities (double, compensated).
  const std::int64_t n = row.n;
  double m = -INFINITY;
  std::int64_t imax = 0, imin = 0;
  double zmin = INFINITY;
  for (std::int64_t j = 0; j < n; ++j) {
    const double z = double(b.data[static_cast<std::size_t>(j)]) / theta;
    if (z > m) m = z, imax = j;
    if (z < zmin && z != -INFINITY) zmin = z, imin = j;
  }
  CompensatedSum S, T, W;
  for (std::int64_t j = 0; j < n; ++j) {
    const double z = double(b.data[static_cast<std::size_t>(j)]) / theta;
    if (z == -INFINITY) continue;
    const double e = std::exp(z - m);
    S.add(e);
    T.add(e * (z - m));
  }
  for (float x : w) W.add(x);
  const double L = m + std::log(S.value());
  row.lse_exact = L;
  row.H_exact = std::log(S.value()) - T.value() / S.value();
  row.log_n = std::log(double(n));
  const budget::RowStats st = budget::stats(b.row(0), theta);
  row.spread = st.spread;
  row.H_budget = budget::entropy_abs(st, row.H_exact);
  row.H_err = std::abs(row.H_kernel - row.H_exact);
  row.lse_err = std::abs(row.lse_kernel - row.lse_exact);
  row.sum_minus_one = W.value() - 1.0;
  row.pmax_kernel = *std::max_element(w.begin(), w.end());
  row.pmax_exact = 1.0 / S.value();  // exp(m - m) / S
  row.t1_upper = theory::dispersion_bounds<double>(double(st.live), st.spread, 1.0).upper;
  row.n_star = theory::critical_size(unit_roundoff(t), st.spread, 1.0);
  row.dispersed = double(n) > row.n_star ? 1 : 0;
  // T7 in float32 plus the one rounding to bfloat16/float16 (budget::storage_rel:
  // u_t, or float16's subnormal floor 2^-25 / p_max once every weight is below 2^-14).
  row.t7_bound = (double(st.live) + 4.0 + 2.0 * st.spread + budget::theta_term(st)) * budget::u32 +
                 budget::storage_rel(t, row.pmax_exact);
  // Sampled items: exact weights from MPFR given L.
  std::vector<std::int64_t> idx = {imax, imin};
  std::mt19937_64 rng(p.seed ^ 0x5eedull);
  for (int s = 0; s < samples; ++s)
    idx.push_back(static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(n)));
  ref::PrecisionScope prec(128);
  const ref::Mp Lm(L);
  double worst_ratio = -1, err_max = 0;
  for (std::int64_t j : idx) {
    const double z = double(b.data[static_cast<std::size_t>(j)]) / theta;
    const double e = z == -INFINITY
                         ? 0.0
                         : exp(ref::Mp(b.data[static_cast<std::size_t>(j)]) / ref::Mp(theta) - Lm)
                               .convert_to<double>();
    const double g = w[static_cast<std::size_t>(j)];
    const double u = budget::ulp(t, e);
    const double ulps = std::abs(g - e) / u, bud = budget::softmax_abs(t, st, z, e) / u;
    const double ratio = bud > 0 ? ulps / bud : (ulps == 0 ? 0 : INFINITY);
    if (ratio > worst_ratio)
      worst_ratio = ratio, row.max_ulp_sampled = ulps, row.ulp_budget_at_worst = bud;
    err_max = std::max(err_max, std::abs(g - e));
  }
  row.rel_err_sampled = err_max / row.pmax_exact;
  // Every element, against exp(z_j - m) / S in double (relative error
  // <= ~1e-14 from S and the argument z_j - m, exact in double for float
  // logits at theta = 1: about 1e-7 ulp of float32, so no verdict near a
  // budget of >= 1 ulp can move): the ulp rule and the vectorised_2x rule.
  {
    const double Sv = S.value();
    double worst_all = -1, err_all = 0;
    for (std::int64_t j = 0; j < n; ++j) {
      const double z = double(b.data[static_cast<std::size_t>(j)]) / theta;
      const double e = z == -INFINITY ? 0.0 : std::exp(z - m) / Sv;
      const double g = w[static_cast<std::size_t>(j)];
      const double u = budget::ulp(t, e);
      const double ulps = std::abs(g - e) / u, bud = budget::softmax_abs(t, st, z, e) / u;
      const double ratio = std::isnan(g) ? INFINITY
                           : bud > 0     ? ulps / bud
                                         : (ulps == 0 ? 0 : INFINITY);
      if (ratio > worst_all) worst_all = ratio, row.max_ulp_all = ulps, row.ulp_budget_all = bud;
      err_all = std::isnan(g) ? NAN : std::max(err_all, std::abs(g - e));
    }
    row.elements_checked = n;
    row.rel_err_all = err_all / row.pmax_exact;
    std::vector<double> ex(static_cast<std::size_t>(n));
    for (std::int64_t j = 0; j < n; ++j) {
      const double z = double(b.data[static_cast<std::size_t>(j)]) / theta;
      ex[static_cast<std::size_t>(j)] = z == -INFINITY ? 0.0 : std::exp(z - m) / Sv;
    }
    row.baseline_rel_err = baseline::baseline_error(t, b.row(0), theta, ex);
    row.vectorised_threshold =
        baseline::vectorised_threshold(t, row.baseline_rel_err, double(st.live), row.pmax_exact);
  }
  // Every element against the correctly rounded weight (reference/softmax_cr.hpp,
  // all cores; bit-identical to rounding the MPFR reference).
  {
    ref::CrStats cs;
    ref::CrOptions co;
    co.stats = &cs;
    const auto r0 = b.row(0);
    const std::vector<double> l(r0.begin(), r0.end());
    const std::vector<double> cr = ref::softmax_rounded(t, l, theta, co);
    std::int64_t equal = 0, worst = 0;
    for (std::int64_t j = 0; j < n; ++j) {
      const auto jj = static_cast<std::size_t>(j);
      const std::int64_t apart = ref::ulps_apart(t, static_cast<double>(w[jj]), cr[jj]);
      if (apart == 0) ++equal;
      worst = std::max(worst, apart);
    }
    row.checked_fraction = static_cast<double>(cs.elements) / static_cast<double>(n);
    row.fallback_fraction = cs.fallback_fraction();
    row.max_ulps_from_cr = static_cast<double>(worst);
    row.cr_equal_fraction = static_cast<double>(equal) / static_cast<double>(n);
  }
  row.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return row;
}

}  // namespace

std::string sweep_csv_header() {
  std::string h;
  for (const char* c : kColumns) h += (h.empty() ? "" : ",") + std::string(c);
  return h;
}

namespace {
SweepRow parse_row(const std::string& path, std::size_t lineno, const std::string& line) {
  const std::size_t ncol = sizeof kColumns / sizeof kColumns[0];
  const auto f = csv_fields(line);
  auto bad = [&](const std::string& why) {
    throw std::invalid_argument("sweep: " + path + ": line " + std::to_string(lineno) +
                                " is not a row of this table (" + why + ")");
  };
  if (f.size() != ncol) bad(std::to_string(f.size()) + " fields, expected " + std::to_string(ncol));
  for (std::size_t i = 4; i < ncol; ++i)
    if (!numeric(f[i])) bad("column " + std::string(kColumns[i]) + " is not a number");
  SweepRow r = from_fields(f);
  // The key is made from the row's own fields: a line whose key does not
  // match them was not written by a sweep.
  // A power of two's key holds |k<log2 n>, any other size's |n<n>
  // (with log2n = floor(log2 n)).
  const bool pow2_ok = r.key.find("|k" + std::to_string(r.log2n) + "|s" + std::to_string(r.seed) +
                                  "|") != std::string::npos &&
                       r.n == (std::int64_t(1) << std::clamp(r.log2n, 0, 62));
  const bool other_ok = r.n > 0 && (r.n & (r.n - 1)) != 0 && r.log2n >= 0 && r.log2n < 62 &&
                        (std::int64_t(1) << r.log2n) < r.n && r.n < (std::int64_t(2) << r.log2n) &&
                        r.key.find("|n" + std::to_string(r.n) + "|s" + std::to_string(r.seed) +
                                   "|") != std::string::npos;
  if (r.key.rfind(r.kernel + "|" + r.dtype + "|" + r.distribution + "|", 0) != 0 ||
      !(pow2_ok || other_ok))
    bad("its key does not match its kernel, dtype, distribution, size and seed");
  return r;
}
}  // namespace

std::vector<SweepRow> read_sweep_csv(const std::string& path) {
  return read_sweep_table(path).rows;
}

std::string sweep_csv_line(const SweepRow& row) { return to_line(row); }

SweepTable read_sweep_table(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("sweep: cannot read " + path);
  SweepTable table;
  std::string line;
  std::getline(in, line);
  if (line.rfind("# softmax-audit sweep table:", 0) != 0)
    throw std::invalid_argument("sweep: " + path + " does not start with a sweep table's identity");
  table.identity = line;
  std::getline(in, line);
  if (line != sweep_csv_header())
    throw std::invalid_argument("sweep: " + path + " does not hold the sweep header");
  std::size_t lineno = 2;
  std::string next;
  bool have = static_cast<bool>(std::getline(in, next));
  while (have) {
    line = next;
    ++lineno;
    have = static_cast<bool>(std::getline(in, next));
    if (line.empty()) continue;
    // Only the last line may be partial (a sweep killed or still writing).
    if (!have && in.eof() && csv_fields(line).size() != sizeof kColumns / sizeof kColumns[0]) break;
    table.rows.push_back(parse_row(path, lineno, line));
    table.lines.push_back(line);
  }
  return table;
}

void write_sweep_json(const std::vector<SweepRow>& rows, const std::string& path) {
  write_file_atomically(path, sweep_rows_json_text(rows));
}

std::string sweep_rows_json_text(const std::vector<SweepRow>& rows) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& r : rows) {
    const auto f = csv_fields(to_line(r).substr(0, to_line(r).size() - 1));
    nlohmann::json o;
    for (std::size_t i = 0; i < f.size(); ++i) {
      const std::string c = kColumns[i];
      if (i <= 3 || c == "seed") {
        o[c] = f[i];  // text; the seed as a string so that every JSON reader keeps all 64 bits
      } else {
        const double v = std::strtod(f[i].c_str(), nullptr);
        if (std::isfinite(v))
          o[c] = v;
        else  // the one encoding of non-finite numbers in every JSON output (docs/schema/)
          o[c] = std::isnan(v) ? "NaN" : v > 0 ? "Infinity" : "-Infinity";
      }
    }
    a.push_back(o);
  }
  // A name that is not UTF-8 (a damaged table) is written with U+FFFD, not thrown on.
  return a.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::vector<std::int64_t> default_other_sizes(int min_log2, int max_log2) {
  std::vector<std::int64_t> out;
  const std::int64_t lo = std::int64_t(1) << std::clamp(min_log2, 0, 30),
                     hi = std::int64_t(1) << std::clamp(max_log2, 0, 30);
  for (int k : {5, 10, 15})
    for (std::int64_t n :
         {(std::int64_t(1) << k) - 1, (std::int64_t(1) << k) + (std::int64_t(1) << (k - 1)) + 1})
      if (n >= lo && n <= hi) out.push_back(n);
  return out;
}

namespace {
std::string kernel_identity_of(const Kernel& kernel, const SweepConfig& c) {
  return c.kernel_identity.empty() ? "builtin:" + kernel.name() : c.kernel_identity;
}
}  // namespace

std::string sweep_identity_line(const Kernel& kernel, const SweepConfig& c, bool with_shard) {
  std::string id = identity_line(kernel.name(), c.seed, c.samples, c.level);
  if (!c.timing) id += "; timing=off";
  if (with_shard && c.shard_count > 1)
    id += "; shard=" + std::to_string(c.shard_index) + "/" + std::to_string(c.shard_count);
  return id;
}

std::vector<SweepCase> plan_sweep(const Kernel& kernel, const SweepConfig& c) {
  if (c.samples < 0) throw std::invalid_argument("sweep: samples must be >= 0");
  if (c.shard_count < 1 || c.shard_index >= c.shard_count)
    throw std::invalid_argument("sweep: shard " + std::to_string(c.shard_index) + "/" +
                                std::to_string(c.shard_count) +
                                ": expected an index from 0 to the number of shards - 1");
  std::vector<int> ks = c.log2_sizes;
  if (ks.empty())
    for (int k = 4; k <= 24; ++k) ks.push_back(k);
  for (int k : ks)
    if (k < 0 || k > 30)
      throw std::invalid_argument("sweep: log2 size " + std::to_string(k) + " outside [0, 30]");
  std::vector<std::string> dists = c.distributions;
  if (dists.empty()) dists = {"gaussian", "uniform", "spike", "fa3_outliers"};
  for (const auto& d : dists)
    if (std::find(distribution_names().begin(), distribution_names().end(), d) ==
        distribution_names().end())
      throw std::invalid_argument("sweep: unknown distribution '" + d + "'");
  std::vector<double> temps = c.temperatures.empty() ? std::vector<double>{1.0} : c.temperatures;
  for (double th : temps)
    if (!(th > 0) || !std::isfinite(th))
      throw std::invalid_argument("sweep: temperature must be finite and > 0");
  std::vector<DType> dtypes = c.dtypes;
  if (dtypes.empty()) dtypes = {DType::float32, DType::bfloat16, DType::float16};
  // Every size, ascending: powers of two ("|k<log2 n>" in the key) and the others ("|n<n>").
  std::vector<std::pair<std::int64_t, std::string>> sizes;
  for (int k : ks) sizes.push_back({std::int64_t(1) << k, "|k" + std::to_string(k)});
  for (std::int64_t n : c.other_sizes) {
    if (n < 1 || n > (std::int64_t(1) << 30))
      throw std::invalid_argument("sweep: size " + std::to_string(n) + " outside [1, 2^30]");
    if ((n & (n - 1)) == 0)
      sizes.push_back({n, "|k" + std::to_string(floor_log2(n))});
    else
      sizes.push_back({n, "|n" + std::to_string(n)});
  }
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  const std::string identity = kernel_identity_of(kernel, c);
  std::vector<SweepCase> plan;
  for (DType t : dtypes) {
    if (!kernel.supports(t) || t == DType::float64) continue;
    for (const auto& dist : dists)
      for (double th : temps)
        for (const auto& [n, size] : sizes) {
          SweepCase sc;
          sc.key = kernel.name() + "|" + name_of(t) + "|" + dist + "|L" + std::to_string(c.level) +
                   "|t" + num(th) + size + "|s" + std::to_string(c.seed) + "|m" +
                   std::to_string(c.samples);
          CaseKey k;
          k.kernel = identity;
          k.op = "sweep";
          k.dtype = name_of(t);
          k.shape = {n};
          k.distribution = dist;
          k.theta = th;
          k.level = c.level;
          k.seed = c.seed;
          k.index = 0;
          sc.id = case_id(k);
          sc.dtype = t;
          sc.distribution = dist;
          sc.temperature = th;
          sc.n = n;
          sc.size = size;
          plan.push_back(std::move(sc));
        }
  }
  return plan;
}

std::vector<SweepRow> run_sweep(const Kernel& kernel, const SweepConfig& c) {
  if (c.csv_path.empty())
    throw std::invalid_argument("sweep: csv_path is empty; expected a file to append rows to");
  if (!kernel.supports(Op::softmax))
    throw std::invalid_argument("sweep: kernel '" + kernel.name() + "' does not implement softmax");
  // The kernel's own declared conventions widen the element budgets (conventions.hpp).
  const ConventionScope conventions(conventions_of(kernel, SuiteConfig{}));
  std::vector<SweepCase> plan = plan_sweep(kernel, c);
  // This shard's rows only (every row when unsharded).
  plan.erase(
      std::remove_if(plan.begin(), plan.end(),
                     [&](const SweepCase& sc) { return sc.id % c.shard_count != c.shard_index; }),
      plan.end());
  std::set<std::string> done;
  const int fd = open_table(c.csv_path, sweep_identity_line(kernel, c), done);
  // This run's work, for the progress callback.
  SweepProgress progress;
  for (const SweepCase& sc : plan)
    if (!done.count(sc.key)) {
      ++progress.rows;
      progress.elements_total += static_cast<double>(sc.n);
    }
  try {
    for (const SweepCase& sc : plan) {
      if (done.count(sc.key)) continue;
      SweepRow r = measure(kernel, sc.dtype, sc.distribution, c.level, sc.temperature, sc.n, c.seed,
                           c.samples);
      r.key = sc.key;
      if (!c.timing) r.seconds = 0;
      write_all(fd, to_line(r), c.csv_path);
      done.insert(sc.key);
      if (c.on_row) c.on_row(sc.key);
      ++progress.row;
      progress.elements_done += static_cast<double>(sc.n);
      progress.key = sc.key;
      if (c.on_progress) c.on_progress(progress);
    }
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  std::vector<SweepRow> rows = read_sweep_csv(c.csv_path);
  if (!c.json_path.empty()) write_sweep_json(rows, c.json_path);
  return rows;
}

}  // namespace sa::props
