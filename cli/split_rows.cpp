// `sweep --row-chunks C`: rows larger than one machine (cli/split_rows.hpp,
// docs/scale-out.md "Rows larger than one machine").
//
// The reference's side is properties/row_chunks.hpp (MPFR chunk states and
// T6's merge written again in the reference's precision); the kernel's side is
// its own logsumexp, entropy, merge_entropy_states and softmax ops. The budgets
// are derived next to row_budgets() below.
#include "cli/split_rows.hpp"

#include <fcntl.h>
#include <fmt/core.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

#include "cli/commands.hpp"
#include "core/case_id.hpp"
#include "core/output_file.hpp"
#include "core/output_lock.hpp"
#include "core/preempt.hpp"
#include "core/shard.hpp"
#include "gate/kernel_source.hpp"
#include "gate/provenance.hpp"
#include "kernels/builtin.hpp"
#include "properties/budgets.hpp"
#include "properties/generators.hpp"
#include "properties/row_chunks.hpp"

namespace sa::cli {
namespace {

namespace fs = std::filesystem;
using props::distribution_names;
using props::materialise;
using props::RowParams;
namespace budget = props::budget;

constexpr const char* kPlanFile = "shard.json";
constexpr const char* kChunkJournal = "chunks.txt";      // phase 1
constexpr const char* kElementJournal = "elements.txt";  // phase 2
constexpr const char* kStateFile = "row-states.json";
constexpr const char* kTableFile = "split-rows.csv";
// The reference's precision for chunk states and their merge (as the sweep's
// sampled MPFR weights): 2^32 terms summed lose at most 32 of its 128 bits.
constexpr int kStateBits = 128;
// Items per block of a chunk's reference state (blocks run on all cores).
constexpr std::int64_t kStateBlock = std::int64_t(1) << 16;
// Memory of one chunk of n_c items: the logits (4 bytes), the kernel handle's
// copies of its input and output and the weights returned. Measured
// (/usr/bin/time, release build): phase 2 of a chunk of 2^23 items 205.5 MB
// max RSS, a chunk of 2^9 items 9.3 MB, so 23.4 bytes per item; 24 are used.
constexpr double kBytesPerChunkItem = 24.0;
constexpr double kBytesFixed = 32.0 * 1024 * 1024;
constexpr std::int64_t kMaxChunkItems = std::int64_t(1) << 30;

struct Usage : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

std::string num(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}
double to_num(const std::string& s) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size()) throw Usage("\"" + s + "\" is not a number");
  return v;
}
std::int64_t to_int(const std::string& s) {
  std::size_t pos = 0;
  long long v = 0;
  try {
    v = std::stoll(s, &pos);
  } catch (const std::exception&) {
    pos = 0;
  }
  if (s.empty() || pos != s.size()) throw Usage("\"" + s + "\" is not an integer");
  return v;
}
std::string hex64(std::uint64_t v) { return fmt::format("{:016x}", v); }

std::string escape_name(const std::string& name) {
  std::string k;
  for (unsigned char c : name) {
    if (std::isalnum(c) || c == '_' || c == '-' || c == '.')
      k += static_cast<char>(c);
    else
      k += fmt::format("%{:02X}", c);
  }
  return k;
}
std::string csv_field(const std::string& f) {
  if (f.find_first_of(",\"\r\n") == std::string::npos) return f;
  std::string o = "\"";
  for (char c : f) o += c == '"' ? std::string("\"\"") : std::string(1, c);
  return o + "\"";
}
std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> f;
  std::size_t a = 0;
  for (;;) {
    const std::size_t b = line.find('\t', a);
    f.push_back(line.substr(a, b == std::string::npos ? std::string::npos : b - a));
    if (b == std::string::npos) return f;
    a = b + 1;
  }
}

// ---------------------------------------------------------------- the plan

struct RowCase {
  std::string key;
  DType dtype = DType::float32;
  std::string dist;
  double theta = 1;
  std::int64_t n = 0;
  std::size_t first = 0;  // index of its chunk 0 in Plan::chunks
};
struct ChunkCase {
  std::string key;
  std::size_t row = 0;
  std::int64_t index = 0, begin = 0, len = 0;
  std::uint64_t id = 0;      // the chunk's case id
  std::uint64_t row_id = 0;  // its row's
};

// Chunks are dealt round-robin from an offset of the row's case id: chunk c
// of a row goes to shard (row id + c) mod N, so no shard holds more than
// ceil(C/N) chunks of a row (what must fit one machine), and the rows of a
// sweep start on different shards. (By each chunk's own id mod N, as a
// sweep's rows are dealt, the first try put all 4 chunks of a row on shard 0
// of 3.)
std::uint64_t shard_of(const ChunkCase& c, std::uint64_t count) {
  return (c.row_id % count + static_cast<std::uint64_t>(c.index) % count) % count;
}
struct Plan {
  std::string kernel_name, kernel_identity;
  std::uint64_t seed = 1;
  int level = 1;
  std::int64_t chunks = 0;
  std::vector<RowCase> rows;
  std::vector<ChunkCase> cases;  // row by row, chunk by chunk
  std::string fields() const {
    return fmt::format("kernel={}; kernel_id={}; seed={}; level={}; chunks={}; draw=1",
                       escape_name(kernel_name), escape_name(kernel_identity), seed, level, chunks);
  }
  std::string digest() const {
    CaseEncoder e;
    e.str("softmax-audit split-row plan v1").str(fields());
    for (const auto& c : cases) e.str(c.key);
    return hex64(e.hash());
  }
};

// The logits of chunk c of a row are drawn from this seed alone, so that no
// shard needs another's items. The row is the concatenation of its chunks,
// so the same (seed, n, distribution) cut into another number of chunks is
// another row.
std::uint64_t chunk_seed(std::uint64_t seed, std::int64_t n, const std::string& dist,
                         std::int64_t chunks, std::int64_t c) {
  return CaseEncoder()
      .str("softmax-audit split row chunk v1")
      .integer(seed)
      .sinteger(n)
      .str(dist)
      .sinteger(chunks)
      .sinteger(c)
      .hash();
}

Plan make_plan(const Kernel& k, const std::string& identity, const SplitRowsOptions& o,
               const std::vector<DType>& dtypes) {
  Plan p;
  p.kernel_name = k.name();
  p.kernel_identity = identity;
  p.seed = o.seed;
  p.chunks = o.chunks;
  std::vector<std::string> dists = o.distributions;
  if (dists.empty()) dists = {"gaussian", "uniform", "spike", "fa3_outliers"};
  std::vector<double> temps = o.temperatures.empty() ? std::vector<double>{1.0} : o.temperatures;
  for (DType t : dtypes)
    for (const auto& d : dists)
      for (double th : temps)
        for (int lg = o.min_log2; lg <= o.max_log2; ++lg) {
          RowCase r;
          r.dtype = t;
          r.dist = d;
          r.theta = th;
          r.n = std::int64_t(1) << lg;
          r.key = fmt::format("{}|{}|{}|L{}|t{}|k{}|C{}|s{}", k.name(), name_of(t), d, p.level,
                              num(th), lg, p.chunks, p.seed);
          r.first = p.cases.size();
          CaseKey rk;
          rk.kernel = identity;
          rk.op = "sweep-row-chunks";
          rk.dtype = name_of(t);
          rk.shape = {r.n, p.chunks};
          rk.distribution = d;
          rk.theta = th;
          rk.level = p.level;
          rk.seed = p.seed;
          const std::uint64_t row_id = case_id(rk);
          for (std::int64_t c = 0; c < p.chunks; ++c) {
            ChunkCase cc;
            cc.row = p.rows.size();
            cc.index = c;
            cc.begin = static_cast<std::int64_t>((static_cast<unsigned __int128>(r.n) * c) /
                                                 static_cast<std::uint64_t>(p.chunks));
            const auto end =
                static_cast<std::int64_t>((static_cast<unsigned __int128>(r.n) * (c + 1)) /
                                          static_cast<std::uint64_t>(p.chunks));
            cc.len = end - cc.begin;
            cc.key = r.key + "|c" + std::to_string(c);
            CaseKey ck;
            ck.kernel = identity;
            ck.op = "sweep-chunk";
            ck.dtype = name_of(t);
            ck.shape = {r.n, p.chunks};
            ck.distribution = d;
            ck.theta = th;
            ck.level = p.level;
            ck.seed = p.seed;
            ck.index = static_cast<std::uint64_t>(c);
            cc.id = case_id(ck);
            cc.row_id = row_id;
            p.cases.push_back(std::move(cc));
          }
          p.rows.push_back(std::move(r));
        }
  return p;
}

RowBatch draw_chunk(const Plan& p, const ChunkCase& c) {
  const RowCase& r = p.rows[c.row];
  RowParams rp;
  rp.dist = r.dist;
  rp.n = c.len;
  rp.level = p.level;
  rp.temperature = r.theta;
  rp.seed = chunk_seed(p.seed, r.n, r.dist, p.chunks, c.index);
  return materialise(rp, r.dtype);
}

// ---------------------------------------------------------------- journals

// An append-only journal: an identity line, then one line per chunk, each
// written with one write() and fsync'd; a torn last line (a kill mid-write)
// is dropped when it is opened again.
class Journal {
 public:
  Journal(const std::string& path, const std::string& identity) : path_(path) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
      throw Usage(path + ": not a regular file; expected a journal of sweep --row-chunks");
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd_ < 0) throw Usage("cannot open " + path + ": " + std::strerror(errno));
    std::string content;
    char buf[1 << 16];
    ssize_t r;
    while ((r = ::read(fd_, buf, sizeof buf)) > 0) content.append(buf, static_cast<std::size_t>(r));
    const std::size_t keep =
        content.find_last_of('\n') == std::string::npos ? 0 : content.find_last_of('\n') + 1;
    if (keep < content.size()) {
      if (::ftruncate(fd_, static_cast<off_t>(keep)) != 0) throw Usage("cannot truncate " + path);
      content.resize(keep);
    }
    if (content.empty()) {
      append(identity + "\n");
      content = identity + "\n";
    } else if (content.compare(0, identity.size() + 1, identity + "\n") != 0) {
      ::close(fd_);
      throw Usage(path + ": its first line is \"" + content.substr(0, content.find('\n')) +
                  "\", this run's is \"" + identity +
                  "\"; expected the journal of this command (use another --out)");
    }
    std::istringstream is(content.substr(identity.size() + 1));
    std::string line;
    while (std::getline(is, line))
      if (!line.empty()) lines_[split_tabs(line)[0]] = line;
    ::lseek(fd_, 0, SEEK_END);
  }
  ~Journal() {
    if (fd_ >= 0) ::close(fd_);
  }
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;
  const std::map<std::string, std::string>& lines() const { return lines_; }
  void add(const std::string& key, const std::string& line) {
    append(line + "\n");
    lines_[key] = line;
  }

 private:
  void append(const std::string& s) {
    const preempt::JournalWrite entry;
    std::size_t done = 0;
    while (done < s.size()) {
      const ssize_t w = ::write(fd_, s.data() + done, s.size() - done);
      if (w < 0) throw std::runtime_error("cannot write " + path_ + ": " + std::strerror(errno));
      done += static_cast<std::size_t>(w);
    }
    if (::fsync(fd_) != 0) throw std::runtime_error("cannot fsync " + path_);
  }
  std::string path_;
  int fd_ = -1;
  std::map<std::string, std::string> lines_;
};

// Reads a journal written by another process (a shard's), without changing it.
std::pair<std::string, std::vector<std::string>> read_journal(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::size_t keep =
      content.find_last_of('\n') == std::string::npos ? 0 : content.find_last_of('\n') + 1;
  content.resize(keep);  // a torn last line is not an entry
  std::istringstream is(content);
  std::string identity, line;
  std::getline(is, identity);
  std::vector<std::string> lines;
  while (std::getline(is, line))
    if (!line.empty()) lines.push_back(line);
  return {identity, lines};
}

std::string chunk_journal_identity(const Plan& p) {
  return "# softmax-audit split-row chunks: " + p.fields() + "; phase=1";
}
std::string element_journal_identity(const Plan& p, const std::string& state_digest) {
  return "# softmax-audit split-row elements: " + p.fields() + "; phase=2; state=" + state_digest;
}

// ---------------------------------------------------------------- phase 1

// A chunk's line: key, items, live items, largest and smallest finite z,
// largest |z| (what its budgets need), the reference's state as text, and
// the kernel's lse and entropy of the chunk.
std::string phase1_line(const Kernel& k, const Plan& p, const ChunkCase& c) {
  const RowCase& r = p.rows[c.row];
  const RowBatch b = draw_chunk(p, c);
  const auto x = b.row(0);
  std::int64_t live = 0;
  double zmax = -INFINITY, zmin = INFINITY, zabs = 0;
  for (float v : x) {
    const double z = double(v) / r.theta;
    if (z == -INFINITY) continue;
    ++live;
    zmax = std::max(zmax, z), zmin = std::min(zmin, z), zabs = std::max(zabs, std::abs(z));
  }
  std::string state;
  {
    // In blocks of kStateBlock items on every core, the blocks' states merged
    // left to right with the same T6 merge: the same bits with any number of
    // threads (the precision is set before the threads start, reference/mpfr.hpp).
    const ref::PrecisionScope prec(kStateBits);
    const std::int64_t blocks = (c.len + kStateBlock - 1) / kStateBlock;
    std::vector<props::ChunkState> parts(static_cast<std::size_t>(blocks));
#pragma omp parallel for schedule(dynamic)
    for (std::int64_t i = 0; i < blocks; ++i)
      parts[static_cast<std::size_t>(i)] = props::reference_chunk_state(
          x.data() + i * kStateBlock, std::min(kStateBlock, c.len - i * kStateBlock), r.theta);
    props::ChunkState whole;
    for (const auto& part : parts) whole = props::merge_chunk_states(whole, part);
    state = props::chunk_state_text(whole);
  }
  const float lse = k.logsumexp(r.dtype, b, r.theta)[0];
  const float H = k.entropy(r.dtype, b, r.theta)[0];
  return fmt::format("{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}", c.key, c.len, live, num(zmax), num(zmin),
                     num(zabs), state, num(lse), num(H));
}

struct Phase1Chunk {
  std::int64_t len = 0, live = 0;
  double zmax = -INFINITY, zmin = INFINITY, zabs = 0;
  std::string state;
  double lse = NAN, H = NAN;
};
Phase1Chunk parse_phase1(const std::string& where, const std::string& line) {
  const auto f = split_tabs(line);
  if (f.size() != 9)
    throw Usage(where + ": a line with " + std::to_string(f.size()) +
                " fields; expected 9 (a chunk of phase 1)");
  try {
    Phase1Chunk c;
    c.len = to_int(f[1]), c.live = to_int(f[2]);
    c.zmax = to_num(f[3]), c.zmin = to_num(f[4]), c.zabs = to_num(f[5]);
    c.state = f[6];
    c.lse = to_num(f[7]), c.H = to_num(f[8]);
    return c;
  } catch (const Usage& e) {
    throw Usage(where + ": chunk " + f[0] + ": " + e.what());
  }
}

budget::RowStats stats_of(std::int64_t live, double zmax, double zmin, double zabs, double theta) {
  budget::RowStats s;
  s.live = live;
  s.max = zmax;
  s.spread = live > 0 && std::isfinite(zmin) ? zmax - zmin : 0.0;
  s.max_abs = zabs;
  s.theta_one = theta == 1.0;
  return s;
}

// The row's budgets for the kernel's chunked lse and entropy (first order in
// u = 2^-24, terms of order u^2 dropped, as T7 and budgets.hpp do):
//  - each chunk's lse and entropy sit within the suite's budgets for one row
//    (budgets.hpp lse_abs: lambda = A(n_c) + 4 + delta + theta_term units of
//    u; entropy_abs: its weights carry rho = A(n_c) + 4 + 2 delta +
//    theta_term), with n_c the largest chunk and delta, theta_term the whole
//    row's (each chunk's are no larger);
//  - a chunk enters the merge as the state (lse_c, 1, -H_c), the same chunk
//    (m = lse_c makes S = 1 and T = sum p log p = -H_c), so its lse error is
//    a relative error of at most lambda u of every weight of the chunk in the
//    row;
//  - each of the C - 1 merges adds at most (4 + d) u relative to S and
//    (5 + d) u to T (the budget differential.ulp holds merge_entropy_states
//    to, properties/attention.cpp: 4u for the arithmetic and d u from the
//    rounding of m_a - m_b = -d in the exponent, T's terms all of one sign),
//    d <= D, the largest difference between two chunks' lse; mu = (C - 1)(5 + D);
//  - lse = m + log S: |dL| <= (lambda + mu) u; H = log S - T/S with 0 <= -T/S
//    <= H: |dH| <= (rS + rT)(1 + H), and weights off by r relative move H by
//    at most 2 r (1 + H) (budgets.hpp entropy_abs): 2 (rho + lambda + mu) u (1 + H).
// output_abs adds the float32 rounding of an output.
struct RowBudgets {
  double lse = 0, H = 0;
};
RowBudgets row_budgets(const budget::RowStats& row, std::int64_t largest_chunk, std::int64_t chunks,
                       double D, double lse, double H) {
  const double A = budget::summation(double(largest_chunk));
  const double lambda = A + 4.0 + row.spread + budget::theta_term(row);
  const double rho = A + 4.0 + 2.0 * row.spread + budget::theta_term(row);
  const double mu = double(chunks - 1) * (5.0 + D);
  RowBudgets b;
  b.lse = budget::output_abs(DType::float32, lse, budget::u32 * (lambda + mu));
  b.H = budget::output_abs(DType::float32, H,
                           2.0 * budget::u32 * (rho + lambda + mu) * (1.0 + std::abs(H)));
  return b;
}

bool within(double err, double budget) { return err <= budget; }  // NaN is not

// The state file: every row's merged reference state, the kernel's chunk and
// merged results, their errors and budgets. Numbers as "%.17g" text (NaN and
// infinities included). `report` collects what to print.
struct StateReport {
  std::vector<std::string> lines;  // per row and failing chunk
  int rows_over = 0, chunks_over = 0;
};
std::string merge_states(const Plan& p, const std::map<std::string, Phase1Chunk>& chunks,
                         const Kernel& k, StateReport& rep) {
  nlohmann::json rows = nlohmann::json::array();
  const ref::PrecisionScope prec(kStateBits);
  for (const RowCase& r : p.rows) {
    std::vector<const Phase1Chunk*> cs;
    for (std::int64_t c = 0; c < p.chunks; ++c)
      cs.push_back(&chunks.at(p.cases[r.first + static_cast<std::size_t>(c)].key));
    // The reference: T6 in MPFR, chunk 0 to C - 1.
    props::ChunkState g;
    std::vector<double> Lc;
    std::int64_t live = 0, largest = 0;
    double zmax = -INFINITY, zmin = INFINITY, zabs = 0;
    double Dlo = INFINITY, Dhi = -INFINITY;
    for (const Phase1Chunk* c : cs) {
      const props::ChunkState s = props::chunk_state_from_text(c->state);
      g = props::merge_chunk_states(g, s);
      const double l = s.S == 0 ? -INFINITY : props::state_lse(s).convert_to<double>();
      Lc.push_back(l);
      if (std::isfinite(l)) Dlo = std::min(Dlo, l), Dhi = std::max(Dhi, l);
      live += c->live, largest = std::max(largest, c->len);
      zmax = std::max(zmax, c->zmax), zmin = std::min(zmin, c->zmin);
      zabs = std::max(zabs, c->zabs);
    }
    const double L = props::state_lse(g).convert_to<double>();
    const double H = props::state_entropy(g).convert_to<double>();
    // The kernel: its chunk results as states (lse_c, 1, -H_c), merged left to
    // right by its own merge_entropy_states.
    sa_entropy_state acc{};
    for (std::size_t c = 0; c < cs.size(); ++c) {
      const sa_entropy_state s{static_cast<float>(cs[c]->lse), 1.0f, static_cast<float>(-cs[c]->H)};
      acc = c == 0 ? s
                   : k.merge_entropy_states(std::span<const sa_entropy_state>(&acc, 1),
                                            std::span<const sa_entropy_state>(&s, 1))[0];
    }
    const double Lk = double(acc.m) + std::log(double(acc.S));
    const double Hk = std::log(double(acc.S)) - double(acc.T) / double(acc.S);
    const budget::RowStats rs = stats_of(live, zmax, zmin, zabs, r.theta);
    const double D = Dhi >= Dlo ? Dhi - Dlo : 0.0;
    const RowBudgets b = row_budgets(rs, largest, p.chunks, D, L, H);
    nlohmann::json row;
    row["key"] = r.key;
    row["n"] = r.n;
    row["state"] = props::chunk_state_text(g);
    row["lse_exact"] = num(L), row["H_exact"] = num(H);
    row["lse_kernel"] = num(Lk), row["H_kernel"] = num(Hk);
    row["kernel_state"] = {num(acc.m), num(acc.S), num(acc.T)};
    row["lse_err"] = num(std::abs(Lk - L)), row["lse_budget"] = num(b.lse);
    row["H_err"] = num(std::abs(Hk - H)), row["H_budget"] = num(b.H);
    int over_chunks = 0;
    nlohmann::json cj = nlohmann::json::array();
    for (std::size_t c = 0; c < cs.size(); ++c) {
      const props::ChunkState s = props::chunk_state_from_text(cs[c]->state);
      const double Hc = s.S == 0 ? 0.0 : props::state_entropy(s).convert_to<double>();
      const budget::RowStats st =
          stats_of(cs[c]->live, cs[c]->zmax, cs[c]->zmin, cs[c]->zabs, r.theta);
      const double lb = budget::lse_abs(st, Lc[c]), hb = budget::entropy_abs(st, Hc);
      const double le = std::abs(cs[c]->lse - Lc[c]), he = std::abs(cs[c]->H - Hc);
      const bool ok = (s.S == 0 && cs[c]->lse == -INFINITY) || (within(le, lb) && within(he, hb));
      if (!ok) {
        ++over_chunks;
        rep.lines.push_back(fmt::format(
            "chunk {}: the kernel's chunk lse {} (exact {}, error {:.3g}, budget {:.3g}), entropy "
            "{} (exact {}, error {:.3g}, budget {:.3g}): OVER",
            p.cases[r.first + c].key, num(cs[c]->lse), num(Lc[c]), le, lb, num(cs[c]->H), num(Hc),
            he, hb));
      }
      cj.push_back({{"lse_exact", num(Lc[c])},
                    {"lse_kernel", num(cs[c]->lse)},
                    {"lse_budget", num(lb)},
                    {"H_exact", num(Hc)},
                    {"H_kernel", num(cs[c]->H)},
                    {"H_budget", num(hb)},
                    {"live", cs[c]->live},
                    {"zmax", num(cs[c]->zmax)},
                    {"zmin", num(cs[c]->zmin)},
                    {"zabs", num(cs[c]->zabs)}});
    }
    row["chunks"] = std::move(cj);
    row["chunks_over"] = over_chunks;
    const bool row_ok = within(std::abs(Lk - L), b.lse) && within(std::abs(Hk - H), b.H);
    rep.chunks_over += over_chunks;
    if (!row_ok || over_chunks > 0) ++rep.rows_over;
    rep.lines.push_back(fmt::format(
        "row {}: merged lse {} (exact {}, error {:.3g}, budget {:.3g}), entropy {} (exact {}, "
        "error {:.3g}, budget {:.3g}){}{}",
        r.key, num(Lk), num(L), std::abs(Lk - L), b.lse, num(Hk), num(H), std::abs(Hk - H), b.H,
        row_ok ? "" : ": OVER",
        over_chunks ? fmt::format("; {} chunk{} over", over_chunks, over_chunks == 1 ? "" : "s")
                    : ""));
    rows.push_back(std::move(row));
  }
  nlohmann::json j;
  j["format"] = "softmax-audit-row-states";
  j["version"] = 1;
  j["identity"] = p.fields();
  j["plan"] = p.digest();
  j["kernel"] = p.kernel_name;
  j["chunks"] = p.chunks;
  j["rows"] = std::move(rows);
  return j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

// ---------------------------------------------------------------- phase 2

struct RowState {
  double m = 0, S = 0, L = 0, Lk = 0, lse_budget = 0;
  std::vector<double> Lc, Lck, lse_budget_c;
};
std::map<std::string, RowState> parse_state(const Plan& p, const std::string& text,
                                            const std::string& where) {
  std::map<std::string, RowState> out;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception&) {
    throw Usage(where + ": not JSON; expected the " + std::string(kStateFile) +
                " that `merge` wrote from phase 1");
  }
  if (j.value("format", "") != "softmax-audit-row-states" || j.value("version", 0) != 1)
    throw Usage(where + ": not a row-states file of version 1; expected the " +
                std::string(kStateFile) + " that `merge` wrote from phase 1");
  if (j.value("identity", "") != p.fields() || j.value("plan", "") != p.digest())
    throw Usage(where + ": the states of another split sweep (\"" + j.value("identity", "") +
                "\", plan " + j.value("plan", "") + "; this run: \"" + p.fields() + "\", plan " +
                p.digest() + "); expected phase 1's merge of this command's rows");
  const ref::PrecisionScope prec(kStateBits);
  try {
    for (const auto& r : j.at("rows")) {
      RowState s;
      const props::ChunkState g = props::chunk_state_from_text(r.at("state").get<std::string>());
      s.m = g.m.convert_to<double>();
      s.S = g.S.convert_to<double>();
      s.L = to_num(r.at("lse_exact").get<std::string>());
      s.Lk = to_num(r.at("lse_kernel").get<std::string>());
      s.lse_budget = to_num(r.at("lse_budget").get<std::string>());
      for (const auto& c : r.at("chunks")) {
        s.Lc.push_back(to_num(c.at("lse_exact").get<std::string>()));
        s.Lck.push_back(to_num(c.at("lse_kernel").get<std::string>()));
        s.lse_budget_c.push_back(to_num(c.at("lse_budget").get<std::string>()));
      }
      if (static_cast<std::int64_t>(s.Lc.size()) != p.chunks) throw Usage("a row's chunk count");
      out[r.at("key").get<std::string>()] = std::move(s);
    }
  } catch (const std::exception& e) {
    throw Usage(where + ": a row that cannot be read (" + e.what() + "); expected the " +
                std::string(kStateFile) + " that `merge` wrote");
  }
  for (const RowCase& r : p.rows)
    if (!out.count(r.key)) throw Usage(where + ": no state for row " + r.key);
  return out;
}

// Every element of a chunk against the row's global state: the exact weight
// p_j = e^(z_j - m) / S (element_weight's value, evaluated in double from the
// MPFR state: relative error <= 2^-50 (4 + |z_j| + |m|), from rounding z_j, m
// and S to double, exp and the division), and the kernel's weight
// p^_j = q^_j e^(lse^_c - lse^), its softmax of the chunk rescaled by its own
// chunk and row lse (the scale factor a distributed softmax applies; one
// multiplication in double). Budget, to first order:
//   e^(L_c - L) softmax_abs(q_j) [the chunk's softmax, budgets.hpp]
//   + p_j (B_lse,c + B_lse + 2^-50 (4 + |z_j| + |m|))  [the two lse in the factor, the reference]
// A line: key, items, elements over, worst element (index in the row, kernel
// weight, exact weight, ulps, budget in ulps, ratio), and the chunk's sum of
// kernel weights.
std::string phase2_line(const Kernel& k, const Plan& p, const ChunkCase& c, const RowState& s) {
  const RowCase& r = p.rows[c.row];
  const RowBatch b = draw_chunk(p, c);
  const auto x = b.row(0);
  const std::vector<float> q = k.softmax(r.dtype, b, r.theta);
  const budget::RowStats st = budget::stats(x, r.theta);
  const auto ci = static_cast<std::size_t>(c.index);
  const double Lc = s.Lc[ci], fk = std::exp(s.Lck[ci] - s.Lk);
  const double f = std::exp(Lc - s.L);
  const double ref_rel = std::ldexp(1.0, -50);
  std::int64_t over = 0, worst = -1;
  double worst_ratio = -1, wg = 0, we = 0, wu = 0, wb = 0;
  double sum = 0, comp = 0;  // Neumaier
  for (std::int64_t j = 0; j < c.len; ++j) {
    const auto jj = static_cast<std::size_t>(j);
    const double z = double(x[jj]) / r.theta;
    const double e = z == -INFINITY ? 0.0 : std::exp(z - s.m) / s.S;
    const double qe = z == -INFINITY ? 0.0 : std::exp(z - Lc);
    const double g = double(q[jj]) * fk;
    const double bud = e == 0.0 ? 0.0
                                : f * budget::softmax_abs(r.dtype, st, z, qe) +
                                      e * (s.lse_budget_c[ci] + s.lse_budget +
                                           ref_rel * (4.0 + std::abs(z) + std::abs(s.m)));
    const double err = std::abs(g - e);
    const double ratio = std::isnan(g) ? INFINITY
                         : bud > 0     ? err / bud
                                       : (err == 0 ? 0.0 : INFINITY);
    if (ratio > 1) ++over;
    if (ratio > worst_ratio) {
      const double u = budget::ulp(r.dtype, e);
      worst_ratio = ratio, worst = c.begin + j, wg = g, we = e, wu = err / u, wb = bud / u;
    }
    const double t = sum + g;
    comp += std::abs(sum) >= std::abs(g) ? (sum - t) + g : (g - t) + sum;
    sum = t;
  }
  return fmt::format("{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}", c.key, c.len, over, worst, num(wg),
                     num(we), num(wu), num(wb), num(worst_ratio), num(sum + comp));
}

struct Phase2Chunk {
  std::int64_t len = 0, over = 0, worst = 0;
  double got = 0, exact = 0, ulps = 0, budget_ulps = 0, ratio = 0, sum = 0;
};
Phase2Chunk parse_phase2(const std::string& where, const std::string& line) {
  const auto f = split_tabs(line);
  if (f.size() != 10)
    throw Usage(where + ": a line with " + std::to_string(f.size()) +
                " fields; expected 10 (a chunk of phase 2)");
  try {
    Phase2Chunk c;
    c.len = to_int(f[1]), c.over = to_int(f[2]), c.worst = to_int(f[3]);
    c.got = to_num(f[4]), c.exact = to_num(f[5]), c.ulps = to_num(f[6]);
    c.budget_ulps = to_num(f[7]), c.ratio = to_num(f[8]), c.sum = to_num(f[9]);
    return c;
  } catch (const Usage& e) {
    throw Usage(where + ": chunk " + f[0] + ": " + e.what());
  }
}

const char* const kTableHeader =
    "key,kernel,dtype,distribution,temperature,n,chunks,seed,lse_exact,lse_kernel,lse_err,"
    "lse_budget,H_exact,H_kernel,H_err,H_budget,chunks_over,elements_checked,elements_over,"
    "worst_index,max_ulp_all,ulp_budget_all,sum_minus_one";

// The final table: one line per row whose phase-2 chunks are all there.
struct TableReport {
  int rows = 0, rows_over = 0;
  std::int64_t elements = 0;
};
std::string final_table(const Plan& p, const std::string& state_text,
                        const std::map<std::string, Phase2Chunk>& chunks, TableReport& rep) {
  const nlohmann::json st = nlohmann::json::parse(state_text);
  std::map<std::string, const nlohmann::json*> by_key;
  for (const auto& r : st.at("rows")) by_key[r.at("key").get<std::string>()] = &r;
  std::string out = "# softmax-audit split rows: " + p.fields() + "\n" + kTableHeader + "\n";
  for (const RowCase& r : p.rows) {
    std::int64_t over = 0, checked = 0, worst = -1;
    double ratio = -1, ulps = 0, bud = 0, sum = 0;
    bool whole = true;
    for (std::int64_t c = 0; c < p.chunks; ++c) {
      const auto it = chunks.find(p.cases[r.first + static_cast<std::size_t>(c)].key);
      if (it == chunks.end()) {
        whole = false;
        break;
      }
      const Phase2Chunk& e = it->second;
      over += e.over, checked += e.len, sum += e.sum;
      if (e.ratio > ratio) ratio = e.ratio, worst = e.worst, ulps = e.ulps, bud = e.budget_ulps;
    }
    if (!whole) continue;
    const nlohmann::json& s = *by_key.at(r.key);
    auto g = [&](const char* f) { return s.at(f).get<std::string>(); };
    const int chunks_over = s.at("chunks_over").get<int>();
    const bool ok = within(to_num(g("lse_err")), to_num(g("lse_budget"))) &&
                    within(to_num(g("H_err")), to_num(g("H_budget"))) && chunks_over == 0 &&
                    over == 0;
    ++rep.rows;
    rep.rows_over += ok ? 0 : 1;
    rep.elements += checked;
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
                       csv_field(r.key), csv_field(p.kernel_name), name_of(r.dtype), r.dist,
                       num(r.theta), r.n, p.chunks, p.seed, g("lse_exact"), g("lse_kernel"),
                       g("lse_err"), g("lse_budget"), g("H_exact"), g("H_kernel"), g("H_err"),
                       g("H_budget"), chunks_over, checked, over, worst, num(ulps), num(bud),
                       num(sum - 1.0));
  }
  return out;
}

// ---------------------------------------------------------------- the kernel

Kernel load_kernel(const std::string& builtin, const std::string& plugin, int index) {
  if (!plugin.empty()) {
    const auto probed = gate::KernelSource::probe_plugin(plugin, index, 60);
    if (const std::string why = probed.why_cannot_run(); !why.empty())
      throw Usage(why + "; nothing was done");
    return load_plugin(probed.path(), index);
  }
  std::string names;
  for (auto& k : builtin_kernels()) {
    if (k.name() == builtin) return k;
    names += (names.empty() ? "" : ", ") + k.name();
  }
  throw Usage("--builtin " + builtin +
              ": no built-in kernel of that name; expected one of: " + names);
}

void require_ops(const Kernel& k) {
  for (Op op : {Op::softmax, Op::logsumexp, Op::entropy, Op::merge_entropy_states})
    if (!k.supports(op))
      throw Usage("kernel '" + k.name() + "' does not implement " + name_of(op) +
                  "; --row-chunks needs softmax, logsumexp, entropy and merge_entropy_states (the "
                  "chunks' lse and entropy, their merge, and the weights)");
}

// The plan file of a shard (shard.json).
std::string plan_text(const Plan& p, int phase, const Shard& sh, const SplitRowsOptions& o,
                      const std::string& plugin_abs, const std::string& state_text) {
  nlohmann::json j;
  j["format"] = "softmax-audit-shard";
  j["version"] = 1;
  j["command"] = kSplitRowsCommand;
  j["phase"] = phase;
  j["shard"] = {{"index", sh.index}, {"count", sh.count}};
  j["kernel"] = p.kernel_name;
  j["kernel_identity"] = p.kernel_identity;
  j["builtin"] = plugin_abs.empty() ? o.builtin : "";
  j["plugin"] = plugin_abs;
  j["kernel_index"] = o.kernel_index;
  j["identity"] = p.fields();
  j["plan"] = p.digest();
  // What the merge needs to rebuild the plan: the sweep's options.
  j["options"] = {{"min_log2", o.min_log2},
                  {"max_log2", o.max_log2},
                  {"chunks", o.chunks},
                  {"distributions", o.distributions},
                  {"dtypes", o.dtypes},
                  {"temperatures", o.temperatures},
                  {"seed", std::to_string(o.seed)}};
  nlohmann::json cases = nlohmann::json::array();
  for (const auto& c : p.cases)
    cases.push_back(
        {{"key", c.key}, {"id", std::to_string(c.id)}, {"shard", shard_of(c, sh.count)}});
  j["cases"] = std::move(cases);
  if (phase == 2) {
    j["state_digest"] = hex64(splitmix64_hash(state_text));
    j["state_text"] = state_text;
  }
  return j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::vector<DType> parse_dtypes(const Kernel& k, const std::vector<std::string>& names) {
  std::vector<DType> out;
  for (const auto& d : names) {
    auto t = parse_dtype(d);
    if (!t || *t == DType::float64)
      throw Usage("--dtype '" + d + "': expected float32, bfloat16 or float16");
    if (!k.supports(*t))
      throw Usage("--dtype " + d + ": kernel '" + k.name() + "' does not support it");
    out.push_back(*t);
  }
  if (out.empty())
    for (DType t : {DType::float32, DType::bfloat16, DType::float16})
      if (k.supports(t)) out.push_back(t);
  return out;
}

void validate(const SplitRowsOptions& o) {
  if (o.min_log2 < 0 || o.max_log2 > 32 || o.min_log2 > o.max_log2)
    throw Usage(fmt::format(
        "sizes 2^{}..2^{}: expected 0 <= --min-log2-n <= --max-log2-n <= 32 with --row-chunks",
        o.min_log2, o.max_log2));
  if (o.chunks < 1 || o.chunks > (std::int64_t(1) << o.min_log2))
    throw Usage(
        fmt::format("--row-chunks {}: expected 1 to 2^{} (the smallest row, 2^{} items; "
                    "every chunk holds at least one item)",
                    o.chunks, o.min_log2, o.min_log2));
  const std::int64_t largest = ((std::int64_t(1) << o.max_log2) + o.chunks - 1) / o.chunks;
  if (largest > kMaxChunkItems)
    throw Usage(
        fmt::format("--row-chunks {}: a row of 2^{} items then has chunks of {} items; "
                    "expected at most 2^30 per chunk (--row-chunks >= {})",
                    o.chunks, o.max_log2, largest,
                    ((std::int64_t(1) << o.max_log2) + kMaxChunkItems - 1) / kMaxChunkItems));
  for (double th : o.temperatures)
    if (!(th > 0) || !std::isfinite(th))
      throw Usage(fmt::format("--temperature {}: expected a finite number > 0", th));
  for (const auto& d : o.distributions)
    if (std::find(distribution_names().begin(), distribution_names().end(), d) ==
        distribution_names().end())
      throw Usage("--distribution " + d + ": not a distribution of the sweep");
    else if (d == "special")
      throw Usage(
          "--distribution special: expected a distribution of finite (or -inf) logits "
          "with --row-chunks (the chunk states hold no +inf or NaN; `check`'s "
          "special.values checks those)");
  const double need = kBytesFixed + kBytesPerChunkItem * double(largest);
  double avail = o.max_memory_gib > 0 ? o.max_memory_gib * (1 << 30) : 0;
  if (avail == 0) {
    std::ifstream in("/proc/meminfo");
    std::string key, unit;
    double kb = 0;
    while (in >> key >> kb >> unit)
      if (key == "MemAvailable:") avail = kb * 1024;
  }
  if (avail > 0 && need > avail)
    throw Usage(
        fmt::format("--row-chunks {}: a chunk of {} items needs about {:.1f} GiB ({} bytes "
                    "per item) and {:.1f} GiB are available; expected more chunks",
                    o.chunks, largest, need / (1 << 30), kBytesPerChunkItem, avail / (1 << 30)));
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Usage("cannot read " + path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void print_state_report(const StateReport& rep) {
  for (const auto& l : rep.lines) fmt::print("{}\n", l);
}

int table_verdict(const TableReport& rep, const std::string& path) {
  fmt::print(
      "{} split row{} in {} ({} over a bound); every element checked ({} elements) against the "
      "row's merged state\n",
      rep.rows, rep.rows == 1 ? "" : "s", path, rep.rows_over, rep.elements);
  return rep.rows_over > 0 ? exit_fail : exit_pass;
}

// Runs this shard's chunks of one phase into its journal.
template <class LineOf>
void run_chunks(const Plan& p, const Shard& sh, Journal& journal, LineOf line_of,
                const char* what) {
  std::size_t todo = 0, done = 0;
  for (const auto& c : p.cases)
    if (shard_of(c, sh.count) == sh.index && !journal.lines().count(c.key)) ++todo;
  for (const auto& c : p.cases) {
    if (shard_of(c, sh.count) != sh.index || journal.lines().count(c.key)) continue;
    journal.add(c.key, line_of(c));
    ++done;
    fmt::print(stderr, "  {} chunk {} of {}: {}\n", what, done, todo, c.key);
  }
}

}  // namespace

int run_split_rows(const SplitRowsOptions& o) {
  std::optional<Kernel> kernel;
  std::optional<Shard> shard;
  std::vector<DType> dtypes;
  Plan plan;
  std::string state_text, identity, plugin_abs;
  const bool phase2 = !o.state.empty();
  const fs::path out(o.out);
  try {
    validate(o);
    shard = resolve_shard(o.shard, o.shard_count);
    std::vector<NamedPath> inputs = {{"--plugin", o.plugin}, {"--state", o.state}};
    refuse_overlapping_paths(inputs, {{"--out", (out / kChunkJournal).string()},
                                      {"--out", (out / kElementJournal).string()},
                                      {"--out", (out / kPlanFile).string()},
                                      {"--out", (out / kStateFile).string()},
                                      {"--out", (out / kTableFile).string()}});
    kernel.emplace(load_kernel(o.builtin, o.plugin, o.kernel_index));
    require_ops(*kernel);
    dtypes = parse_dtypes(*kernel, o.dtypes);
    if (!o.plugin.empty()) plugin_abs = fs::absolute(o.plugin).lexically_normal().string();
    identity = o.plugin.empty() ? "builtin:" + kernel->name() : gate::sha256_file(o.plugin);
    plan = make_plan(*kernel, identity, o, dtypes);
    if (phase2) {
      state_text = read_text(o.state);
      parse_state(plan, state_text, "--state " + o.state);
    }
  } catch (const std::invalid_argument& e) {
    fmt::print(stderr, "softmax-audit sweep: error: {}\n", e.what());
    return exit_usage;
  }
  std::error_code ec;
  fs::create_directories(out, ec);
  if (!fs::is_directory(out, ec)) {
    fmt::print(stderr, "softmax-audit sweep: error: --out {}: cannot create this directory\n",
               o.out);
    return exit_usage;
  }
  std::optional<OutputDirLock> lock;
  const Shard whole{0, 1, "unsharded"};
  const Shard& sh = shard ? *shard : whole;
  try {
    lock.emplace(o.out, "--out");
    if (shard || phase2) {
      // A shard's folder keeps its plan: the same command resumes, another is refused.
      const std::string text = plan_text(plan, phase2 ? 2 : 1, sh, o, plugin_abs, state_text);
      const std::string path = (out / kPlanFile).string();
      std::ifstream old(path, std::ios::binary);
      if (old.is_open()) {
        const std::string before((std::istreambuf_iterator<char>(old)),
                                 std::istreambuf_iterator<char>());
        if (before != text)
          throw Usage("--out " + o.out + ": its " + kPlanFile +
                      " is the plan of another sweep, phase or shard; expected the same command "
                      "as the run that wrote it, or another --out (nothing was done)");
      } else {
        write_file_atomically(path, text);
      }
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "softmax-audit sweep: error: {}\n", e.what());
    return exit_usage;
  }
  preempt::install();
  std::size_t mine = 0;
  for (const auto& c : plan.cases) mine += shard_of(c, sh.count) == sh.index ? 1 : 0;
  fmt::print(
      stderr,
      "softmax-audit sweep: kernel '{}', {} row{} of 2^{}..2^{} items in {} chunks each; "
      "{}{}: {} of {} chunks\n",
      kernel->name(), plan.rows.size(), plan.rows.size() == 1 ? "" : "s", o.min_log2, o.max_log2,
      o.chunks,
      shard || phase2 ? fmt::format("phase {}", phase2 ? 2 : 1) : std::string("phases 1 and 2"),
      shard ? fmt::format(", shard {} ({})", shard->text(), shard->source) : std::string(), mine,
      plan.cases.size());
  try {
    if (!phase2) {
      Journal j1((out / kChunkJournal).string(), chunk_journal_identity(plan));
      run_chunks(
          plan, sh, j1, [&](const ChunkCase& c) { return phase1_line(*kernel, plan, c); },
          "phase 1");
      if (shard) {
        fmt::print(
            "shard {}: phase 1 done, {} chunk{} in {}; next: softmax-audit merge STATES "
            "<every shard's --out>\n",
            sh.text(), mine, mine == 1 ? "" : "s", (out / kChunkJournal).string());
        return exit_pass;
      }
      // Unsharded: the merge, phase 2 and the final merge, in this process.
      std::map<std::string, Phase1Chunk> chunks;
      for (const auto& [key, line] : j1.lines()) chunks[key] = parse_phase1(kChunkJournal, line);
      StateReport rep;
      state_text = merge_states(plan, chunks, *kernel, rep);
      write_file_atomically((out / kStateFile).string(), state_text);
      print_state_report(rep);
    }
    const auto states = parse_state(plan, state_text, (out / kStateFile).string());
    Journal j2((out / kElementJournal).string(),
               element_journal_identity(plan, hex64(splitmix64_hash(state_text))));
    run_chunks(
        plan, sh, j2,
        [&](const ChunkCase& c) {
          return phase2_line(*kernel, plan, c, states.at(plan.rows[c.row].key));
        },
        "phase 2");
    if (shard || phase2) {
      fmt::print(
          "shard {}: phase 2 done, {} chunk{} in {}; next: softmax-audit merge OUT "
          "<every shard's phase-2 --out>\n",
          sh.text(), mine, mine == 1 ? "" : "s", (out / kElementJournal).string());
      return exit_pass;
    }
    std::map<std::string, Phase2Chunk> chunks;
    for (const auto& [key, line] : j2.lines()) chunks[key] = parse_phase2(kElementJournal, line);
    TableReport rep;
    const std::string table = final_table(plan, state_text, chunks, rep);
    write_file_atomically((out / kTableFile).string(), table);
    return table_verdict(rep, (out / kTableFile).string());
  } catch (const std::invalid_argument& e) {
    fmt::print(stderr, "\nsoftmax-audit sweep: error: {}\n", e.what());
    return exit_usage;
  } catch (const OutputError& e) {
    fmt::print(stderr, "\nsoftmax-audit sweep: error: {}\n", e.what());
    return exit_usage;
  }
}

int run_merge_split_rows(const std::string& out_dir, const std::vector<std::string>& inputs) {
  auto usage = [](const std::string& why) {
    fmt::print(stderr, "softmax-audit merge: error: {}\n", why);
    return exit_usage;
  };
  struct In {
    std::string dir;
    nlohmann::json plan;
    std::uint64_t index = 0, count = 1;
    int phase = 1;
  };
  std::vector<In> ins;
  std::vector<NamedPath> read;
  for (const auto& dir : inputs) {
    const std::string plan_path = (fs::path(dir) / kPlanFile).string();
    std::error_code ec;
    if (!fs::is_directory(dir, ec) || !fs::exists(plan_path, ec))
      return usage("INPUT " + dir +
                   ": not the --out folder of a `sweep --row-chunks --shard k/N` "
                   "(no " +
                   kPlanFile + "); expected the folders of one phase's shards");
    In in;
    in.dir = dir;
    try {
      in.plan = nlohmann::json::parse(read_text(plan_path));
      if (in.plan.value("format", "") != "softmax-audit-shard" ||
          in.plan.value("version", 0) != 1 || in.plan.value("command", "") != kSplitRowsCommand)
        throw std::invalid_argument("not the plan of a `sweep --row-chunks` shard, version 1");
      in.index = in.plan.at("shard").at("index").get<std::uint64_t>();
      in.count = in.plan.at("shard").at("count").get<std::uint64_t>();
      in.phase = in.plan.at("phase").get<int>();
      if (in.count < 1 || in.index >= in.count || (in.phase != 1 && in.phase != 2))
        throw std::invalid_argument("bad shard or phase");
    } catch (const std::exception& e) {
      return usage(plan_path + ": " + e.what() +
                   "; expected the shard.json a `sweep --row-chunks` shard wrote (every INPUT a "
                   "shard of one split sweep, all of one phase)");
    }
    read.push_back({"INPUT", plan_path});
    read.push_back(
        {"INPUT", (fs::path(dir) / (in.phase == 1 ? kChunkJournal : kElementJournal)).string()});
    ins.push_back(std::move(in));
  }
  const In& first = ins.front();
  for (const In& in : ins) {
    if (in.phase != first.phase)
      return usage(
          fmt::format("INPUT {} is a phase-{} shard and INPUT {} a phase-{} one; expected "
                      "the shards of one phase (merge phase 1's, then phase 2's)",
                      in.dir, in.phase, first.dir, first.phase));
    for (const char* field : {"identity", "plan", "kernel_identity", "options", "state_digest"})
      if (in.plan.value(field, nlohmann::json()) != first.plan.value(field, nlohmann::json()))
        return usage(fmt::format(
            "INPUT {} is a shard of another split sweep than INPUT {} (their {} differ); expected "
            "shards of one (the same command but for --shard and --out)",
            in.dir, first.dir, field));
    if (in.count != first.count)
      return usage(fmt::format(
          "INPUT {} is shard {}/{} and INPUT {} shard {}/{}; expected one number of shards", in.dir,
          in.index, in.count, first.dir, first.index, first.count));
  }
  const int phase = first.phase;
  const std::uint64_t count = first.count;
  const std::string out_state = (fs::path(out_dir) / kStateFile).string(),
                    out_table = (fs::path(out_dir) / kTableFile).string();
  std::vector<NamedPath> outs = {{"OUT", out_state}};
  if (phase == 2) outs.push_back({"OUT", out_table});
  std::string plugin = first.plan.value("plugin", "");
  if (phase == 1 && !plugin.empty()) read.push_back({"the shards' --plugin", plugin});
  try {
    refuse_overlapping_paths(read, outs);
    std::error_code ec;
    for (const auto& in : ins)
      if (fs::exists(out_dir, ec) && fs::equivalent(out_dir, in.dir, ec))
        throw Usage("OUT " + out_dir + " is the same folder as INPUT " + in.dir +
                    "; expected an OUT that is none of the inputs (nothing was merged)");
    if (fs::exists(fs::path(out_dir) / kPlanFile, ec))
      throw Usage("OUT " + out_dir + " is a shard's folder (it holds a " + kPlanFile +
                  "); expected a folder for the merged outputs (nothing was merged)");
  } catch (const std::invalid_argument& e) {
    return usage(e.what());
  }
  // The plan again, from the shards' options, with the kernel they ran.
  std::optional<Kernel> kernel;
  Plan plan;
  SplitRowsOptions o;
  try {
    const auto& op = first.plan.at("options");
    o.min_log2 = op.at("min_log2").get<int>();
    o.max_log2 = op.at("max_log2").get<int>();
    o.chunks = op.at("chunks").get<std::int64_t>();
    o.distributions = op.at("distributions").get<std::vector<std::string>>();
    o.dtypes = op.at("dtypes").get<std::vector<std::string>>();
    o.temperatures = op.at("temperatures").get<std::vector<double>>();
    o.seed = std::stoull(op.at("seed").get<std::string>());
    o.builtin = first.plan.value("builtin", "");
    o.plugin = plugin;
    o.kernel_index = first.plan.value("kernel_index", -1);
    kernel.emplace(load_kernel(o.builtin, o.plugin, o.kernel_index));
    const std::string identity =
        plugin.empty() ? "builtin:" + kernel->name() : gate::sha256_file(plugin);
    if (identity != first.plan.value("kernel_identity", ""))
      throw Usage("the shards' kernel " + (plugin.empty() ? o.builtin : plugin) + " is now " +
                  identity + ", the shards ran " + first.plan.value("kernel_identity", "") +
                  "; expected the same kernel");
    require_ops(*kernel);
    plan = make_plan(*kernel, identity, o, parse_dtypes(*kernel, o.dtypes));
    if (plan.digest() != first.plan.value("plan", ""))
      throw Usage("the plan of INPUT " + first.dir +
                  " is not the one its options make here; expected a shard.json written by this "
                  "version of softmax-audit");
  } catch (const std::exception& e) {
    return usage(fmt::format("INPUT {}: {}", first.dir, e.what()));
  }
  std::map<std::string, std::uint64_t> shard_of_key;
  std::map<std::uint64_t, std::size_t> cases_of;
  for (const auto& c : plan.cases) {
    shard_of_key[c.key] = shard_of(c, count);
    ++cases_of[shard_of(c, count)];
  }
  // The union by chunk key; one key with different bytes in two inputs is a
  // determinism finding.
  std::map<std::string, std::pair<std::string, const In*>> lines;
  std::vector<std::string> findings;
  std::set<std::uint64_t> present;
  const std::string state_text = phase == 2 ? first.plan.value("state_text", "") : "";
  const std::string want_identity =
      phase == 1 ? chunk_journal_identity(plan)
                 : element_journal_identity(plan, first.plan.value("state_digest", ""));
  for (const In& in : ins) {
    present.insert(in.index);
    const std::string path =
        (fs::path(in.dir) / (phase == 1 ? kChunkJournal : kElementJournal)).string();
    const auto [id, ls] = read_journal(path);
    if (!id.empty() && id != want_identity)
      return usage(fmt::format("INPUT {}: its journal's first line is \"{}\"; expected \"{}\"",
                               path, id, want_identity));
    for (const auto& l : ls) {
      const std::string key = split_tabs(l)[0];
      const auto s = shard_of_key.find(key);
      if (s == shard_of_key.end())
        return usage(fmt::format("INPUT {}: chunk {} is not one of this split sweep's", path, key));
      if (s->second != in.index)
        return usage(fmt::format("INPUT {}: chunk {} belongs to shard {}/{}, not to {}/{}", path,
                                 key, s->second, count, in.index, count));
      const auto [it, fresh] = lines.emplace(key, std::make_pair(l, &in));
      if (!fresh && it->second.first != l)
        findings.push_back(fmt::format("{} in {} and in {}: \"{}\" vs \"{}\"", key,
                                       it->second.second->dir, in.dir, it->second.first, l));
    }
  }
  std::map<std::uint64_t, std::vector<std::string>> missing;
  for (const auto& c : plan.cases)
    if (!lines.count(c.key)) missing[shard_of(c, count)].push_back(c.key);
  for (const auto& [s, keys] : missing) {
    if (!present.count(s))
      fmt::print(stderr,
                 "softmax-audit merge: shard {}/{} missing: no INPUT is that shard; its {} "
                 "chunk{} of phase {} {} absent (first: {})\n",
                 s, count, keys.size(), keys.size() == 1 ? "" : "s", phase,
                 keys.size() == 1 ? "is" : "are", keys.front());
    else
      fmt::print(stderr,
                 "softmax-audit merge: shard {}/{} incomplete: {} of its {} chunks of phase {} are "
                 "absent (first: {}; run it again: it resumes from its journal)\n",
                 s, count, keys.size(), cases_of[s], phase, keys.front());
  }
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (!fs::is_directory(out_dir, ec))
    return usage("OUT " + out_dir + ": cannot create this directory");
  std::optional<OutputDirLock> lock;
  int verdict = exit_pass;
  try {
    lock.emplace(out_dir, "OUT");
    if (phase == 1) {
      if (!missing.empty()) {
        fmt::print(stderr,
                   "softmax-audit merge: INCOMPLETE: phase 1 lacks the chunks named above; no "
                   "{} was written (phase 2 needs every row's state)\n",
                   kStateFile);
        return exit_incomplete;
      }
      std::map<std::string, Phase1Chunk> chunks;
      for (const auto& [key, l] : lines) chunks[key] = parse_phase1(l.second->dir, l.first);
      StateReport rep;
      const std::string text = merge_states(plan, chunks, *kernel, rep);
      write_file_atomically(out_state, text);
      print_state_report(rep);
      fmt::print(
          "merged phase 1 of {} input{} (shards of {}): {} rows' states in {}; next: "
          "sweep ... --row-chunks {} --state {} --shard k/N --out <phase-2 folder>\n",
          ins.size(), ins.size() == 1 ? "" : "s", count, plan.rows.size(), out_state, plan.chunks,
          out_state);
      verdict = rep.rows_over > 0 ? exit_fail : exit_pass;
    } else {
      std::map<std::string, Phase2Chunk> chunks;
      for (const auto& [key, l] : lines) chunks[key] = parse_phase2(l.second->dir, l.first);
      TableReport rep;
      const std::string table = final_table(plan, state_text, chunks, rep);
      write_files_atomically({{out_state, state_text}, {out_table, table}});
      {  // the row-level lines again, from the state
        const nlohmann::json st = nlohmann::json::parse(state_text);
        for (const auto& r : st.at("rows"))
          fmt::print(
              "row {}: merged lse error {} (budget {}), entropy error {} (budget {}); {} "
              "chunk{} over\n",
              r.at("key").get<std::string>(), r.at("lse_err").get<std::string>(),
              r.at("lse_budget").get<std::string>(), r.at("H_err").get<std::string>(),
              r.at("H_budget").get<std::string>(), r.at("chunks_over").get<int>(),
              r.at("chunks_over").get<int>() == 1 ? "" : "s");
      }
      verdict = table_verdict(rep, out_table);
    }
  } catch (const std::exception& e) {
    return usage(e.what());
  }
  for (const auto& f : findings) fmt::print("determinism finding: {}\n", f);
  if (!findings.empty()) {
    fmt::print(stderr,
               "softmax-audit merge: FAIL: {} determinism finding{} (one chunk, different "
               "bytes)\n",
               findings.size(), findings.size() == 1 ? "" : "s");
    return exit_fail;
  }
  if (verdict == exit_fail) return exit_fail;
  if (!missing.empty()) {
    fmt::print(stderr,
               "softmax-audit merge: INCOMPLETE: the merged split rows lack the chunks "
               "named above\n");
    return exit_incomplete;
  }
  return exit_pass;
}

}  // namespace sa::cli
