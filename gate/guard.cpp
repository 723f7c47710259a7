#include "gate/guard.hpp"
#include "gate/nan_rule.hpp"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cfenv>
#include <atomic>
#include <cmath>
#include <deque>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "core/attention_case.hpp"
#include "core/bfloat16.hpp"
#include "core/float16.hpp"
#include "kernels/attention_v2_args.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace sa::gate {

namespace {

// ---------------------------------------------------------------- registry --
// Live guarded buffers, read by the fault handler (fixed size, no allocation).
struct Region {
  std::atomic<bool> used{false};
  char name[48] = {};
  std::uintptr_t map_begin = 0, data_begin = 0, data_end = 0, map_end = 0;
  std::uintptr_t page = 0;        // size of each guard region
  std::uintptr_t live_begin = 0;  // sparse buffers: the first accessible byte (else 0)
  bool read_only = false;
};
constexpr int kRegions = 64;
Region g_regions[kRegions];
CallBox* g_box = nullptr;

Region* claim_region() {
  for (auto& r : g_regions) {
    bool expected = false;
    if (r.used.compare_exchange_strong(expected, true)) return &r;
  }
  return nullptr;  // more than kRegions buffers in one call: left unregistered
}

void set_region_name(Region* r, const char* name) {
  std::size_t i = 0;
  for (; name && name[i] && i + 1 < sizeof r->name; ++i) r->name[i] = name[i];
  r->name[i] = '\0';
}

// ------------------------------------------------------------------ arena --
// Remote calls (gate/host.hpp): guarded buffers are carved from one shared
// mapping that the kernel host sees at the same address. Between calls no
// buffer is alive, so the bump pointer goes back to the start.
unsigned char* g_arena = nullptr;
std::size_t g_arena_bytes = 0, g_arena_start = 0, g_arena_top = 0;
class Guarded;
std::vector<Guarded*> g_live;  // arena buffers alive now, in creation order
const FpState* g_remote_fp = nullptr;

// Async-signal-safe text building.
struct Writer {
  char* p;
  char* end;
  void put(const char* s) {
    while (*s && p + 1 < end) *p++ = *s++;
    *p = '\0';
  }
  void num(std::uintptr_t v) {
    char tmp[24];
    int i = 0;
    do {
      tmp[i++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v && i < 24);
    while (i && p + 1 < end) *p++ = tmp[--i];
    *p = '\0';
  }
};

void fault_handler(int sig, siginfo_t* info, void*) {
  if (g_box) {
    const auto a = reinterpret_cast<std::uintptr_t>(info->si_addr);
    Writer w{g_box->fault, g_box->fault + sizeof g_box->fault};
    w.p[0] = '\0';
    for (auto& r : g_regions) {
      if (!r.used.load() || a < r.map_begin || a >= r.map_end) continue;
      const std::uintptr_t size = r.data_end - r.data_begin;
      if ((r.live_begin && a < r.data_begin) || a < r.map_begin + r.page) {
        // Before the start: the guard page, or a sparse buffer's reservation
        // (where an offset past 2^31 elements computed in 32 bits lands once
        // it wraps).
        w.put("access ");
        w.num(r.data_begin - a);
        w.put(" bytes before the start of buffer '");
        w.put(r.name);
        w.put("' (");
        w.num(size);
        w.put(r.live_begin ? " bytes; an offset past 2^31 elements wrapped in 32 bits?)"
                           : " bytes)");
      } else if (r.live_begin && a < r.live_begin) {
        w.put("access at byte ");
        w.num(a - r.data_begin);
        w.put(" of buffer '");
        w.put(r.name);
        w.put("', below byte ");
        w.num(r.live_begin - r.data_begin);
        w.put(" where its first named page starts (never mapped: an offset computed in 32 bits?)");
      } else if (a >= r.map_end - r.page) {
        w.put("access at byte ");
        w.num(a - r.data_begin);
        w.put(" of buffer '");
        w.put(r.name);
        w.put("', which has ");
        w.num(size);
        w.put(" bytes (");
        w.num(a - r.data_end);
        w.put(" bytes past its end)");
      } else if (r.read_only) {
        w.put("write into input buffer '");
        w.put(r.name);
        w.put("' at byte ");
        w.num(a >= r.data_begin ? a - r.data_begin : 0);
        w.put(" (inputs are const)");
      } else {
        continue;
      }
      break;
    }
    if (w.p == g_box->fault) {
      w.put(sig == SIGBUS ? "bus error" : "segmentation fault");
      w.put(" at address ");
      w.num(a);
      w.put(" (not in a guarded buffer)");
    }
  }
  // Let the signal do what it would have done: default action, re-raised on return.
  signal(sig, SIG_DFL);
}

std::size_t page_size() {
  static const std::size_t p = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return p;
}

constexpr unsigned char kCanary = 0xA5;

// PROT_NONE bytes on each side of a buffer: 64 KiB (virtual only), so that an
// overrun of up to 64 KiB is attributed to the buffer it overran.
std::size_t guard_bytes() {
  const std::size_t P = page_size();
  return (65536 + P - 1) / P * P;
}

// One buffer handed to the kernel inside its own guarded mapping.
//
// A sparse input (live_from > 0: a large page pool, attention_v2.large_offsets)
// is laid out the same way behind a reservation of live_from bytes, and only
// its bytes from live_from on are copied and made accessible: the pages
// before (never named by the block table) and the reservation (where an
// offset past 2^31 elements computed in int32 lands: 2^32 elements before
// its target) stay inaccessible, and the fault handler names both.
class Guarded {
 public:
  Guarded(const char* name, const void* src, std::size_t bytes, bool input,
          std::size_t live_from = 0)
      : name_(name), bytes_(bytes), input_(input), src_(src) {
    const std::size_t P = page_size();
    const std::size_t G = guard_bytes();
    const std::size_t body = (bytes + 63) / 64 * 64;
    const std::size_t data_pages = body == 0 ? 1 : (body + P - 1) / P;
    if (live_from >= bytes) live_from = 0;
    live_from_ = live_from;
    const std::size_t reserve = (live_from + P - 1) / P * P;
    map_bytes_ = reserve + data_pages * P + 2 * G;
    if (g_arena) {
      // The judge never runs kernel code: its view of the arena needs no
      // protection. The host maps only the data pages, for the call.
      if (g_live.empty()) g_arena_top = g_arena_start;
      if (map_bytes_ > g_arena_bytes - g_arena_top)
        throw std::runtime_error("guarded call: the buffers of this call exceed the " +
                                 std::to_string(g_arena_bytes >> 20) +
                                 " MiB shared with the kernel's process");
      map_ = g_arena + g_arena_top;
      g_arena_top += map_bytes_;
      g_live.push_back(this);
    } else {
      void* m = mmap(nullptr, map_bytes_, live_from ? PROT_NONE : PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | (live_from ? MAP_NORESERVE : 0), -1, 0);
      if (m == MAP_FAILED) throw std::runtime_error("guarded call: mmap failed");
      map_ = static_cast<unsigned char*>(m);
      mprotect(map_, G + reserve, PROT_NONE);
      mprotect(map_ + reserve + G + data_pages * P, G, PROT_NONE);
    }
    unsigned char* inner_begin = map_ + reserve + G;
    unsigned char* inner_end = inner_begin + data_pages * P;
    data_ = inner_end - body;
    // The accessible pages: all of them, or those from live_from on.
    unsigned char* open_begin =
        live_from ? map_ + (static_cast<std::size_t>(data_ + live_from - map_) / P) * P
                  : inner_begin;
    if (live_from && !g_arena)
      mprotect(open_begin, static_cast<std::size_t>(inner_end - open_begin),
               PROT_READ | PROT_WRITE);
    std::memset(open_begin, kCanary, static_cast<std::size_t>(inner_end - open_begin));
    if (bytes)
      std::memcpy(data_ + live_from, static_cast<const unsigned char*>(src) + live_from,
                  bytes - live_from);
    head_ = live_from ? data_ : inner_begin;  // a sparse buffer's head canary: none
    tail_end_ = inner_end;
    guard_ = G;
    live_begin_ = live_from ? data_ + live_from : nullptr;
    if (g_arena) return;  // the host registers the fault regions itself
    if (input_) mprotect(open_begin, static_cast<std::size_t>(inner_end - open_begin), PROT_READ);
    region_ = claim_region();
    if (region_) {
      set_region_name(region_, name_);
      region_->map_begin = reinterpret_cast<std::uintptr_t>(map_);
      region_->map_end = region_->map_begin + map_bytes_;
      region_->data_begin = reinterpret_cast<std::uintptr_t>(data_);
      region_->data_end = region_->data_begin + bytes_;
      region_->page = G;
      region_->live_begin = reinterpret_cast<std::uintptr_t>(live_begin_);
      region_->read_only = input_;
    }
  }
  ~Guarded() {
    if (region_) region_->used.store(false);
    if (in_arena()) {
      if (auto it = std::find(g_live.begin(), g_live.end(), this); it != g_live.end())
        g_live.erase(it);
      return;
    }
    munmap(map_, map_bytes_);
  }
  Guarded(const Guarded&) = delete;
  Guarded& operator=(const Guarded&) = delete;

  bool in_arena() const { return g_arena && map_ >= g_arena && map_ < g_arena + g_arena_bytes; }
  BufferRange range() const {
    BufferRange r;
    r.map_begin = reinterpret_cast<std::uintptr_t>(map_);
    r.map_end = r.map_begin + map_bytes_;
    r.data_begin = reinterpret_cast<std::uintptr_t>(data_);
    r.data_end = r.data_begin + bytes_;
    r.guard = guard_;
    r.live_begin = reinterpret_cast<std::uintptr_t>(live_begin_);
    r.read_only = input_;
    r.name = name_;
    return r;
  }
  // An input the kernel changed (it can make its pages writable itself):
  // where, or empty.
  std::string input_changed() const {
    if (!input_ || !src_ || !bytes_) return "";
    const auto* a = data_;
    const auto* b = static_cast<const unsigned char*>(src_);
    if (std::memcmp(a + live_from_, b + live_from_, bytes_ - live_from_) == 0) return "";
    for (std::size_t i = live_from_; i < bytes_; ++i)
      if (a[i] != b[i])
        return "wrote into input buffer '" + std::string(name_) + "' at byte " + std::to_string(i) +
               " (inputs are const)";
    return "";
  }

  void* data() const { return data_; }
  void copy_to(void* dst) const {  // outputs only (never sparse)
    if (bytes_) std::memcpy(dst, data_, bytes_);
  }
  // Empty when both canaries are intact, else what was overwritten.
  std::string check() const {
    std::size_t before = 0, after = 0;
    for (const unsigned char* p = head_; p < data_; ++p)
      if (*p != kCanary) before = static_cast<std::size_t>(data_ - p) > before ? data_ - p : before;
    for (const unsigned char* p = data_ + bytes_; p < tail_end_; ++p)
      if (*p != kCanary) after = static_cast<std::size_t>(p - (data_ + bytes_)) + 1;
    std::string out;
    if (before)
      out += "wrote up to " + std::to_string(before) + " bytes before the start of '" + name_ + "'";
    if (after)
      out += std::string(out.empty() ? "" : "; ") + "wrote up to " + std::to_string(after) +
             " bytes past the end of '" + name_ + "' (" + std::to_string(bytes_) + " bytes)";
    return out;
  }

 private:
  const char* name_;
  std::size_t bytes_;
  bool input_;
  const void* src_;  // the caller's buffer (inputs: compared after the call)
  std::size_t guard_ = 0;
  std::size_t live_from_ = 0;  // sparse: bytes before the first accessible one
  unsigned char* live_begin_ = nullptr;
  std::size_t map_bytes_ = 0;
  unsigned char* map_ = nullptr;
  unsigned char* data_ = nullptr;
  unsigned char* head_ = nullptr;
  unsigned char* tail_end_ = nullptr;
  Region* region_ = nullptr;
};

// ------------------------------------------------------------- the wrapper --
const char* dtype_name(sa_dtype t) {
  switch (t) {
    case SA_BF16:
      return "bfloat16";
    case SA_F16:
      return "float16";
    case SA_FP8_E4M3:
      return "fp8_e4m3";
    case SA_FP8_E5M2:
      return "fp8_e5m2";
    case SA_FP4_E2M1:
      return "fp4_e2m1";
    case SA_INT8:
      return "int8";
    default:
      return "float32";
  }
}
// Bytes per element (fp4 e2m1, two per byte: bytes_of).
std::size_t elem(sa_dtype t) {
  return t == SA_BF16 || t == SA_F16                                                ? 2
         : t == SA_FP8_E4M3 || t == SA_FP8_E5M2 || t == SA_FP4_E2M1 || t == SA_INT8 ? 1
                                                                                    : 4;
}
// Bytes of n elements (kernel.h: fp4 e2m1 element e in byte e / 2).
std::size_t bytes_of(sa_dtype t, std::size_t n) {
  return t == SA_FP4_E2M1 ? (n + 1) / 2 : n * elem(t);
}

float load(sa_dtype t, const void* p, std::int64_t i) {
  if (t == SA_BF16) return float_from_bf16(static_cast<const std::uint16_t*>(p)[i]);
  if (t == SA_F16) return float_from_f16(static_cast<const std::uint16_t*>(p)[i]);
  return static_cast<const float*>(p)[i];
}

// ------------------------------------------------- floating-point environment --
// kernel.h: a call leaves the floating-point environment as it found it. The
// parts a kernel can change that alter later arithmetic: the rounding mode,
// and on x86 the SSE control bits (flush-to-zero, denormals-are-zero, the
// exception masks). Status flags are not compared: arithmetic raises them.
std::string describe_fp_change(const FpState& st) {
  std::string what;
  const int round = st.round;
  if (round != FE_TONEAREST)
    what += round == FE_UPWARD       ? "rounding mode upward"
            : round == FE_DOWNWARD   ? "rounding mode downward"
            : round == FE_TOWARDZERO ? "rounding mode toward zero"
                                     : "rounding mode changed";
#if defined(__x86_64__) || defined(__i386__)
  const unsigned csr = st.csr;
  auto add = [&](const char* t) { what += (what.empty() ? "" : ", ") + std::string(t); };
  if (csr & 0x8000u) add("flush-to-zero on (MXCSR.FTZ)");
  if (csr & 0x0040u) add("denormals-are-zero on (MXCSR.DAZ)");
  if ((csr & 0x1f80u) != 0x1f80u) add("floating-point exceptions unmasked (MXCSR)");
#endif
  return what;
}

}  // namespace

struct GuardedKernel::State {
  const sa_kernel* inner = nullptr;
  std::vector<Kernel> keep;  // holds the inner kernel's library loaded
  sa_kernel outer{};
  GuardOptions options;
  Report report;
  std::set<Op> refused;       // answered by the gate, not passed to the kernel
  bool refused_last = false;  // the last call was refused (for last_error)

  // A call in progress: its guarded buffers and what to copy back.
  struct Call {
    State* s;
    const char* op;
    std::string dtype;
    std::vector<std::unique_ptr<Guarded>> bufs;
    std::vector<std::pair<Guarded*, void*>> back;
    Call(State* s_, const char* op_, std::string dt) : s(s_), op(op_), dtype(std::move(dt)) {
      s->refused_last = false;
      restore_default_fp_env();  // every call starts from the default environment
      if (g_box) {
        std::strncpy(g_box->op, op, sizeof g_box->op - 1);
        std::strncpy(g_box->dtype, dtype.c_str(), sizeof g_box->dtype - 1);
        g_box->fault[0] = '\0';
        g_box->in_call = 1;
      }
    }
    ~Call() {
      if (g_box) g_box->in_call = 0;
    }
    // Remote calls always go through the arena (it is how buffers reach the
    // kernel's process), whatever guard_buffers says.
    bool guarding() const { return s->options.guard_buffers || g_arena; }
    // live_from > 0: a sparse input, of which the bytes before live_from are
    // never read by a correct kernel (nor copied, nor accessible).
    const void* in(const char* name, const void* p, std::size_t bytes, std::size_t live_from = 0) {
      if (!p || !guarding()) return p;
      bufs.push_back(std::make_unique<Guarded>(name, p, bytes, true, live_from));
      return bufs.back()->data();
    }
    void* out(const char* name, void* p, std::size_t bytes) {
      if (!p || !guarding()) return p;
      bufs.push_back(std::make_unique<Guarded>(name, p, bytes, false));
      back.emplace_back(bufs.back().get(), p);
      return bufs.back()->data();
    }
    // After the call: the floating-point environment, canaries, then copy
    // outputs back to the caller's buffers.
    // A remote call's environment is the host's, as it reported it.
    void finish() {
      const FpState fp_state = g_remote_fp ? *g_remote_fp : read_fp_state();
      if (const std::string fp = describe_fp_change(fp_state); !fp.empty()) {
        restore_default_fp_env();
        s->incident("fp_environment", op, dtype,
                    "after the call: " + fp +
                        "; the gate restored the default environment before going on");
      }
      for (auto& b : bufs) {
        std::string d = b->check();
        if (!d.empty()) s->incident("out_of_bounds_write", op, dtype, d);
        d = b->input_changed();
        if (!d.empty()) s->incident("out_of_bounds_write", op, dtype, d);
      }
      for (auto& [g, dst] : back) g->copy_to(dst);
    }
  };

  void incident(const char* kind, const char* op, const std::string& dtype, std::string detail) {
    if (report) report(GuardIncident{kind, op, dtype, std::move(detail)});
  }

  // Row operations: NaN in row r's outputs although row r has no NaN/+inf input.
  void check_rows(const char* op, sa_dtype t, const sa_rows* sh, const void* in,
                  const void* out_elems, sa_dtype out_t, std::int64_t out_stride,
                  std::initializer_list<std::pair<const char*, const float*>> scalars,
                  const sa_entropy_state* states) {
    if (!options.check_nan || !sh || !in) return;
    for (std::int64_t r = 0; r < sh->rows; ++r) {
      // The row's facts; the rule is gate/nan_rule.hpp's, under the
      // conventions the running suite holds the kernel to.
      RowInputFacts f;
      f.all_neg_inf = sh->n > 0;
      for (std::int64_t i = 0; i < sh->n; ++i) {
        const float x = load(t, in, r * sh->in_stride + i);
        f.nan = f.nan || std::isnan(x);
        f.pos_inf = f.pos_inf || x == INFINITY;
        f.beyond = f.beyond || (std::isfinite(x) && std::fabs(x / sh->temperature) > 3.0e38);
        f.all_neg_inf = f.all_neg_inf && x == -INFINITY;
      }
      const NanRowRule rule = nan_rule_for_row(f, props::active_conventions());
      if (rule.nan_allowed) continue;
      std::string what;
      if (out_elems)
        for (std::int64_t i = 0; i < sh->n; ++i)
          if (std::isnan(load(out_t, out_elems, r * out_stride + i))) {
            what = "output[" + std::to_string(i) + "]";
            break;
          }
      for (auto& [name, p] : scalars)
        if (what.empty() && p && std::isnan(p[r])) what = name;
      if (what.empty() && states &&
          (std::isnan(states[r].m) || std::isnan(states[r].S) || std::isnan(states[r].T)))
        what = "state";
      if (!what.empty()) {
        incident("nan_output", op, dtype_name(t),
                 "row " + std::to_string(r) + " of " + std::to_string(sh->rows) +
                     " (n = " + std::to_string(sh->n) + "): " + what + " is NaN" + rule.why);
        return;  // one per call is enough
      }
    }
  }
};

namespace {
using State = GuardedKernel::State;
State* st(void* ctx) { return static_cast<State*>(ctx); }

std::size_t row_bytes(const sa_rows* sh, std::int64_t stride, std::size_t esz) {
  if (!sh || sh->rows <= 0 || sh->n <= 0 || stride < sh->n) return 0;
  return static_cast<std::size_t>((sh->rows - 1) * stride + sh->n) * esz;
}
bool valid(const sa_rows* sh) { return sh && sh->rows > 0 && sh->n > 0 && sh->in_stride >= sh->n; }

// In-place calls (in == out, kernel.h) keep their aliasing: one writable
// mapping is handed to the kernel as both; the NaN check reads a copy of the
// input taken before the call.
struct InPlace {
  std::vector<unsigned char> input;  // the input before the call (in-place calls only)
  const void* in = nullptr;          // what check_rows reads as the input
};

sa_status t_softmax_like(void* ctx, sa_dtype t, const sa_rows* sh, const void* in, void* out,
                         bool log) {
  State* s = st(ctx);
  auto fn = log ? s->inner->log_softmax : s->inner->softmax;
  if (!valid(sh) || sh->out_stride < sh->n) return fn(s->inner->ctx, t, sh, in, out);
  State::Call c(s, log ? "log_softmax" : "softmax", dtype_name(t));
  const std::size_t in_bytes = row_bytes(sh, sh->in_stride, elem(t)),
                    out_bytes = row_bytes(sh, sh->out_stride, elem(t));
  InPlace ip{{}, in};
  const void* gin;
  void* gout;
  if (in == out) {
    const auto* p = static_cast<const unsigned char*>(in);
    ip.input.assign(p, p + in_bytes);
    ip.in = ip.input.data();
    gout = c.out("in/out (in place)", out, std::max(in_bytes, out_bytes));
    gin = gout;
  } else {
    gin = c.in("in", in, in_bytes);
    gout = c.out("out", out, out_bytes);
  }
  const sa_status r = fn(s->inner->ctx, t, sh, gin, gout);
  c.finish();
  if (r == SA_OK) s->check_rows(c.op, t, sh, ip.in, out, t, sh->out_stride, {}, nullptr);
  return r;
}
sa_status t_softmax(void* ctx, sa_dtype t, const sa_rows* sh, const void* in, void* out) {
  return t_softmax_like(ctx, t, sh, in, out, false);
}
sa_status t_log_softmax(void* ctx, sa_dtype t, const sa_rows* sh, const void* in, void* out) {
  return t_softmax_like(ctx, t, sh, in, out, true);
}
sa_status t_logsumexp(void* ctx, sa_dtype t, const sa_rows* sh, const void* in, float* lse) {
  State* s = st(ctx);
  if (!valid(sh)) return s->inner->logsumexp(s->inner->ctx, t, sh, in, lse);
  State::Call c(s, "logsumexp", dtype_name(t));
  const void* gin = c.in("in", in, row_bytes(sh, sh->in_stride, elem(t)));
  auto* gl = static_cast<float*>(c.out("lse", lse, sh->rows * 4));
  const sa_status r = s->inner->logsumexp(s->inner->ctx, t, sh, gin, gl);
  c.finish();
  if (r == SA_OK) s->check_rows(c.op, t, sh, in, nullptr, t, 0, {{"lse", lse}}, nullptr);
  return r;
}
sa_status t_entropy(void* ctx, sa_dtype t, const sa_rows* sh, const void* in, float* H,
                    sa_entropy_state* state) {
  State* s = st(ctx);
  if (!valid(sh)) return s->inner->entropy(s->inner->ctx, t, sh, in, H, state);
  State::Call c(s, "entropy", dtype_name(t));
  const void* gin = c.in("in", in, row_bytes(sh, sh->in_stride, elem(t)));
  auto* gH = static_cast<float*>(c.out("entropy", H, sh->rows * 4));
  auto* gs =
      static_cast<sa_entropy_state*>(c.out("state", state, sh->rows * sizeof(sa_entropy_state)));
  const sa_status r = s->inner->entropy(s->inner->ctx, t, sh, gin, gH, gs);
  c.finish();
  if (r == SA_OK) s->check_rows(c.op, t, sh, in, nullptr, t, 0, {{"entropy", H}}, state);
  return r;
}
sa_status t_adaptive(void* ctx, sa_dtype t, const sa_rows* sh, const void* in, void* out,
                     float* beta, float* H) {
  State* s = st(ctx);
  if (!valid(sh) || sh->out_stride < sh->n)
    return s->inner->adaptive_softmax(s->inner->ctx, t, sh, in, out, beta, H);
  State::Call c(s, "adaptive_softmax", dtype_name(t));
  const std::size_t in_bytes = row_bytes(sh, sh->in_stride, elem(t)),
                    out_bytes = row_bytes(sh, sh->out_stride, elem(t));
  InPlace ip{{}, in};
  const void* gin;
  void* gout;
  if (in == out) {  // in place: one shared mapping (see t_softmax_like)
    const auto* p = static_cast<const unsigned char*>(in);
    ip.input.assign(p, p + in_bytes);
    ip.in = ip.input.data();
    gout = c.out("in/out (in place)", out, std::max(in_bytes, out_bytes));
    gin = gout;
  } else {
    gin = c.in("in", in, in_bytes);
    gout = c.out("out", out, out_bytes);
  }
  auto* gb = static_cast<float*>(c.out("beta", beta, sh->rows * 4));
  auto* gH = static_cast<float*>(c.out("entropy", H, sh->rows * 4));
  const sa_status r = s->inner->adaptive_softmax(s->inner->ctx, t, sh, gin, gout, gb, gH);
  c.finish();
  if (r == SA_OK)
    s->check_rows(c.op, t, sh, ip.in, out, t, sh->out_stride, {{"beta", beta}, {"entropy", H}},
                  nullptr);
  return r;
}

bool all_finite(sa_dtype t, const void* p, std::int64_t rows, std::int64_t cols,
                std::int64_t stride) {
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t i = 0; i < cols; ++i)
      if (!std::isfinite(load(t, p, r * stride + i))) return false;
  return true;
}

sa_status t_attention(void* ctx, const sa_attention_args* a) {
  State* s = st(ctx);
  if (!a || a->nq <= 0 || a->nk <= 0 || a->d <= 0 || a->dv <= 0 || a->q_stride < a->d ||
      a->k_stride < a->d || a->v_stride < a->dv || a->out_stride < a->dv)
    return s->inner->attention(s->inner->ctx, a);
  State::Call c(s, "attention", dtype_name(a->dtype));
  const std::size_t e = elem(a->dtype);
  sa_attention_args g = *a;
  g.q = c.in("q", a->q, static_cast<std::size_t>((a->nq - 1) * a->q_stride + a->d) * e);
  g.k = c.in("k", a->k, static_cast<std::size_t>((a->nk - 1) * a->k_stride + a->d) * e);
  g.v = c.in("v", a->v, static_cast<std::size_t>((a->nk - 1) * a->v_stride + a->dv) * e);
  g.out = c.out("out", a->out, static_cast<std::size_t>((a->nq - 1) * a->out_stride + a->dv) * e);
  g.lse = static_cast<float*>(c.out("lse", a->lse, a->nq * 4));
  g.entropy = static_cast<float*>(c.out("entropy", a->entropy, a->nq * 4));
  g.beta = static_cast<float*>(c.out("beta", a->beta, a->nq * 4));
  g.key_mask = static_cast<const std::uint8_t*>(c.in("key_mask", a->key_mask, a->nk));
  const sa_status r = s->inner->attention(s->inner->ctx, &g);
  c.finish();
  // Only where no logit scale * q.k can overflow float (|q|max |k|max d |scale| < 3e38).
  auto max_abs = [&](const void* p, std::int64_t rows, std::int64_t cols, std::int64_t stride) {
    double m = 0;
    for (std::int64_t r2 = 0; r2 < rows; ++r2)
      for (std::int64_t i = 0; i < cols; ++i)
        m = std::max(m, static_cast<double>(std::fabs(load(a->dtype, p, r2 * stride + i))));
    return m;
  };
  if (r == SA_OK && s->options.check_nan && std::isfinite(a->scale) &&
      all_finite(a->dtype, a->q, a->nq, a->d, a->q_stride) &&
      all_finite(a->dtype, a->k, a->nk, a->d, a->k_stride) &&
      all_finite(a->dtype, a->v, a->nk, a->dv, a->v_stride) &&
      max_abs(a->q, a->nq, a->d, a->q_stride) * max_abs(a->k, a->nk, a->d, a->k_stride) *
              static_cast<double>(a->d) * std::fabs(a->scale) <
          3.0e38) {
    std::string what;
    for (std::int64_t i = 0; i < a->nq && what.empty(); ++i) {
      for (std::int64_t j = 0; j < a->dv && what.empty(); ++j)
        if (std::isnan(load(a->dtype, a->out, i * a->out_stride + j)))
          what = "out[" + std::to_string(i) + "][" + std::to_string(j) + "]";
      if (what.empty() && a->lse && std::isnan(a->lse[i])) what = "lse[" + std::to_string(i) + "]";
      if (what.empty() && a->entropy && std::isnan(a->entropy[i]))
        what = "entropy[" + std::to_string(i) + "]";
      if (what.empty() && a->beta && std::isnan(a->beta[i]))
        what = "beta[" + std::to_string(i) + "]";
    }
    if (!what.empty())
      s->incident("nan_output", "attention", dtype_name(a->dtype),
                  what + " is NaN although q, k, v and scale are finite (nq = " +
                      std::to_string(a->nq) + ", nk = " + std::to_string(a->nk) + ")");
  }
  return r;
}

bool proper_state(const sa_entropy_state& x) {
  if (x.m == -INFINITY) return x.S == 0 && x.T == 0;  // the identity
  return std::isfinite(x.m) && x.S > 0 && std::isfinite(x.S) && std::isfinite(x.T) && x.T <= 0;
}

sa_status t_merge_entropy(void* ctx, std::int64_t count, const sa_entropy_state* a,
                          const sa_entropy_state* b, sa_entropy_state* out) {
  State* s = st(ctx);
  if (count <= 0 || out == a || out == b)
    return s->inner->merge_entropy_states(s->inner->ctx, count, a, b, out);
  State::Call c(s, "merge_entropy_states", "");
  const std::size_t bytes = static_cast<std::size_t>(count) * sizeof(sa_entropy_state);
  auto* ga = static_cast<const sa_entropy_state*>(c.in("a", a, bytes));
  auto* gb = static_cast<const sa_entropy_state*>(c.in("b", b, bytes));
  auto* go = static_cast<sa_entropy_state*>(c.out("out", out, bytes));
  const sa_status r = s->inner->merge_entropy_states(s->inner->ctx, count, ga, gb, go);
  c.finish();
  if (r == SA_OK && s->options.check_nan && a && b && out)
    for (std::int64_t i = 0; i < count; ++i)
      if (proper_state(a[i]) && proper_state(b[i]) &&
          (std::isnan(out[i].m) || std::isnan(out[i].S) || std::isnan(out[i].T))) {
        s->incident("nan_output", "merge_entropy_states", "",
                    "state " + std::to_string(i) +
                        ": merged state has a NaN although both inputs are proper states or the "
                        "identity (-inf, 0, 0) (docs/theory.md T6)");
        break;
      }
  return r;
}

// Batched attention (interface v2): every buffer guarded at its exact reach
// (the largest offset its strides and lengths address, plus one head vector).

// Whether the guard can size every buffer of these arguments; otherwise the
// call goes to the kernel unguarded, whose own checks answer it.
bool guardable(const sa_attention_v2_args* a) {
  if (!a || a->struct_size < sizeof(sa_attention_v2_args) || a->batch < 0 || a->heads_q < 1 ||
      a->heads_kv < 1 || a->head_dim < 1 || a->head_dim_v < 1 || a->seqlen_q < 0 || a->seqlen_k < 0)
    return false;
  const bool varlen = a->cu_seqlens_q != nullptr && a->cu_seqlens_k != nullptr;
  if (a->block_table &&
      (a->page_size < 1 || a->num_pages < 1 || a->block_table_stride < 1 ||
       a->block_table_stride > (std::int64_t(1) << 24) || a->num_pages > (std::int64_t(1) << 31)))
    return false;
  if (a->scale_block < 0 || a->scale_block > (std::int64_t(1) << 20)) return false;
  return !varlen || (a->cu_seqlens_q[a->batch] >= 0 && a->cu_seqlens_k[a->batch] >= 0);
}

// Bytes from a tensor's base pointer to the end of the last element its
// strides and lengths address (0 when it addresses none).
std::size_t tensor_reach(const sa_attention_v2_args& a, bool varlen, std::int64_t sb,
                         std::int64_t sh, std::int64_t ss, std::int64_t heads, std::int64_t seqlen,
                         std::int64_t total, std::int64_t dim, std::size_t e) {
  const std::int64_t rows = varlen ? total : seqlen;
  if (rows == 0 || (!varlen && a.batch == 0)) return 0;
  const std::int64_t last =
      (varlen ? 0 : (a.batch - 1) * sb) + (heads - 1) * sh + (rows - 1) * ss + dim;
  return static_cast<std::size_t>(last) * e;
}

sa_status t_attention_v2(void* ctx, const sa_attention_v2_args* a) {
  State* s = st(ctx);
  const bool varlen = a && a->cu_seqlens_q != nullptr && a->cu_seqlens_k != nullptr;
  if (!guardable(a)) return s->inner->attention_v2(s->inner->ctx, a);
  State::Call c(s, "attention_v2", dtype_name(a->qkv_dtype));
  const std::int64_t tq = varlen ? a->cu_seqlens_q[a->batch] : a->batch * a->seqlen_q,
                     tk = varlen ? a->cu_seqlens_k[a->batch] : a->batch * a->seqlen_k;
  auto reach = [&](std::int64_t sb, std::int64_t sh, std::int64_t ss, std::int64_t heads,
                   std::int64_t seqlen, std::int64_t total, std::int64_t dim, std::size_t e) {
    return tensor_reach(*a, varlen, sb, sh, ss, heads, seqlen, total, dim, e);
  };
  const std::size_t eo = elem(a->out_dtype);
  sa_attention_v2_args g = *a;
  auto guard_in = [&](const char* name, const sa_tensor& t, std::int64_t heads, std::int64_t seqlen,
                      std::int64_t total, std::int64_t dim) {
    sa_tensor r = t;
    const std::size_t bytes = bytes_of(
        a->qkv_dtype, reach(t.stride_b, t.stride_h, t.stride_s, heads, seqlen, total, dim, 1));
    if (bytes) r.data = c.in(name, t.data, bytes);
    return r;
  };
  g.q = guard_in("q", a->q, a->heads_q, a->seqlen_q, tq, a->head_dim);
  // V a prefix view of K (MLA; kernel.h: k and v may alias): the kernel gets
  // the aliasing too, V pointing into K's guarded copy, which holds every
  // element V can reach (the same strides, head_dim_v <= head_dim).
  const bool v_in_k = a->v.data && a->v.data == a->k.data && a->v.stride_b == a->k.stride_b &&
                      a->v.stride_h == a->k.stride_h && a->v.stride_s == a->k.stride_s &&
                      a->head_dim_v <= a->head_dim;
  if (a->block_table) {
    // Paged KV: k and v are page pools (num_pages pages of page_size slots).
    // A pool whose named pages all lie past kLargePoolBytes (the lowest id in
    // the block table times the page stride) is guarded sparsely: the pages
    // below are never copied nor made accessible (attention_v2.large_offsets).
    std::int64_t lowest = a->num_pages;
    for (std::int64_t i = 0; i < a->batch * a->block_table_stride; ++i)
      lowest = std::min<std::int64_t>(lowest, std::max<std::int32_t>(a->block_table[i], 0));
    auto guard_pool = [&](const char* name, const sa_tensor& t, std::int64_t dim) {
      sa_tensor r = t;
      const std::int64_t last = (a->num_pages - 1) * t.stride_b + (a->heads_kv - 1) * t.stride_h +
                                (a->page_size - 1) * t.stride_s + dim;
      const std::int64_t from =
          t.stride_b > 0 && t.stride_h >= 0 && t.stride_s >= 0
              ? static_cast<std::int64_t>(
                    bytes_of(a->qkv_dtype, static_cast<std::size_t>(lowest * t.stride_b)))
              : 0;
      r.data = c.in(name, t.data, bytes_of(a->qkv_dtype, static_cast<std::size_t>(last)),
                    from >= kLargePoolBytes ? static_cast<std::size_t>(from) : 0);
      return r;
    };
    g.k = guard_pool("k (page pool)", a->k, a->head_dim);
    g.v = v_in_k ? g.k : guard_pool("v (page pool)", a->v, a->head_dim_v);
    g.block_table = static_cast<const std::int32_t*>(
        c.in("block_table", a->block_table,
             static_cast<std::size_t>(a->batch * a->block_table_stride) * 4));
  } else {
    g.k = guard_in("k", a->k, a->heads_kv, a->seqlen_k, tk, a->head_dim);
    g.v = v_in_k ? g.k : guard_in("v", a->v, a->heads_kv, a->seqlen_k, tk, a->head_dim_v);
  }
  if (a->seqused_k && a->batch > 0)
    g.seqused_k = static_cast<const std::int32_t*>(
        c.in("seqused_k", a->seqused_k, static_cast<std::size_t>(a->batch) * 4));
  if (a->scale_block > 0) {
    // Block scales: one per run of scale_block elements (a byte, or a
    // float32 for scale_dtype SA_F32), addressed as the elements are (page
    // pools for paged K and V).
    const std::size_t ss = a->scale_dtype == SA_F32 ? 4 : 1;
    auto runs = [&](std::int64_t dim) { return (dim + a->scale_block - 1) / a->scale_block; };
    auto guard_scales = [&](const char* name, const sa_tensor& t, bool keys, std::int64_t heads,
                            std::int64_t seqlen, std::int64_t total, std::int64_t dim) {
      sa_tensor r = t;
      std::size_t bytes = 0;
      if (keys && a->block_table)
        bytes =
            static_cast<std::size_t>((a->num_pages - 1) * t.stride_b + (heads - 1) * t.stride_h +
                                     (a->page_size - 1) * t.stride_s + runs(dim)) *
            ss;
      else
        bytes = reach(t.stride_b, t.stride_h, t.stride_s, heads, seqlen, total, runs(dim), ss);
      if (bytes) r.data = c.in(name, t.data, bytes);
      return r;
    };
    g.q_scale =
        guard_scales("q_scale", a->q_scale, false, a->heads_q, a->seqlen_q, tq, a->head_dim);
    g.k_scale =
        guard_scales("k_scale", a->k_scale, true, a->heads_kv, a->seqlen_k, tk, a->head_dim);
    g.v_scale =
        guard_scales("v_scale", a->v_scale, true, a->heads_kv, a->seqlen_k, tk, a->head_dim_v);
  }
  if (const std::size_t ob = reach(a->out_stride_b, a->out_stride_h, a->out_stride_s, a->heads_q,
                                   a->seqlen_q, tq, a->head_dim_v, eo))
    g.out = c.out("out", a->out, ob);
  const std::size_t per_query =
      static_cast<std::size_t>(a->heads_q * (varlen ? tq : a->batch * a->seqlen_q));
  if (per_query) {
    g.lse = static_cast<float*>(c.out("lse", a->lse, per_query * 4));
    g.entropy = static_cast<float*>(c.out("entropy", a->entropy, per_query * 4));
    g.beta = static_cast<float*>(c.out("beta", a->beta, per_query * 4));
  }
  if (varlen) {
    g.cu_seqlens_q = static_cast<const std::int32_t*>(
        c.in("cu_seqlens_q", a->cu_seqlens_q, static_cast<std::size_t>(a->batch + 1) * 4));
    g.cu_seqlens_k = static_cast<const std::int32_t*>(
        c.in("cu_seqlens_k", a->cu_seqlens_k, static_cast<std::size_t>(a->batch + 1) * 4));
  }
  if (tk > 0)
    g.key_padding_mask = static_cast<const std::uint8_t*>(
        c.in("key_padding_mask", a->key_padding_mask, static_cast<std::size_t>(tk)));
  g.alibi_slopes = static_cast<const float*>(
      c.in("alibi_slopes", a->alibi_slopes, static_cast<std::size_t>(a->heads_q) * 4));
  g.sinks =
      static_cast<const float*>(c.in("sinks", a->sinks, static_cast<std::size_t>(a->heads_q) * 4));
  {  // descales per (sequence, kv head): batch * heads_kv floats each
    const auto n = static_cast<std::size_t>(a->batch * a->heads_kv) * 4;
    g.q_descale_bh = static_cast<const float*>(c.in("q_descale_bh", a->q_descale_bh, n));
    g.k_descale_bh = static_cast<const float*>(c.in("k_descale_bh", a->k_descale_bh, n));
    g.v_descale_bh = static_cast<const float*>(c.in("v_descale_bh", a->v_descale_bh, n));
  }
  {  // masks beyond causal and window: each up to its last addressed element
    std::int64_t reach_m[4];
    sa::kernels::mask_reaches(*a, reach_m);
    sa_mask_tensor* gm[4] = {&g.attn_mask, &g.attn_bias, &g.block_mask, &g.tree_mask};
    const char* names[4] = {"attn_mask", "attn_bias", "block_mask", "tree_mask"};
    for (int x = 0; x < 4; ++x)
      if (reach_m[x] > 0)
        gm[x]->data =
            c.in(names[x], gm[x]->data, static_cast<std::size_t>(reach_m[x]) * (x == 1 ? 4 : 1));
  }
  const sa_status r = s->inner->attention_v2(s->inner->ctx, &g);
  c.finish();
  return r;
}

// Backward operations (interface v2): y, dy and dx guarded like softmax's rows.
sa_status t_row_backward(void* ctx, sa_dtype t, const sa_rows* sh, const void* y, const void* dy,
                         void* dx, bool log) {
  State* s = st(ctx);
  auto fn = log ? s->inner->log_softmax_backward : s->inner->softmax_backward;
  if (!valid(sh) || sh->out_stride < sh->n) return fn(s->inner->ctx, t, sh, y, dy, dx);
  State::Call c(s, log ? "log_softmax_backward" : "softmax_backward", dtype_name(t));
  const std::size_t in_bytes = row_bytes(sh, sh->in_stride, elem(t)),
                    out_bytes = row_bytes(sh, sh->out_stride, elem(t));
  const void* gy = c.in("y", y, in_bytes);
  // In place (dx == dy, which kernel.h allows): one writable mapping as both.
  void* gdx = c.out(dx == dy ? "dy/dx (in place)" : "dx", dx,
                    dx == dy ? std::max(in_bytes, out_bytes) : out_bytes);
  const void* gdy = dx == dy ? gdx : c.in("dy", dy, in_bytes);
  const sa_status r = fn(s->inner->ctx, t, sh, gy, gdy, gdx);
  c.finish();
  return r;
}
sa_status t_softmax_backward(void* ctx, sa_dtype t, const sa_rows* sh, const void* y,
                             const void* dy, void* dx) {
  return t_row_backward(ctx, t, sh, y, dy, dx, false);
}
sa_status t_log_softmax_backward(void* ctx, sa_dtype t, const sa_rows* sh, const void* y,
                                 const void* dy, void* dx) {
  return t_row_backward(ctx, t, sh, y, dy, dx, true);
}

// Attention backward: every input of the forward, dout and the gradients
// guarded at their exact reach, as t_attention_v2 does.
sa_status t_attention_backward(void* ctx, const sa_attention_backward_args* b) {
  State* s = st(ctx);
  const sa_attention_v2_args* a = b ? b->forward : nullptr;
  const bool varlen = a && a->cu_seqlens_q != nullptr && a->cu_seqlens_k != nullptr;
  if (!b || b->struct_size < sizeof(sa_attention_backward_args) || !guardable(a))
    return s->inner->attention_backward(s->inner->ctx, b);
  State::Call c(s, "attention_backward", dtype_name(a->qkv_dtype));
  const std::int64_t tq = varlen ? a->cu_seqlens_q[a->batch] : a->batch * a->seqlen_q,
                     tk = varlen ? a->cu_seqlens_k[a->batch] : a->batch * a->seqlen_k;
  auto reach = [&](std::int64_t sb, std::int64_t sh, std::int64_t ss, std::int64_t heads,
                   std::int64_t seqlen, std::int64_t total, std::int64_t dim, std::size_t e) {
    return tensor_reach(*a, varlen, sb, sh, ss, heads, seqlen, total, dim, e);
  };
  const std::size_t ei = elem(a->qkv_dtype), eo = elem(a->out_dtype);
  sa_attention_v2_args g = *a;
  sa_attention_backward_args gb = *b;
  gb.forward = &g;
  auto guard = [&](const char* name, const sa_tensor& t, std::int64_t heads, std::int64_t seqlen,
                   std::int64_t total, std::int64_t dim, std::size_t e, bool out) {
    sa_tensor r = t;
    const std::size_t bytes =
        reach(t.stride_b, t.stride_h, t.stride_s, heads, seqlen, total, dim, e);
    if (bytes)
      r.data = out ? c.out(name, const_cast<void*>(t.data), bytes) : c.in(name, t.data, bytes);
    return r;
  };
  g.q = guard("q", a->q, a->heads_q, a->seqlen_q, tq, a->head_dim, ei, false);
  g.k = guard("k", a->k, a->heads_kv, a->seqlen_k, tk, a->head_dim, ei, false);
  g.v = guard("v", a->v, a->heads_kv, a->seqlen_k, tk, a->head_dim_v, ei, false);
  if (const std::size_t ob = reach(a->out_stride_b, a->out_stride_h, a->out_stride_s, a->heads_q,
                                   a->seqlen_q, tq, a->head_dim_v, eo))
    g.out = const_cast<void*>(c.in("out", a->out, ob));
  gb.dout = guard("dout", b->dout, a->heads_q, a->seqlen_q, tq, a->head_dim_v, eo, false);
  gb.dq = guard("dq", b->dq, a->heads_q, a->seqlen_q, tq, a->head_dim, ei, true);
  gb.dk = guard("dk", b->dk, a->heads_kv, a->seqlen_k, tk, a->head_dim, ei, true);
  gb.dv = guard("dv", b->dv, a->heads_kv, a->seqlen_k, tk, a->head_dim_v, ei, true);
  const std::size_t per_query =
      static_cast<std::size_t>(a->heads_q * (varlen ? tq : a->batch * a->seqlen_q));
  if (per_query) g.lse = static_cast<float*>(const_cast<void*>(c.in("lse", a->lse, per_query * 4)));
  if (varlen) {
    g.cu_seqlens_q = static_cast<const std::int32_t*>(
        c.in("cu_seqlens_q", a->cu_seqlens_q, static_cast<std::size_t>(a->batch + 1) * 4));
    g.cu_seqlens_k = static_cast<const std::int32_t*>(
        c.in("cu_seqlens_k", a->cu_seqlens_k, static_cast<std::size_t>(a->batch + 1) * 4));
  }
  if (tk > 0)
    g.key_padding_mask = static_cast<const std::uint8_t*>(
        c.in("key_padding_mask", a->key_padding_mask, static_cast<std::size_t>(tk)));
  g.alibi_slopes = static_cast<const float*>(
      c.in("alibi_slopes", a->alibi_slopes, static_cast<std::size_t>(a->heads_q) * 4));
  g.sinks =
      static_cast<const float*>(c.in("sinks", a->sinks, static_cast<std::size_t>(a->heads_q) * 4));
  gb.dsinks =
      static_cast<float*>(c.out("dsinks", b->dsinks, static_cast<std::size_t>(a->heads_q) * 4));
  const sa_status r = s->inner->attention_backward(s->inner->ctx, &gb);
  c.finish();
  return r;
}

sa_status t_merge_attention(void* ctx, std::int64_t rows, std::int64_t dv, const float* o_a,
                            const float* lse_a, const float* o_b, const float* lse_b, float* out,
                            float* out_lse) {
  State* s = st(ctx);
  // kernel.h documents out/out_lse aliasing a/lse_a; other overlaps are not allowed: passed
  // through.
  if (rows <= 0 || dv <= 0 || out == o_b || out_lse == lse_b || (out == o_a) != (out_lse == lse_a))
    return s->inner->merge_attention_states(s->inner->ctx, rows, dv, o_a, lse_a, o_b, lse_b, out,
                                            out_lse);
  State::Call c(s, "merge_attention_states", "float32");
  const std::size_t ob = static_cast<std::size_t>(rows * dv) * 4,
                    lb = static_cast<std::size_t>(rows) * 4;
  const bool alias = out == o_a;  // then out_lse == lse_a too: shared mappings keep the aliasing
  std::vector<float> a_copy, la_copy;  // the a part before the call, for the NaN check
  if (alias && o_a && lse_a) {
    a_copy.assign(o_a, o_a + rows * dv);
    la_copy.assign(lse_a, lse_a + rows);
  }
  auto* go = static_cast<float*>(c.out(alias ? "o_a/out (aliased)" : "out", out, ob));
  auto* gl = static_cast<float*>(c.out(alias ? "lse_a/out_lse (aliased)" : "out_lse", out_lse, lb));
  auto* ga = alias ? go : static_cast<const float*>(c.in("o_a", o_a, ob));
  auto* gla = alias ? gl : static_cast<const float*>(c.in("lse_a", lse_a, lb));
  auto* gb = static_cast<const float*>(c.in("o_b", o_b, ob));
  auto* glb = static_cast<const float*>(c.in("lse_b", lse_b, lb));
  const sa_status r =
      s->inner->merge_attention_states(s->inner->ctx, rows, dv, ga, gla, gb, glb, go, gl);
  c.finish();
  if (alias && o_a && lse_a) o_a = a_copy.data(), lse_a = la_copy.data();
  if (r == SA_OK && s->options.check_nan && o_a && o_b && lse_a && lse_b && out && out_lse)
    for (std::int64_t i = 0; i < rows; ++i) {
      const bool ok_in = all_finite(SA_F32, o_a + i * dv, 1, dv, dv) &&
                         all_finite(SA_F32, o_b + i * dv, 1, dv, dv) && !std::isnan(lse_a[i]) &&
                         !std::isnan(lse_b[i]) && lse_a[i] != INFINITY && lse_b[i] != INFINITY;
      if (!ok_in) continue;
      bool nan = std::isnan(out_lse[i]);
      for (std::int64_t j = 0; j < dv && !nan; ++j) nan = std::isnan(out[i * dv + j]);
      if (nan) {
        s->incident("nan_output", "merge_attention_states", "float32",
                    "row " + std::to_string(i) +
                        ": merged output is NaN although both parts are finite (lse may be -inf: "
                        "kernel.h says such a part contributes nothing)");
        break;
      }
    }
  return r;
}

// The names of the n-way merge's part buffers: stable storage, since a guarded
// buffer keeps its name's pointer for the fault handler.
const char* part_name(bool is_lse, std::int64_t p) {
  static std::deque<std::string> names[2];
  auto& v = names[is_lse ? 1 : 0];
  while (static_cast<std::int64_t>(v.size()) <= p)
    v.push_back((is_lse ? "lse[" : "o[") + std::to_string(v.size()) + "]");
  return v[static_cast<std::size_t>(p)].c_str();
}

sa_status t_merge_attention_n(void* ctx, std::int64_t parts, std::int64_t rows, std::int64_t dv,
                              const float* const* o, const float* const* lse, float* out,
                              float* out_lse) {
  State* s = st(ctx);
  if (parts < 1 || parts > 4096 || rows <= 0 || dv <= 0 || !o || !lse)
    return s->inner->merge_attention_states_n(s->inner->ctx, parts, rows, dv, o, lse, out, out_lse);
  State::Call c(s, "merge_attention_states_n", "float32");
  const std::size_t ob = static_cast<std::size_t>(rows * dv) * 4,
                    lb = static_cast<std::size_t>(rows) * 4;
  // Every part in its own guarded mapping, and the two pointer arrays too.
  std::vector<const float*> go(static_cast<std::size_t>(parts)), gl(go.size());
  for (std::int64_t p = 0; p < parts; ++p) {
    go[static_cast<std::size_t>(p)] =
        static_cast<const float*>(c.in(part_name(false, p), o[p], ob));
    gl[static_cast<std::size_t>(p)] =
        static_cast<const float*>(c.in(part_name(true, p), lse[p], lb));
  }
  auto* gpo = static_cast<const float* const*>(
      c.in("o (part pointers)", go.data(), go.size() * sizeof(float*)));
  auto* gpl = static_cast<const float* const*>(
      c.in("lse (part pointers)", gl.data(), gl.size() * sizeof(float*)));
  auto* gout = static_cast<float*>(c.out("out", out, ob));
  auto* glse = static_cast<float*>(c.out("out_lse", out_lse, lb));
  const sa_status r =
      s->inner->merge_attention_states_n(s->inner->ctx, parts, rows, dv, gpo, gpl, gout, glse);
  c.finish();
  if (r == SA_OK && s->options.check_nan && out && out_lse)
    for (std::int64_t i = 0; i < rows; ++i) {
      bool ok_in = true;
      for (std::int64_t p = 0; p < parts && ok_in; ++p)
        ok_in = o[p] && lse[p] && all_finite(SA_F32, o[p] + i * dv, 1, dv, dv) &&
                !std::isnan(lse[p][i]) && lse[p][i] != INFINITY;
      if (!ok_in) continue;
      bool nan = std::isnan(out_lse[i]);
      for (std::int64_t j = 0; j < dv && !nan; ++j) nan = std::isnan(out[i * dv + j]);
      if (nan) {
        s->incident("nan_output", "merge_attention_states_n", "float32",
                    "row " + std::to_string(i) +
                        ": merged output is NaN although every part is finite (lse may be -inf: "
                        "kernel.h says such a part contributes nothing)");
        break;
      }
    }
  return r;
}

// A call of an op the gate no longer makes (it crashed or hung earlier in
// this run): answered without the kernel.
template <class... A>
sa_status t_refused(void* ctx, A...) {
  st(ctx)->refused_last = true;
  return SA_INTERNAL_ERROR;
}

const char* t_last_error(void* ctx) {
  State* s = st(ctx);
  if (s->refused_last)
    return "not called: this operation crashed or hung earlier in this run, so the gate "
           "answers it itself (the gate.no_crash, gate.in_bounds or gate.no_hang verdict has the "
           "input)";
  return s->inner->last_error ? s->inner->last_error(s->inner->ctx) : nullptr;
}

}  // namespace

void set_call_box(CallBox* box) { g_box = box; }

FpState read_fp_state() {
  FpState st;
  st.round = std::fegetround();
#if defined(__x86_64__) || defined(__i386__)
  st.csr = _mm_getcsr();
#endif
  return st;
}

void restore_default_fp_env() {
  std::fesetenv(FE_DFL_ENV);
#if defined(__x86_64__) || defined(__i386__)
  _mm_setcsr(0x1f80u);
#endif
}

void set_remote_fp(const FpState* state) { g_remote_fp = state; }

void use_arena(void* base, std::size_t bytes, std::size_t reserved) {
  g_arena = static_cast<unsigned char*>(base);
  g_arena_bytes = base ? bytes : 0;
  g_arena_start = g_arena_top = base ? reserved : 0;
  g_live.clear();
}

bool in_arena(const void* p) {
  const auto* c = static_cast<const unsigned char*>(p);
  return g_arena && c >= g_arena && c < g_arena + g_arena_bytes;
}

std::vector<BufferRange> live_buffers() {
  std::vector<BufferRange> out;
  out.reserve(g_live.size());
  for (const Guarded* g : g_live) out.push_back(g->range());
  return out;
}

struct ArenaInputs::Impl {
  std::vector<std::unique_ptr<Guarded>> bufs;
};
ArenaInputs::ArenaInputs() : impl_(std::make_unique<Impl>()) {}
ArenaInputs::~ArenaInputs() = default;
const void* ArenaInputs::add(const char* name, const void* src, std::size_t bytes) {
  impl_->bufs.push_back(std::make_unique<Guarded>(name, src, bytes, true));
  return impl_->bufs.back()->data();
}

void register_fault_regions(const BufferRange* ranges, std::size_t count) {
  clear_fault_regions();
  for (std::size_t i = 0; i < count; ++i) {
    Region* r = claim_region();
    if (!r) return;
    set_region_name(r, ranges[i].name);
    r->map_begin = ranges[i].map_begin;
    r->map_end = ranges[i].map_end;
    r->data_begin = ranges[i].data_begin;
    r->data_end = ranges[i].data_end;
    r->page = ranges[i].guard;
    r->live_begin = ranges[i].live_begin;
    r->read_only = ranges[i].read_only;
  }
}

void clear_fault_regions() {
  for (auto& r : g_regions) r.used.store(false);
}

void install_fault_handler() {
  static std::vector<char> alt(1 << 16);
  stack_t ss{};
  ss.ss_sp = alt.data();
  ss.ss_size = alt.size();
  sigaltstack(&ss, nullptr);
  struct sigaction sa {};
  sa.sa_sigaction = fault_handler;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, nullptr);
  sigaction(SIGBUS, &sa, nullptr);
}

GuardedKernel::GuardedKernel(const Kernel& inner, GuardOptions options, Report report)
    : state_(std::make_unique<State>()) {
  const sa_kernel& k = inner.raw();
  state_->inner = &k;
  state_->keep.push_back(inner);
  state_->options = options;
  state_->report = std::move(report);
  if (k.memory != SA_MEMORY_HOST) {  // device buffers: nothing to guard here
    wrapped_ = std::make_unique<Kernel>(inner);
    return;
  }
  // A version 1 kernel's descriptor ends at SA_KERNEL_V1_SIZE: copy only
  // that much (the version 2 fields stay zero and are never read).
  std::memset(&state_->outer, 0, sizeof state_->outer);
  std::memcpy(&state_->outer, &k, inner.abi_version() >= 2 ? sizeof(sa_kernel) : SA_KERNEL_V1_SIZE);
  state_->outer.ctx = state_.get();
  state_->outer.last_error = t_last_error;
  refuse({});
  wrapped_ = std::make_unique<Kernel>(&state_->outer, inner.origin());
}

void GuardedKernel::refuse(const std::set<Op>& ops) {
  State& s = *state_;
  s.refused = ops;
  if (s.inner->memory != SA_MEMORY_HOST) return;  // not wrapped
  const sa_kernel& k = *s.inner;
  sa_kernel& o = s.outer;
  auto pick = [&](Op op, auto inner_fn, auto guarded, auto& slot) {
    using F = std::remove_reference_t<decltype(slot)>;
    if (!inner_fn)
      slot = nullptr;
    else if (ops.count(op))
      slot = static_cast<F>(t_refused);
    else
      slot = guarded;
  };
  pick(Op::softmax, k.softmax, t_softmax, o.softmax);
  pick(Op::log_softmax, k.log_softmax, t_log_softmax, o.log_softmax);
  pick(Op::logsumexp, k.logsumexp, t_logsumexp, o.logsumexp);
  pick(Op::entropy, k.entropy, t_entropy, o.entropy);
  pick(Op::adaptive_softmax, k.adaptive_softmax, t_adaptive, o.adaptive_softmax);
  pick(Op::attention, k.attention, t_attention, o.attention);
  pick(Op::merge_entropy_states, k.merge_entropy_states, t_merge_entropy, o.merge_entropy_states);
  pick(Op::merge_attention_states, k.merge_attention_states, t_merge_attention,
       o.merge_attention_states);
  if (k.abi_version >= 2) {
    pick(Op::attention_v2, k.attention_v2, t_attention_v2, o.attention_v2);
    pick(Op::merge_attention_states_n, k.merge_attention_states_n, t_merge_attention_n,
         o.merge_attention_states_n);
    pick(Op::softmax_backward, k.softmax_backward, t_softmax_backward, o.softmax_backward);
    pick(Op::log_softmax_backward, k.log_softmax_backward, t_log_softmax_backward,
         o.log_softmax_backward);
    pick(Op::attention_backward, k.attention_backward, t_attention_backward, o.attention_backward);
  }
}

GuardedKernel::~GuardedKernel() = default;

}  // namespace sa::gate
