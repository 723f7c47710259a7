#include "gate/host.hpp"
#include "kernels/attention_v2_args.hpp"

#include <fcntl.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <deque>
#include <optional>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__aarch64__)
#include <linux/audit.h>
#endif

#include "gate/child.hpp"

namespace sa::gate {

namespace {

// ------------------------------------------------------------ wire format --
// Every message is one SOCK_SEQPACKET packet of a fixed type and size.
constexpr std::uint32_t kRequestMagic = 0x5341'5251u;  // "SARQ"
constexpr std::uint32_t kReplyMagic = 0x5341'5250u;    // "SARP"
constexpr std::uint32_t kHelloMagic = 0x5341'4845u;    // "SAHE"

struct Request {
  std::uint32_t magic;
  std::uint32_t op;  // static_cast<int>(Op)
  std::uint64_t seq;
  std::uint64_t w[12];    // the call's arguments after ctx, as machine words
  std::uint32_t nranges;  // entries of the buffer table at the arena's start
  std::uint32_t pad;
};

// One entry of the buffer table (the host copies it before using it).
struct WireRange {
  std::uint64_t map_begin, map_end, data_begin, data_end, guard;
  std::uint64_t live_begin;  // sparse buffers: the first accessible byte (BufferRange)
  std::uint32_t read_only;
  char name[44];
};

struct Reply {
  std::uint32_t magic;
  std::uint32_t status;  // sa_status
  std::uint64_t seq;
  std::int64_t pid;  // the process that answered
  std::int32_t round;
  std::uint32_t csr;
  std::uint32_t has_error;  // last_error gave text
  char error[2048];
};

constexpr int kMaxHeadDims = 256;
struct Hello {
  std::uint32_t magic;
  std::int64_t pid;
  std::uint32_t failed;  // 1: error holds why the kernel could not be opened
  std::uint32_t abi, ops, dtypes;
  std::int32_t memory, adaptive_entropy;
  std::uint32_t fns;  // bit k: the function of all_interface_ops[k] is set
  std::uint32_t has_caps;
  sa_capabilities caps;  // head_dims below
  std::int32_t n_head_dims;
  std::int32_t head_dims[kMaxHeadDims];
  char name[512];
  char description[4096];
  char error[4096];
};

constexpr std::size_t kTableBytes = 4u << 20;  // the buffer table: ~43,000 buffers
constexpr std::size_t kMaxRanges = kTableBytes / sizeof(WireRange);

std::uintptr_t page_floor(std::uintptr_t a) {
  static const std::uintptr_t P = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  return a / P * P;
}
// The first byte of a buffer the host makes accessible for a call: past the
// guard region, or for a sparse buffer the page of its first live byte.
std::uintptr_t accessible_begin(const WireRange& w) {
  return w.live_begin ? page_floor(w.live_begin) : w.map_begin + w.guard;
}

void copy_text(char* dst, std::size_t cap, const char* src) {
  std::size_t i = 0;
  for (; src && src[i] && i + 1 < cap; ++i) dst[i] = src[i];
  dst[i] = '\0';
}
std::string text_of(const char* s, std::size_t cap) { return std::string(s, strnlen(s, cap)); }

const char* dtype_text(sa_dtype t) {
  switch (t) {
    case SA_F32:
      return "float32";
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

bool send_packet(int fd, const void* p, std::size_t n) {
  for (;;) {
    const ssize_t r = send(fd, p, n, MSG_NOSIGNAL);
    if (r >= 0) return static_cast<std::size_t>(r) == n;
    if (errno != EINTR) return false;
  }
}

// A printable excerpt of bytes that were not a message.
std::string excerpt(const unsigned char* p, std::size_t n) {
  std::string s;
  for (std::size_t i = 0; i < n && s.size() < 100; ++i)
    s += (p[i] >= 32 && p[i] < 127) ? static_cast<char>(p[i]) : '.';
  return s;
}

// --------------------------------------------------------- host hardening --
void close_other_descriptors(int keep_sock) {
  // The socket becomes descriptor 3; everything above it is closed.
  if (keep_sock != 3) {
    dup2(keep_sock, 3);
    close(keep_sock);
  }
#ifdef SYS_close_range
  if (syscall(SYS_close_range, 4u, ~0u, 0u) == 0) return;
#endif
  const long max = std::min(sysconf(_SC_OPEN_MAX), 65536L);
  for (long fd = 4; fd < max; ++fd) close(static_cast<int>(fd));
}

// No capabilities (CI runs as root; root could otherwise open the judge's
// /proc/PID/mem despite it being non-dumpable), no new privileges, and a
// seccomp filter refusing the calls that reach another process's memory.
void harden() {
  prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  for (int cap = 0; cap < 64; ++cap) prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  syscall(SYS_capset, &header, data);
#if defined(__x86_64__) || defined(__aarch64__)
#if defined(__x86_64__)
  constexpr std::uint32_t arch = AUDIT_ARCH_X86_64;
#else
  constexpr std::uint32_t arch = AUDIT_ARCH_AARCH64;
#endif
  constexpr std::uint32_t deny = SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA);
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, arch, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      // x32 system calls (the same calls with bit 30 set) are refused whole.
      BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 4, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_ptrace, 3, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_readv, 2, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_writev, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K, deny),
  };
  sock_fprog prog{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
  prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
#endif
}

// ------------------------------------------------- device kernels (host) --
// A call of a CUDA-memory kernel, in the kernel host. The judge lays the
// call out in the arena exactly as for a host-memory kernel (it never touches
// CUDA); here each buffer the call's arguments point into is copied to the
// device whole (canaries and the rest of its pages included, so that a small
// overrun on the device lands in a canary the judge checks), every pointer is
// rewritten to its device copy (the argument structures themselves stay in
// host memory, copied out of the arena, as sa::Kernel passes them), the
// kernel runs with the whole arena inaccessible, and afterwards every staged
// buffer, inputs included, is copied back into the arena: the judge compares
// the inputs with its own copies, so a kernel that wrote its device inputs is
// seen as one that wrote its host inputs. Part-pointer arrays (the n-way
// merge) hold device addresses on the device; they come back translated to
// the arena addresses, except entries the kernel changed.
class DeviceCall {
 public:
  DeviceCall(const DeviceMemory& dm, const std::vector<WireRange>& ranges,
             const unsigned char* lo_ok, const unsigned char* hi_ok)
      : dm_(dm) {
    for (const auto& w : ranges) {
      Buf b;
      b.lo = accessible_begin(w);
      b.hi = w.map_end - w.guard;
      // A sparse buffer's device copy spans it from its first page (its
      // pointers are relative to that); only its accessible pages are copied.
      b.base = w.live_begin ? page_floor(w.data_begin) : b.lo;
      if (b.base < reinterpret_cast<std::uintptr_t>(lo_ok) ||
          b.hi > reinterpret_cast<std::uintptr_t>(hi_ok) || b.lo >= b.hi)
        continue;
      bufs_.push_back(b);
    }
  }
  ~DeviceCall() {
    for (void* d : bytes_) dm_.free(d);
    for (auto& b : bufs_)
      if (b.dev) dm_.free(b.dev);
    for (auto& a : arrays_)
      if (a.dev) dm_.free(a.dev);
  }
  DeviceCall(const DeviceCall&) = delete;
  DeviceCall& operator=(const DeviceCall&) = delete;

  // Rewrites the call's words to device pointers and local argument
  // structures. Empty on success, else why the call cannot be made.
  std::string stage(Op op, Request& q) {
    protect(PROT_READ);
    std::string why;
    try {
      rewrite(op, q.w);
    } catch (const std::exception& e) {
      why = e.what();
    }
    protect(PROT_NONE);
    return why;
  }

  // Copies every staged buffer back into the arena. Empty on success.
  std::string fetch() {
    std::string why;
    try {
      for (auto& b : bufs_) {
        if (!b.dev || b.pointers) continue;
        mprotect(reinterpret_cast<void*>(b.lo), b.hi - b.lo, PROT_READ | PROT_WRITE);
        dm_.to_host(reinterpret_cast<void*>(b.lo),
                    static_cast<unsigned char*>(b.dev) + (b.lo - b.base), b.hi - b.lo);
        mprotect(reinterpret_cast<void*>(b.lo), b.hi - b.lo, PROT_NONE);
      }
      for (auto& a : arrays_) {
        std::vector<std::uint64_t> now(a.moved.size());
        dm_.to_host(now.data(), a.dev, now.size() * sizeof now[0]);
        bool changed = false;
        for (std::size_t i = 0; i < now.size(); ++i) {
          if (now[i] == a.moved[i]) now[i] = a.orig[i];
          changed = changed || now[i] != a.orig[i];
        }
        if (!changed) continue;
        mprotect(reinterpret_cast<void*>(a.page), a.page_end - a.page, PROT_READ | PROT_WRITE);
        std::memcpy(reinterpret_cast<void*>(a.at), now.data(), now.size() * sizeof now[0]);
        mprotect(reinterpret_cast<void*>(a.page), a.page_end - a.page, PROT_NONE);
      }
    } catch (const std::exception& e) {
      why = e.what();
    }
    return why;
  }

 private:
  struct Buf {
    std::uintptr_t lo = 0, hi = 0;  // the accessible pages (canaries and data)
    std::uintptr_t base = 0;        // where the device copy starts (lo, or a sparse buffer's start)
    void* dev = nullptr;            // the device copy, once a pointer into it was staged
    bool pointers = false;          // a part-pointer array: staged translated (arrays_)
  };
  struct PointerArray {
    std::uintptr_t at = 0, page = 0, page_end = 0;
    std::vector<std::uint64_t> orig, moved;  // arena addresses, device addresses
    void* dev = nullptr;
  };

  void protect(int prot) {
    for (const auto& b : bufs_) mprotect(reinterpret_cast<void*>(b.lo), b.hi - b.lo, prot);
  }
  Buf* find(std::uintptr_t a) {
    for (auto& b : bufs_)
      if (a >= b.base && a <= b.hi) return &b;
    return nullptr;
  }
  // The device address of arena address p (its buffer staged on first use;
  // one byte more than its pages, so that the end of a buffer of no bytes is
  // still inside the allocation). Null stays null. A pointer the guard left
  // outside the arena (a buffer of no elements, or arguments it could not
  // size, which the kernel should refuse) becomes a device pointer to one
  // byte, as sa::Kernel stages a buffer of no bytes: never a host address.
  void* tr(const void* p) {
    if (!p) return nullptr;
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    Buf* b = find(a);
    if (b && b->pointers) return const_cast<void*>(p);
    if (!b) return bytes_.emplace_back(dm_.alloc(1));
    if (!b->dev) {
      b->dev = dm_.alloc(b->hi - b->base + 1);
      dm_.to_device(static_cast<unsigned char*>(b->dev) + (b->lo - b->base),
                    reinterpret_cast<const void*>(b->lo), b->hi - b->lo);
    }
    return static_cast<unsigned char*>(b->dev) + (a - b->base);
  }
  template <class T>
  T* tr(T* p) {
    return static_cast<T*>(tr(static_cast<const void*>(p)));
  }
  // An argument structure, copied out of the arena into `into` (null when
  // p does not point at one whole structure there).
  template <class T>
  T* local(std::uint64_t word, T& into) {
    const auto a = static_cast<std::uintptr_t>(word);
    const Buf* b = a ? find(a) : nullptr;
    if (!b || a + sizeof(T) > b->hi) return nullptr;
    std::memcpy(&into, reinterpret_cast<const void*>(a), sizeof(T));
    return &into;
  }
  // An array of `n` part pointers: staged as an array of device pointers.
  const void* pointers(std::uint64_t word, std::int64_t n) {
    const auto a = static_cast<std::uintptr_t>(word);
    Buf* b = a ? find(a) : nullptr;
    if (!b || n <= 0) return reinterpret_cast<const void*>(a);
    const std::size_t count = std::min<std::size_t>(static_cast<std::size_t>(n), (b->hi - a) / 8);
    b->pointers = true;
    PointerArray& pa = arrays_.emplace_back();
    pa.at = a;
    pa.page = b->lo;
    pa.page_end = b->hi;
    pa.orig.resize(count);
    std::memcpy(pa.orig.data(), reinterpret_cast<const void*>(a), count * 8);
    for (std::uint64_t o : pa.orig)
      pa.moved.push_back(reinterpret_cast<std::uintptr_t>(tr(reinterpret_cast<const void*>(o))));
    pa.dev = dm_.alloc(count ? count * 8 : 1);
    if (count) dm_.to_device(pa.dev, pa.moved.data(), count * 8);
    return pa.dev;
  }
  static std::uint64_t W(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }
  static void* P(std::uint64_t w) {
    return reinterpret_cast<void*>(static_cast<std::uintptr_t>(w));
  }

  void stage_v2(sa_attention_v2_args& g) {
    g.cu_seqlens_q = tr(g.cu_seqlens_q);
    g.cu_seqlens_k = tr(g.cu_seqlens_k);
    g.q.data = tr(g.q.data);
    g.k.data = tr(g.k.data);
    g.v.data = tr(g.v.data);
    g.out = tr(g.out);
    g.lse = tr(g.lse);
    g.entropy = tr(g.entropy);
    g.beta = tr(g.beta);
    g.key_padding_mask = tr(g.key_padding_mask);
    g.alibi_slopes = tr(g.alibi_slopes);
    g.sinks = tr(g.sinks);
    g.seqused_k = tr(g.seqused_k);
    g.block_table = tr(g.block_table);
    g.attn_mask.data = tr(g.attn_mask.data);
    g.attn_bias.data = tr(g.attn_bias.data);
    g.block_mask.data = tr(g.block_mask.data);
    g.tree_mask.data = tr(g.tree_mask.data);
    g.q_scale.data = tr(g.q_scale.data);
    g.k_scale.data = tr(g.k_scale.data);
    g.v_scale.data = tr(g.v_scale.data);
    g.q_descale_bh = tr(g.q_descale_bh);
    g.k_descale_bh = tr(g.k_descale_bh);
    g.v_descale_bh = tr(g.v_descale_bh);
  }

  // The words of each op as gate/host.cpp's trampolines lay them out.
  void rewrite(Op op, std::uint64_t* w) {
    auto rows = [&] { w[1] = W(local(w[1], rows_)); };
    auto data = [&](int from, int to) {
      for (int i = from; i <= to; ++i) w[i] = W(tr(P(w[i])));
    };
    switch (op) {
      case Op::softmax:
      case Op::log_softmax:
      case Op::logsumexp:
        rows();
        data(2, 3);
        break;
      case Op::entropy:
      case Op::softmax_backward:
      case Op::log_softmax_backward:
        rows();
        data(2, 4);
        break;
      case Op::adaptive_softmax:
        rows();
        data(2, 5);
        break;
      case Op::attention:
        if (sa_attention_args* g = local(w[0], attention_)) {
          g->q = tr(g->q);
          g->k = tr(g->k);
          g->v = tr(g->v);
          g->out = tr(g->out);
          g->lse = tr(g->lse);
          g->entropy = tr(g->entropy);
          g->beta = tr(g->beta);
          g->key_mask = tr(g->key_mask);
          w[0] = W(g);
        } else {
          w[0] = 0;
        }
        break;
      case Op::merge_entropy_states:
        data(1, 3);
        break;
      case Op::merge_attention_states:
        data(2, 7);
        break;
      case Op::attention_v2:
        if (sa_attention_v2_args* g = local(w[0], v2_)) {
          stage_v2(*g);
          w[0] = W(g);
        } else {
          w[0] = 0;
        }
        break;
      case Op::attention_backward:
        if (sa_attention_backward_args* b = local(w[0], backward_)) {
          if (sa_attention_v2_args* g = local(W(b->forward), v2_)) {
            stage_v2(*g);
            b->forward = g;
          } else {
            b->forward = nullptr;
          }
          b->dout.data = tr(b->dout.data);
          b->dq.data = tr(b->dq.data);
          b->dk.data = tr(b->dk.data);
          b->dv.data = tr(b->dv.data);
          b->dsinks = tr(b->dsinks);
          w[0] = W(b);
        } else {
          w[0] = 0;
        }
        break;
      case Op::merge_attention_states_n: {
        const auto parts = static_cast<std::int64_t>(w[0]);
        const std::int64_t n = parts > 0 && parts <= 4096 ? parts : 0;
        w[3] = W(pointers(w[3], n));
        w[4] = W(pointers(w[4], n));
        data(5, 6);
        break;
      }
    }
  }

  const DeviceMemory& dm_;
  std::vector<Buf> bufs_;
  std::vector<void*> bytes_;  // one-byte allocations for pointers outside the arena
  std::deque<PointerArray> arrays_;
  sa_rows rows_{};
  sa_attention_args attention_{};
  sa_attention_v2_args v2_{};
  sa_attention_backward_args backward_{};
};

}  // namespace

// ================================================================= judge ==
struct KernelHost::Impl {
  const KernelSource& source;
  HostOptions opt;
  std::function<void(const HostEvent&)> on_event;
  std::function<void()> on_start;

  unsigned char* arena = nullptr;
  std::size_t arena_bytes = 0;
  CallBox* box = nullptr;  // shared with the host: its fault handler writes `fault`
  pid_t judge = 0;
  pid_t pid = -1;  // the current host, -1 when none
  int sock = -1;
  std::uint64_t seq = 0;
  bool broken = false;  // a restarted host could not open the kernel: no more hosts
  std::string broken_why;

  // The host's descriptor, as the judge presents it.
  sa_kernel k{};
  sa_capabilities caps{};
  std::vector<std::int32_t> head_dims;
  std::string name, description;
  std::optional<Kernel> kernel;

  std::string last_error;
  bool has_last_error = false;
  FpState fp;  // the state the last call ended in (set_remote_fp points here)

  Impl(const KernelSource& s, HostOptions o, std::function<void(const HostEvent&)> e,
       std::function<void()> st)
      : source(s), opt(o), on_event(std::move(e)), on_start(std::move(st)) {}

  ~Impl() {
    hear_strays();
    stop();
    end_spawner();
    use_arena(nullptr, 0, 0);
    set_remote_fp(nullptr);
    if (arena) munmap(arena, arena_bytes);
    if (box) munmap(box, sizeof(CallBox));
  }

  // Whether process `p` has a child that has not exited (zombies do not count).
  static bool has_live_children(pid_t p) {
    const std::string base = "/proc/" + std::to_string(p);
    FILE* f = std::fopen((base + "/task/" + std::to_string(p) + "/children").c_str(), "r");
    if (!f) return false;
    bool live = false;
    long child = 0;
    while (!live && std::fscanf(f, "%ld", &child) == 1) {
      FILE* st = std::fopen(("/proc/" + std::to_string(child) + "/stat").c_str(), "r");
      if (!st) continue;
      char text[512] = {};
      const std::size_t n = std::fread(text, 1, sizeof text - 1, st);
      std::fclose(st);
      const char* paren = std::strrchr(text, ')');
      live = n > 0 && paren && paren[1] == ' ' && paren[2] != 'Z' && paren[2] != 'X';
    }
    std::fclose(f);
    return live;
  }

  // Signal numbers of the host's children that have ended on a signal and
  // are not reaped (the host never waits for a process the kernel forked).
  // A copy of the host that fork() made inside a call can die before it
  // answers (measured: one run in five to ten on a loaded machine, SIGSEGV
  // in the copy); without this, that fork would go unseen. Reads
  // /proc/PID/stat's exit_code (field 52, Linux >= 3.5; readable by root or
  // a process allowed to trace the child).
  static std::vector<int> crashed_children(pid_t p) {
    std::vector<int> sigs;
    const std::string base = "/proc/" + std::to_string(p);
    FILE* f = std::fopen((base + "/task/" + std::to_string(p) + "/children").c_str(), "r");
    if (!f) return sigs;
    long child = 0;
    while (std::fscanf(f, "%ld", &child) == 1) {
      FILE* st = std::fopen(("/proc/" + std::to_string(child) + "/stat").c_str(), "r");
      if (!st) continue;
      char text[1024] = {};
      const std::size_t n = std::fread(text, 1, sizeof text - 1, st);
      std::fclose(st);
      const char* paren = n > 0 ? std::strrchr(text, ')') : nullptr;
      if (!paren || paren[1] != ' ' || paren[2] != 'Z') continue;
      // Fields after the command: state is field 3, exit_code field 52.
      const char* q = paren + 2;
      for (int field = 3; field < 52 && q; ++field) {
        q = std::strchr(q, ' ');
        if (q) ++q;
      }
      if (!q) continue;
      const long code = std::strtol(q, nullptr, 10);
      if ((code & 0x7f) != 0 && (code & 0x7f) != 0x7f)
        sigs.push_back(static_cast<int>(code & 0x7f));
    }
    std::fclose(f);
    return sigs;
  }

  // A copy of the host made by fork() inside a call answers once and exits
  // (host_main). On a loaded machine it may not have run yet when the run
  // ends: while the host has children, listen for up to a second more, so
  // that such a reply is seen (a gate.protocol event) and not killed unsaid.
  void hear_strays() {
    if (pid <= 0 || sock < 0) return;
    const double until = steady_seconds() + 1.0;
    // After listening: a copy that died before it could answer.
    struct Report {
      Impl* self;
      ~Report() {
        for (int sig : crashed_children(self->pid))
          self->protocol("", "",
                         "a process the kernel forked inside a call died of signal " +
                             std::to_string(sig) + " (" + strsignal(sig) +
                             "); a kernel call must not fork a copy of the process that "
                             "calls it");
      }
    } report{this};
    std::vector<unsigned char> buf(sizeof(Reply) + 1);
    for (;;) {
      // What is already there first; then wait while a copy may still answer.
      pollfd pf{sock, POLLIN, 0};
      if (poll(&pf, 1, 0) <= 0) {
        if (steady_seconds() >= until || !has_live_children(pid)) {
          if (poll(&pf, 1, 0) <= 0) return;  // a copy that just ended sent first
        } else if (poll(&pf, 1, 20) <= 0) {
          continue;
        }
      }
      const ssize_t got = recv(sock, buf.data(), buf.size(), MSG_DONTWAIT);
      if (got == 0) return;
      if (got < 0) continue;
      Reply r{};
      if (static_cast<std::size_t>(got) == sizeof r) std::memcpy(&r, buf.data(), sizeof r);
      if (static_cast<std::size_t>(got) != sizeof r || r.magic != kReplyMagic)
        protocol("", "",
                 "a message from the kernel's process after its last call (" + std::to_string(got) +
                     " bytes: \"" + excerpt(buf.data(), static_cast<std::size_t>(got)) + "\")");
      else if (r.pid != pid)
        protocol("", "",
                 "a reply from process " + std::to_string(r.pid) +
                     ", not from the kernel's process " + std::to_string(pid) +
                     " (the kernel called fork(), and the copy answered too)");
      else
        protocol("", "", "a reply from the kernel's process after its last call");
    }
  }

  void stop() {
    if (sock >= 0) close(sock);
    sock = -1;
    if (pid > 0) {
      kill_group(pid);
      while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
    pid = -1;
    if (opt.gate_box) opt.gate_box->host_pid = 0;
  }

  void make_arena() {
    // Address space only (NORESERVE): pages exist once the judge writes them.
    // 64 GiB: a large-offset call's two sparse float32 page pools, each
    // behind a reservation as large as itself, take about 32 GiB of it
    // (attention_v2.large_offsets; gate/guard.cpp).
    for (std::size_t bytes = std::size_t(64) << 30; bytes >= (std::size_t(256) << 20); bytes /= 2) {
      void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (m != MAP_FAILED) {
        arena = static_cast<unsigned char*>(m);
        arena_bytes = bytes;
        break;
      }
    }
    if (!arena) throw std::runtime_error("gate: cannot map the memory shared with the kernel host");
    void* b =
        mmap(nullptr, sizeof(CallBox), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (b == MAP_FAILED) throw std::runtime_error("gate: cannot map the kernel host's call box");
    box = static_cast<CallBox*>(b);
    use_arena(arena, arena_bytes, kTableBytes);
  }

  // ------------------------------------------------------- the host side --
  [[noreturn]] void host_main(int fd) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != judge) _exit(3);  // the judge died before the line above
    signal(SIGPIPE, SIG_DFL);
    dup2(STDERR_FILENO, STDOUT_FILENO);  // nothing the kernel prints reaches the gate's stdout
    if (const int null = open("/dev/null", O_RDONLY); null >= 0) {
      dup2(null, STDIN_FILENO);
      if (null != STDIN_FILENO) close(null);
    }
    close_other_descriptors(fd);
    fd = 3;
    if (opt.gate_box) munmap(opt.gate_box, sizeof(CallBox));
    harden();
    mprotect(arena, arena_bytes, PROT_NONE);
    mprotect(arena, kTableBytes, PROT_READ);
    install_fault_handler();
    set_call_box(box);
    restore_default_fp_env();

    auto hello = std::make_unique<Hello>();
    std::memset(hello.get(), 0, sizeof *hello);
    hello->magic = kHelloMagic;
    hello->pid = getpid();
    std::optional<Kernel> opened;
    try {
      opened.emplace(source.open());
    } catch (const std::exception& e) {
      hello->failed = 1;
      copy_text(hello->error, sizeof hello->error, e.what());
      send_packet(fd, hello.get(), sizeof *hello);
      _exit(0);
    }
    const sa_kernel& r = opened->raw();
    const std::uint32_t abi = opened->abi_version();
    // A device kernel's buffers are staged here, through the CUDA runtime
    // of this process (the judge never initialises CUDA: a context does not
    // survive fork, and the judge forks every host).
    const bool device = r.memory == SA_MEMORY_CUDA;
    const DeviceMemory* dm = nullptr;
    if (device) {
      dm = &device_memory();
      if (!dm->alloc) {
        hello->failed = 1;
        copy_text(
            hello->error, sizeof hello->error,
            ("kernel '" + opened->name() +
             "' works on CUDA device memory, but no CUDA device is usable in the kernel's "
             "process (" +
             std::string(dm->why_unavailable ? dm->why_unavailable() : "no CUDA device") + ")")
                .c_str());
        send_packet(fd, hello.get(), sizeof *hello);
        _exit(0);
      }
    }
    hello->abi = abi;
    hello->ops = r.ops;
    hello->dtypes = r.dtypes;
    hello->memory = r.memory;
    hello->adaptive_entropy = r.adaptive_entropy;
    copy_text(hello->name, sizeof hello->name, r.name);
    copy_text(hello->description, sizeof hello->description, r.description);
    std::uint32_t fns = 0;
    auto has = [&](Op op, const void* f) {
      if (f) fns |= 1u << static_cast<int>(op);
    };
    has(Op::softmax, reinterpret_cast<const void*>(r.softmax));
    has(Op::log_softmax, reinterpret_cast<const void*>(r.log_softmax));
    has(Op::logsumexp, reinterpret_cast<const void*>(r.logsumexp));
    has(Op::entropy, reinterpret_cast<const void*>(r.entropy));
    has(Op::adaptive_softmax, reinterpret_cast<const void*>(r.adaptive_softmax));
    has(Op::attention, reinterpret_cast<const void*>(r.attention));
    has(Op::merge_entropy_states, reinterpret_cast<const void*>(r.merge_entropy_states));
    has(Op::merge_attention_states, reinterpret_cast<const void*>(r.merge_attention_states));
    if (abi >= 2) {
      has(Op::attention_v2, reinterpret_cast<const void*>(r.attention_v2));
      has(Op::softmax_backward, reinterpret_cast<const void*>(r.softmax_backward));
      has(Op::log_softmax_backward, reinterpret_cast<const void*>(r.log_softmax_backward));
      has(Op::attention_backward, reinterpret_cast<const void*>(r.attention_backward));
      has(Op::merge_attention_states_n, reinterpret_cast<const void*>(r.merge_attention_states_n));
      if (r.capabilities) {
        const sa_capabilities& c = *r.capabilities;
        const std::size_t n =
            c.struct_size > 0 && c.struct_size < sizeof c ? c.struct_size : sizeof c;
        std::memcpy(&hello->caps, &c, n);
        hello->caps.head_dims = nullptr;
        hello->has_caps = 1;
        if (c.head_dims && c.num_head_dims > 0) {
          hello->n_head_dims = std::min(c.num_head_dims, kMaxHeadDims);
          std::memcpy(hello->head_dims, c.head_dims,
                      static_cast<std::size_t>(hello->n_head_dims) * sizeof(std::int32_t));
        }
      }
    }
    hello->fns = fns;
    if (!send_packet(fd, hello.get(), sizeof *hello)) _exit(0);

    const pid_t self = getpid();
    std::vector<WireRange> ranges;
    std::vector<BufferRange> regions;
    auto reply = std::make_unique<Reply>();
    for (;;) {
      Request q{};
      const ssize_t got = recv(fd, &q, sizeof q, 0);
      if (got < 0 && errno == EINTR) continue;
      if (got != static_cast<ssize_t>(sizeof q) || q.magic != kRequestMagic) _exit(0);
      const std::size_t n = std::min<std::size_t>(q.nranges, kMaxRanges);
      const auto* table = reinterpret_cast<const WireRange*>(arena);
      ranges.assign(table, table + n);
      regions.resize(n);
      auto protect = [&](int prot_in, int prot_out) {
        for (const auto& w : ranges) {
          const auto* lo = reinterpret_cast<unsigned char*>(accessible_begin(w));
          const auto* hi = reinterpret_cast<unsigned char*>(w.map_end - w.guard);
          if (lo < arena + kTableBytes || hi > arena + arena_bytes || lo >= hi) continue;
          mprotect(const_cast<unsigned char*>(lo), static_cast<std::size_t>(hi - lo),
                   w.read_only ? prot_in : prot_out);
        }
      };
      for (std::size_t i = 0; i < n; ++i) {
        ranges[i].name[sizeof ranges[i].name - 1] = '\0';
        regions[i].map_begin = ranges[i].map_begin;
        regions[i].map_end = ranges[i].map_end;
        regions[i].data_begin = ranges[i].data_begin;
        regions[i].data_end = ranges[i].data_end;
        regions[i].guard = ranges[i].guard;
        regions[i].live_begin = ranges[i].live_begin;
        regions[i].read_only = ranges[i].read_only != 0;
        regions[i].name = ranges[i].name;
      }
      sa_status st = SA_INTERNAL_ERROR;
      FpState after;
      const char* err = nullptr;
      std::string err_text;
      if (!device) {
        register_fault_regions(regions.data(), regions.size());
        protect(PROT_READ, PROT_READ | PROT_WRITE);
        restore_default_fp_env();
        st = dispatch(r, abi, q);
        after = read_fp_state();
        err = st != SA_OK && r.last_error ? r.last_error(r.ctx) : nullptr;
        protect(PROT_NONE, PROT_NONE);
        clear_fault_regions();
      } else {
        // The kernel gets device copies; the arena stays inaccessible while it runs.
        DeviceCall dc(*dm, ranges, arena + kTableBytes, arena + arena_bytes);
        Request staged = q;
        const std::string not_staged = dc.stage(static_cast<Op>(q.op), staged);
        if (!not_staged.empty()) {
          after = read_fp_state();
          err_text = "not called: staging its buffers to the device failed (" + not_staged + ")";
        } else {
          restore_default_fp_env();
          st = dispatch(r, abi, staged);
          after = read_fp_state();
          if (const char* e = st != SA_OK && r.last_error ? r.last_error(r.ctx) : nullptr)
            err_text = e;
          const bool had_error = st != SA_OK;
          if (const std::string lost = dc.fetch(); !lost.empty()) {
            err_text = "the call returned status " + std::to_string(static_cast<int>(st)) +
                       ", but copying its buffers back from the device failed (" + lost + ")" +
                       (had_error && !err_text.empty() ? ": " + err_text : "");
            st = SA_INTERNAL_ERROR;
          }
        }
        if (st != SA_OK && !err_text.empty()) err = err_text.c_str();
      }
      std::memset(reply.get(), 0, sizeof *reply);
      reply->magic = kReplyMagic;
      reply->status = static_cast<std::uint32_t>(st);
      reply->seq = q.seq;
      reply->pid = getpid();
      reply->round = after.round;
      reply->csr = after.csr;
      reply->has_error = err != nullptr;
      copy_text(reply->error, sizeof reply->error, err);
      if (!send_packet(fd, reply.get(), sizeof *reply)) _exit(0);
      // A copy made by fork() inside the call answers once (the judge sees
      // a reply from another process) and never takes a request.
      if (getpid() != self) _exit(0);
    }
  }

  static sa_status dispatch(const sa_kernel& r, std::uint32_t abi, const Request& q) {
    const auto* w = q.w;
    auto p = [&](int i) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(w[i])); };
    auto i64 = [&](int i) { return static_cast<std::int64_t>(w[i]); };
    auto dt = [&](int i) { return static_cast<sa_dtype>(static_cast<int>(w[i])); };
    const Op op = static_cast<Op>(q.op);
    const bool v2 = abi >= 2;
    using Rows = const sa_rows*;
    switch (op) {
      case Op::softmax:
        if (r.softmax) return r.softmax(r.ctx, dt(0), static_cast<Rows>(p(1)), p(2), p(3));
        break;
      case Op::log_softmax:
        if (r.log_softmax) return r.log_softmax(r.ctx, dt(0), static_cast<Rows>(p(1)), p(2), p(3));
        break;
      case Op::logsumexp:
        if (r.logsumexp)
          return r.logsumexp(r.ctx, dt(0), static_cast<Rows>(p(1)), p(2),
                             static_cast<float*>(p(3)));
        break;
      case Op::entropy:
        if (r.entropy)
          return r.entropy(r.ctx, dt(0), static_cast<Rows>(p(1)), p(2), static_cast<float*>(p(3)),
                           static_cast<sa_entropy_state*>(p(4)));
        break;
      case Op::adaptive_softmax:
        if (r.adaptive_softmax)
          return r.adaptive_softmax(r.ctx, dt(0), static_cast<Rows>(p(1)), p(2), p(3),
                                    static_cast<float*>(p(4)), static_cast<float*>(p(5)));
        break;
      case Op::attention:
        if (r.attention) return r.attention(r.ctx, static_cast<const sa_attention_args*>(p(0)));
        break;
      case Op::merge_entropy_states:
        if (r.merge_entropy_states)
          return r.merge_entropy_states(r.ctx, i64(0), static_cast<const sa_entropy_state*>(p(1)),
                                        static_cast<const sa_entropy_state*>(p(2)),
                                        static_cast<sa_entropy_state*>(p(3)));
        break;
      case Op::merge_attention_states:
        if (r.merge_attention_states)
          return r.merge_attention_states(r.ctx, i64(0), i64(1), static_cast<const float*>(p(2)),
                                          static_cast<const float*>(p(3)),
                                          static_cast<const float*>(p(4)),
                                          static_cast<const float*>(p(5)),
                                          static_cast<float*>(p(6)), static_cast<float*>(p(7)));
        break;
      case Op::attention_v2:
        if (v2 && r.attention_v2)
          return r.attention_v2(r.ctx, static_cast<const sa_attention_v2_args*>(p(0)));
        break;
      case Op::softmax_backward:
        if (v2 && r.softmax_backward)
          return r.softmax_backward(r.ctx, dt(0), static_cast<Rows>(p(1)), p(2), p(3), p(4));
        break;
      case Op::log_softmax_backward:
        if (v2 && r.log_softmax_backward)
          return r.log_softmax_backward(r.ctx, dt(0), static_cast<Rows>(p(1)), p(2), p(3), p(4));
        break;
      case Op::attention_backward:
        if (v2 && r.attention_backward)
          return r.attention_backward(r.ctx, static_cast<const sa_attention_backward_args*>(p(0)));
        break;
      case Op::merge_attention_states_n:
        if (v2 && r.merge_attention_states_n)
          return r.merge_attention_states_n(r.ctx, i64(0), i64(1), i64(2),
                                            static_cast<const float* const*>(p(3)),
                                            static_cast<const float* const*>(p(4)),
                                            static_cast<float*>(p(5)), static_cast<float*>(p(6)));
        break;
    }
    return SA_INTERNAL_ERROR;
  }

  // ------------------------------------------------------ the judge side --
  // How the current host ended (it is gone, or about to be reaped).
  std::string reap(bool kill_it) {
    if (kill_it) kill_group(pid);
    int status = 0;
    pid_t w;
    // Give a dying host a moment to end on its own before it is killed.
    for (int i = 0; i < 200 && !kill_it; ++i) {
      w = waitpid(pid, &status, WNOHANG);
      if (w == pid) goto reaped;
      usleep(10000);
    }
    kill_group(pid);
    while ((w = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
    }
  reaped:
    kill_group(pid);  // helpers the kernel forked, still in the group
    close(sock);
    sock = -1;
    pid = -1;
    if (opt.gate_box) opt.gate_box->host_pid = 0;
    ChildEnd end;
    end.exited = WIFEXITED(status);
    end.status = end.exited ? WEXITSTATUS(status) : WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    return end.describe();
  }

  enum class Wait { ok, died, hung };

  // Waits for one packet of `size` bytes with `magic` (and, for replies,
  // this seq) from the current host. Anything else on the socket is a
  // protocol event, ignored.
  Wait receive(void* out, std::size_t size, std::uint32_t magic, bool is_reply, double& waited,
               const std::string& op, const std::string& dtype) {
    std::vector<unsigned char> buf(std::max<std::size_t>(size, 16384) + 1);
    const double start = steady_seconds();
    bool eof = false;
    for (;;) {
      waited = steady_seconds() - start;
      const double left = opt.call_timeout_s - waited;
      if (left <= 0) return Wait::hung;
      if (!eof) {
        pollfd pf{sock, POLLIN, 0};
        const int r = poll(&pf, 1, static_cast<int>(std::min(left, 0.2) * 1000) + 1);
        if (r < 0 && errno != EINTR) eof = true;
        if (r > 0) {
          const ssize_t got = recv(sock, buf.data(), buf.size(), MSG_DONTWAIT);
          if (got == 0) {
            eof = true;  // every copy of the host's end is closed: it is gone
            continue;
          }
          if (got < 0) {
            if (errno != EINTR && errno != EAGAIN) eof = true;
            continue;
          }
          std::uint32_t m = 0;
          if (static_cast<std::size_t>(got) >= sizeof m) std::memcpy(&m, buf.data(), sizeof m);
          if (static_cast<std::size_t>(got) != size || m != magic) {
            protocol(op, dtype,
                     "a message from the kernel's process that is not a " +
                         std::string(is_reply ? "reply" : "greeting") + " (" + std::to_string(got) +
                         " bytes: \"" + excerpt(buf.data(), static_cast<std::size_t>(got)) + "\")");
            continue;
          }
          std::memcpy(out, buf.data(), size);
          if (is_reply) {
            const auto* rp = static_cast<const Reply*>(out);
            if (rp->pid != pid) {
              protocol(op, dtype,
                       "a reply from process " + std::to_string(rp->pid) +
                           ", not from the kernel's process " + std::to_string(pid) +
                           " (the kernel called fork(), and the copy answered too)");
              continue;
            }
            if (rp->seq != seq) {
              protocol(op, dtype,
                       "a reply to another call (number " + std::to_string(rp->seq) +
                           ", expected " + std::to_string(seq) + ")");
              continue;
            }
          }
          return Wait::ok;
        }
      } else {
        usleep(10000);
      }
      int status = 0;
      if (waitpid(pid, &status, WNOHANG) == pid) {
        // Gone. Put the status back for reap(): it is read from there.
        reaped_status = status;
        reaped_early = true;
        return Wait::died;
      }
      if (eof) {
        // The socket closed but the process lives on (a helper holds
        // nothing, or it is exiting): it cannot answer any more.
        return Wait::died;
      }
    }
  }
  int reaped_status = 0;
  bool reaped_early = false;

  std::string end_of_host() {
    if (reaped_early) {
      reaped_early = false;
      kill_group(pid);
      close(sock);
      sock = -1;
      pid = -1;
      if (opt.gate_box) opt.gate_box->host_pid = 0;
      ChildEnd end;
      end.exited = WIFEXITED(reaped_status);
      end.status = end.exited                   ? WEXITSTATUS(reaped_status)
                   : WIFSIGNALED(reaped_status) ? WTERMSIG(reaped_status)
                                                : 0;
      return end.describe();
    }
    return reap(false);
  }

  void protocol(const std::string& op, const std::string& dtype, const std::string& what) {
    HostEvent e;
    e.kind = HostEvent::Kind::protocol;
    e.op = op;
    e.dtype = dtype;
    e.how = what;
    on_event(e);
  }

  void report_end(HostEvent::Kind kind, const std::string& op, const std::string& dtype,
                  const std::string& how, double waited) {
    HostEvent e;
    e.kind = kind;
    e.op = op;
    e.dtype = dtype;
    e.how = how;
    e.silent_s = waited;
    e.fault = text_of(box->fault, sizeof box->fault);
    on_event(e);
  }

  // Forks a host and waits for its greeting. Empty on success, else why not.
  //
  // The fork happens on a thread kept for it: a process forked by a thread
  // that has run OpenMP (the suite's references do) inherits that thread's
  // libgomp pool without its threads, and the next parallel region in the
  // child waits for them forever; the spawner thread never runs OpenMP. It
  // lives as long as the hosts do, since PR_SET_PDEATHSIG fires when the
  // thread that forked ends. Not for a source with its own opener (Python):
  // the interpreter is re-initialised on the thread that forked, which must
  // be the one holding it (the adapter runs PyTorch single-threaded).
  std::thread spawner;
  std::mutex spawn_mu;
  std::condition_variable spawn_cv;
  bool spawn_wanted = false, spawn_done = false, spawn_quit = false;
  std::string spawn_result;

  std::string start() {
    if (source.has_opener()) return start_here();
    if (!spawner.joinable()) spawner = std::thread([this] { spawn_loop(); });
    std::unique_lock<std::mutex> lock(spawn_mu);
    spawn_wanted = true;
    spawn_done = false;
    spawn_cv.notify_all();
    spawn_cv.wait(lock, [&] { return spawn_done; });
    return spawn_result;
  }

  void spawn_loop() {
    std::unique_lock<std::mutex> lock(spawn_mu);
    for (;;) {
      spawn_cv.wait(lock, [&] { return spawn_wanted || spawn_quit; });
      if (spawn_quit) return;
      spawn_wanted = false;
      lock.unlock();
      std::string why;
      try {
        why = start_here();
      } catch (const std::exception& e) {
        why = e.what();
      }
      lock.lock();
      spawn_result = why;
      spawn_done = true;
      spawn_cv.notify_all();
    }
  }

  void end_spawner() {
    if (!spawner.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(spawn_mu);
      spawn_quit = true;
    }
    spawn_cv.notify_all();
    spawner.join();
  }

  std::string start_here() {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
      return std::string("cannot create the kernel host's socket: ") + std::strerror(errno);
    std::memset(box, 0, sizeof *box);
    std::fflush(nullptr);
    const pid_t child = fork();
    if (child < 0) {
      close(sv[0]);
      close(sv[1]);
      return std::string("cannot fork the kernel host: ") + std::strerror(errno);
    }
    if (child == 0) {
      close(sv[0]);
      host_main(sv[1]);
    }
    setpgid(child, child);
    close(sv[1]);
    pid = child;
    sock = sv[0];
    if (opt.gate_box) opt.gate_box->host_pid = child;
    if (on_start) on_start();
    auto hello = std::make_unique<Hello>();
    double waited = 0;
    const Wait w = receive(hello.get(), sizeof *hello, kHelloMagic, false, waited, "", "");
    if (w == Wait::hung) {
      reap(true);
      report_end(HostEvent::Kind::hang, "", "", "", waited);
      return "its process did not finish opening the kernel within " +
             std::to_string(opt.call_timeout_s) + " s (killed)";
    }
    if (w == Wait::died) {
      const std::string how = end_of_host();
      report_end(HostEvent::Kind::crash, "", "", how, waited);
      return "its process " + how + " while opening the kernel";
    }
    if (hello->failed) {
      reap(false);
      return text_of(hello->error, sizeof hello->error);
    }
    if (!kernel) adopt(*hello);
    return "";
  }

  // The first host's descriptor becomes the judge's view of the kernel.
  void adopt(const Hello& h);

  sa_status call(Op op, const char* dtype, std::array<std::uint64_t, 12> words) {
    set_remote_fp(nullptr);
    fp = FpState{};
    has_last_error = false;
    const std::string opname = name_of(op);
    auto refuse = [&](std::string why) {
      last_error = std::move(why);
      has_last_error = true;
      set_remote_fp(&fp);
      return SA_INTERNAL_ERROR;
    };
    if (broken) return refuse(broken_why);
    if (pid < 0) {
      const std::string why = start();
      if (!why.empty()) {
        broken = true;
        broken_why = "not called: a fresh process for the kernel could not open it (" + why +
                     "), so the gate answers every call itself";
        return refuse(broken_why);
      }
    }
    const std::vector<BufferRange> live = live_buffers();
    if (live.size() > kMaxRanges) return refuse("not called: more buffers than the gate can pass");
    auto* table = reinterpret_cast<WireRange*>(arena);
    for (std::size_t i = 0; i < live.size(); ++i) {
      WireRange& w = table[i];
      w.map_begin = live[i].map_begin;
      w.map_end = live[i].map_end;
      w.data_begin = live[i].data_begin;
      w.data_end = live[i].data_end;
      w.guard = live[i].guard;
      w.live_begin = live[i].live_begin;
      w.read_only = live[i].read_only;
      copy_text(w.name, sizeof w.name, live[i].name);
    }
    copy_text(box->op, sizeof box->op, opname.c_str());
    copy_text(box->dtype, sizeof box->dtype, dtype);
    box->fault[0] = '\0';
    Request q{};
    q.magic = kRequestMagic;
    q.op = static_cast<std::uint32_t>(op);
    q.seq = ++seq;
    std::copy(words.begin(), words.end(), q.w);
    q.nranges = static_cast<std::uint32_t>(live.size());
    auto reply = std::make_unique<Reply>();
    double waited = 0;
    Wait w = send_packet(sock, &q, sizeof q) ? Wait::ok : Wait::died;
    if (w == Wait::ok)
      w = receive(reply.get(), sizeof *reply, kReplyMagic, true, waited, opname, dtype);
    if (w == Wait::hung) {
      reap(true);
      report_end(HostEvent::Kind::hang, opname, dtype, "", waited);
      return refuse("not completed: the kernel's process did not answer within " +
                    std::to_string(opt.call_timeout_s) +
                    " s and was killed (the gate.no_hang verdict has the input)");
    }
    if (w == Wait::died) {
      const std::string how = end_of_host();
      report_end(HostEvent::Kind::crash, opname, dtype, how, waited);
      return refuse("not completed: the kernel's process ended in this call (" + how +
                    "; the gate.no_crash or gate.in_bounds verdict has the input)");
    }
    fp.round = reply->round;
    fp.csr = reply->csr;
    set_remote_fp(&fp);
    has_last_error = reply->has_error != 0;
    last_error = text_of(reply->error, sizeof reply->error);
    return static_cast<sa_status>(reply->status);
  }

  // Argument structures, copied into the arena (with arena addresses inside).
  static const void* stage(ArenaInputs& x, const char* name, const void* p, std::size_t bytes) {
    return p ? x.add(name, p, bytes) : nullptr;
  }
  static const sa_attention_v2_args* stage_v2(ArenaInputs& x, const sa_attention_v2_args* a) {
    if (!a) return nullptr;
    sa_attention_v2_args g = *a;
    const bool sane = g.batch >= 0 && g.batch < (std::int64_t(1) << 24);
    if (sane && g.cu_seqlens_q && !in_arena(g.cu_seqlens_q))
      g.cu_seqlens_q = static_cast<const std::int32_t*>(
          x.add("cu_seqlens_q", a->cu_seqlens_q, static_cast<std::size_t>(g.batch + 1) * 4));
    if (sane && g.cu_seqlens_k && !in_arena(g.cu_seqlens_k))
      g.cu_seqlens_k = static_cast<const std::int32_t*>(
          x.add("cu_seqlens_k", a->cu_seqlens_k, static_cast<std::size_t>(g.batch + 1) * 4));
    if (sane && g.seqused_k && !in_arena(g.seqused_k))
      g.seqused_k = static_cast<const std::int32_t*>(
          x.add("seqused_k", a->seqused_k, static_cast<std::size_t>(g.batch) * 4));
    {  // descales per (sequence, kv head)
      const bool heads_sane = g.heads_kv >= 1 && g.heads_kv < (std::int64_t(1) << 16);
      const auto n = static_cast<std::size_t>(g.batch * g.heads_kv) * 4;
      const float** d[3] = {&g.q_descale_bh, &g.k_descale_bh, &g.v_descale_bh};
      const char* names[3] = {"q_descale_bh", "k_descale_bh", "v_descale_bh"};
      for (int i = 0; i < 3; ++i)
        if (sane && heads_sane && *d[i] && !in_arena(*d[i]))
          *d[i] = static_cast<const float*>(x.add(names[i], *d[i], n));
    }
    if (sane && g.block_table && !in_arena(g.block_table) && g.block_table_stride >= 1 &&
        g.block_table_stride < (std::int64_t(1) << 24) &&
        g.batch * g.block_table_stride < (std::int64_t(1) << 28))
      g.block_table = static_cast<const std::int32_t*>(
          x.add("block_table", a->block_table,
                static_cast<std::size_t>(g.batch * g.block_table_stride) * 4));
    {  // masks beyond causal and window, up to their last addressed element
      std::int64_t reach[4];
      sa::kernels::mask_reaches(g, reach);
      sa_mask_tensor* gm[4] = {&g.attn_mask, &g.attn_bias, &g.block_mask, &g.tree_mask};
      const sa_mask_tensor* am[4] = {&a->attn_mask, &a->attn_bias, &a->block_mask, &a->tree_mask};
      const char* names[4] = {"attn_mask", "attn_bias", "block_mask", "tree_mask"};
      for (int i = 0; i < 4; ++i)
        if (sane && reach[i] > 0 && reach[i] < (std::int64_t(1) << 28) && !in_arena(gm[i]->data))
          gm[i]->data =
              x.add(names[i], am[i]->data, static_cast<std::size_t>(reach[i]) * (i == 1 ? 4 : 1));
    }
    return static_cast<const sa_attention_v2_args*>(
        x.add("arguments (sa_attention_v2_args)", &g, sizeof g));
  }
};

namespace {
using Impl = KernelHost::Impl;
Impl* I(void* ctx) { return static_cast<Impl*>(ctx); }
std::uint64_t W(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }
std::uint64_t W(std::int64_t v) { return static_cast<std::uint64_t>(v); }
std::uint64_t D(sa_dtype t) { return static_cast<std::uint64_t>(static_cast<int>(t)); }

const void* shape(ArenaInputs& x, const sa_rows* sh) {
  return Impl::stage(x, "arguments (sa_rows)", sh, sizeof(sa_rows));
}

sa_status r_softmax(void* c, sa_dtype t, const sa_rows* sh, const void* in, void* out) {
  ArenaInputs x;
  return I(c)->call(Op::softmax, dtype_text(t), {D(t), W(shape(x, sh)), W(in), W(out)});
}
sa_status r_log_softmax(void* c, sa_dtype t, const sa_rows* sh, const void* in, void* out) {
  ArenaInputs x;
  return I(c)->call(Op::log_softmax, dtype_text(t), {D(t), W(shape(x, sh)), W(in), W(out)});
}
sa_status r_logsumexp(void* c, sa_dtype t, const sa_rows* sh, const void* in, float* lse) {
  ArenaInputs x;
  return I(c)->call(Op::logsumexp, dtype_text(t), {D(t), W(shape(x, sh)), W(in), W(lse)});
}
sa_status r_entropy(void* c, sa_dtype t, const sa_rows* sh, const void* in, float* H,
                    sa_entropy_state* st) {
  ArenaInputs x;
  return I(c)->call(Op::entropy, dtype_text(t), {D(t), W(shape(x, sh)), W(in), W(H), W(st)});
}
sa_status r_adaptive(void* c, sa_dtype t, const sa_rows* sh, const void* in, void* out, float* beta,
                     float* H) {
  ArenaInputs x;
  return I(c)->call(Op::adaptive_softmax, dtype_text(t),
                    {D(t), W(shape(x, sh)), W(in), W(out), W(beta), W(H)});
}
sa_status r_attention(void* c, const sa_attention_args* a) {
  ArenaInputs x;
  const void* g = Impl::stage(x, "arguments (sa_attention_args)", a, sizeof *a);
  return I(c)->call(Op::attention, a ? dtype_text(a->dtype) : "", {W(g)});
}
sa_status r_merge_entropy(void* c, std::int64_t count, const sa_entropy_state* a,
                          const sa_entropy_state* b, sa_entropy_state* out) {
  return I(c)->call(Op::merge_entropy_states, "", {W(count), W(a), W(b), W(out)});
}
sa_status r_merge_attention(void* c, std::int64_t rows, std::int64_t dv, const float* oa,
                            const float* la, const float* ob, const float* lb, float* out,
                            float* out_lse) {
  return I(c)->call(Op::merge_attention_states, "float32",
                    {W(rows), W(dv), W(oa), W(la), W(ob), W(lb), W(out), W(out_lse)});
}
sa_status r_attention_v2(void* c, const sa_attention_v2_args* a) {
  ArenaInputs x;
  const void* g = Impl::stage_v2(x, a);
  return I(c)->call(Op::attention_v2, a ? dtype_text(a->qkv_dtype) : "", {W(g)});
}
sa_status r_softmax_backward(void* c, sa_dtype t, const sa_rows* sh, const void* y, const void* dy,
                             void* dx) {
  ArenaInputs x;
  return I(c)->call(Op::softmax_backward, dtype_text(t),
                    {D(t), W(shape(x, sh)), W(y), W(dy), W(dx)});
}
sa_status r_log_softmax_backward(void* c, sa_dtype t, const sa_rows* sh, const void* y,
                                 const void* dy, void* dx) {
  ArenaInputs x;
  return I(c)->call(Op::log_softmax_backward, dtype_text(t),
                    {D(t), W(shape(x, sh)), W(y), W(dy), W(dx)});
}
sa_status r_attention_backward(void* c, const sa_attention_backward_args* b) {
  ArenaInputs x;
  const void* g = nullptr;
  const char* dt = "";
  if (b) {
    sa_attention_backward_args gb = *b;
    gb.forward = Impl::stage_v2(x, b->forward);
    if (b->forward) dt = dtype_text(b->forward->qkv_dtype);
    g = x.add("arguments (sa_attention_backward_args)", &gb, sizeof gb);
  }
  return I(c)->call(Op::attention_backward, dt, {W(g)});
}
sa_status r_merge_n(void* c, std::int64_t parts, std::int64_t rows, std::int64_t dv,
                    const float* const* o, const float* const* lse, float* out, float* out_lse) {
  return I(c)->call(Op::merge_attention_states_n, "float32",
                    {W(parts), W(rows), W(dv), W(o), W(lse), W(out), W(out_lse)});
}
const char* r_last_error(void* c) {
  Impl* h = I(c);
  return h->has_last_error ? h->last_error.c_str() : nullptr;
}
}  // namespace

void KernelHost::Impl::adopt(const Hello& h) {
  name = text_of(h.name, sizeof h.name);
  description = text_of(h.description, sizeof h.description);
  std::memset(&k, 0, sizeof k);
  k.abi_version = h.abi;
  k.struct_size = h.abi >= 2 ? sizeof(sa_kernel) : SA_KERNEL_V1_SIZE;
  k.name = name.c_str();
  k.description = description.c_str();
  k.ops = h.ops;
  k.dtypes = h.dtypes;
  // The judge's buffers are host memory whatever the kernel works on: a
  // device kernel's host stages them to the device (DeviceCall), so that
  // sa::Kernel in the judge never stages and never initialises CUDA.
  k.memory = SA_MEMORY_HOST;
  k.adaptive_entropy = static_cast<sa_entropy_definition>(h.adaptive_entropy);
  k.ctx = this;
  k.last_error = r_last_error;
  auto has = [&](Op op) { return (h.fns >> static_cast<int>(op)) & 1u; };
  if (has(Op::softmax)) k.softmax = r_softmax;
  if (has(Op::log_softmax)) k.log_softmax = r_log_softmax;
  if (has(Op::logsumexp)) k.logsumexp = r_logsumexp;
  if (has(Op::entropy)) k.entropy = r_entropy;
  if (has(Op::adaptive_softmax)) k.adaptive_softmax = r_adaptive;
  if (has(Op::attention)) k.attention = r_attention;
  if (has(Op::merge_entropy_states)) k.merge_entropy_states = r_merge_entropy;
  if (has(Op::merge_attention_states)) k.merge_attention_states = r_merge_attention;
  if (h.abi >= 2) {
    if (has(Op::attention_v2)) k.attention_v2 = r_attention_v2;
    if (has(Op::softmax_backward)) k.softmax_backward = r_softmax_backward;
    if (has(Op::log_softmax_backward)) k.log_softmax_backward = r_log_softmax_backward;
    if (has(Op::attention_backward)) k.attention_backward = r_attention_backward;
    if (has(Op::merge_attention_states_n)) k.merge_attention_states_n = r_merge_n;
    if (h.has_caps) {
      caps = h.caps;
      head_dims.assign(h.head_dims, h.head_dims + std::clamp(h.n_head_dims, 0, kMaxHeadDims));
      caps.head_dims = head_dims.empty() ? nullptr : head_dims.data();
      caps.num_head_dims = static_cast<std::int32_t>(head_dims.size());
      k.capabilities = &caps;
    }
  }
  kernel.emplace(&k, source.identity().origin.empty() ? source.path() : source.identity().origin);
}

KernelHost::KernelHost(const KernelSource& source, HostOptions options,
                       std::function<void(const HostEvent&)> on_event,
                       std::function<void()> on_start)
    : impl_(std::make_unique<Impl>(source, options, std::move(on_event), std::move(on_start))) {
  impl_->judge = getpid();
  impl_->make_arena();
  const std::string why = impl_->start();
  if (!why.empty()) throw std::runtime_error(why);
}

KernelHost::~KernelHost() = default;

const Kernel& KernelHost::kernel() const { return *impl_->kernel; }

}  // namespace sa::gate
