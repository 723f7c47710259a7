/* Misbehaving outside kernels for the gate's reliability tests (issue 12).
 * One source, built once per behaviour with -DHOSTILE=<one of the names
 * below>, because some behaviours live in constructors and destructors,
 * which run for a whole library. Everything not named is the correct example
 * kernel (examples/outside_kernel/example_kernel.c).
 *
 *   CTOR_EXIT        a constructor calls exit(0)
 *   CTOR_CRASH       a constructor dies of SIGSEGV
 *   CTOR_HANG        a constructor never returns
 *   ENTRY_CRASH      sa_kernel_entry dies of SIGSEGV
 *   DTOR_EXIT_BIASED a destructor calls _exit(0); softmax is 0.1% off (a failing kernel)
 *   DTOR_CRASH       a destructor dies of SIGSEGV
 *   HELPER_OOB       softmax writes 4 KiB past its output for n >= 64; the kernel also has
 *                    entropy, whose streamed-entropy property calls softmax as a helper
 *   FORK_HELPER      the first call forks a helper that sleeps for 10 minutes
 *   BLOCK_ALWAYS     every call blocks forever
 *   FAKE_DONE        the first call writes forged gate messages to every descriptor 3..63,
 *                    then ends the process with _exit(0)
 *   FORK_IN_CALL     the first call forks, and both copies return and go on
 *   FP_ENV           every call leaves flush-to-zero and denormals-are-zero set
 *   NAME_NEWLINE     the kernel's name holds a newline and a fake PASS line
 *   NAME_SHELL       the kernel's name holds shell and gnuplot metacharacters
 *   CALL_EXIT        the first call calls exit(0) (atexit handlers run)
 *   MAX_N_64         a correct kernel that declares sa_capabilities.max_n = 64 and answers
 *                    SA_INVALID_ARGUMENT for any longer row
 *   OMP_AFTER_CRASH  softmax dies of SIGSEGV for n >= 64; log_softmax runs an OpenMP parallel
 *                    region in every call (built with -fopenmp)
 *   FORGE            (issue 29) the first call looks for the gate's message token in its own
 *                    memory and writes "pass" verdicts, "unit_done" and "done" stamped with it
 *                    to every descriptor 3..63, tries to open its parent's and grandparent's
 *                    memory for writing (and says on stderr whether it could); every output
 *                    of every call is NaN
 *
 * CUDA-memory kernels (sa_kernel.memory = SA_MEMORY_CUDA), for the fake CUDA
 * runtime of tests/gate/fake_cudart.c (whose device memory is host memory, so
 * they compute on the pointers directly). Every call first checks that each
 * buffer it is given is the fake runtime's device memory (found by its
 * soname, libcudart.so.12, in this process), and refuses the call otherwise:
 *   CUDA_OK           the correct example kernel, attention_v2 included (every pointer of its
 *                     arguments must be device memory: tensors, lse, cu_seqlens, masks, ...)
 *   CUDA_FORGE        FORGE, on device memory
 *   CUDA_CRASH        softmax dies of SIGSEGV for n >= 64
 *   CUDA_INPUT_WRITE  softmax is correct but then overwrites the first logit of its (device)
 *                     input with 42
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#define sa_kernel_entry sa_hostile_example_entry_unused
#include "example_kernel.c"
#undef sa_kernel_entry

#define CTOR_EXIT 1
#define CTOR_CRASH 2
#define CTOR_HANG 3
#define ENTRY_CRASH 4
#define DTOR_EXIT_BIASED 5
#define DTOR_CRASH 6
#define HELPER_OOB 7
#define FORK_HELPER 8
#define BLOCK_ALWAYS 9
#define FAKE_DONE 10
#define FORK_IN_CALL 11
#define FP_ENV 12
#define NAME_NEWLINE 13
#define NAME_SHELL 14
#define CALL_EXIT 15
#define MAX_N_64 16
#define FORGE 17
#define OMP_AFTER_CRASH 18
#define CUDA_OK 19
#define CUDA_FORGE 20
#define CUDA_CRASH 21
#define CUDA_INPUT_WRITE 22

#ifndef HOSTILE
#error "build with -DHOSTILE=<behaviour>"
#endif

__attribute__((constructor)) static void hostile_init(void) {
#if HOSTILE == CTOR_EXIT
  exit(0);
#elif HOSTILE == CTOR_CRASH
  raise(SIGSEGV);
#elif HOSTILE == CTOR_HANG
  for (;;) pause();
#endif
}

__attribute__((destructor)) static void hostile_fini(void) {
#if HOSTILE == DTOR_EXIT_BIASED
  _exit(0);
#elif HOSTILE == DTOR_CRASH
  raise(SIGSEGV);
#endif
}

static int first_call = 1;

#define HOSTILE_ON_DEVICE (HOSTILE >= CUDA_OK && HOSTILE <= CUDA_INPUT_WRITE)
#define HOSTILE_FORGES (HOSTILE == FORGE || HOSTILE == CUDA_FORGE)

#if HOSTILE_ON_DEVICE
#include <dlfcn.h>
/* Whether p is device memory of the fake runtime loaded in this process. */
static int on_device(const void* p) {
  static int (*is_device)(const void*, size_t) = NULL;
  if (!is_device) {
    void* rt = dlopen("libcudart.so.12", RTLD_NOW | RTLD_NOLOAD);
    if (rt) *(void**)&is_device = dlsym(rt, "sa_fake_cuda_is_device");
  }
  return p == NULL || (is_device && is_device(p, 1));
}
/* A call whose rows are not empty must get device pointers only. */
#define REQUIRE_DEVICE(s, a, b)                                                 \
  do {                                                                          \
    if ((s) && (s)->rows > 0 && (s)->n > 0 && (!on_device(a) || !on_device(b))) \
      return invalid(                                                           \
          "hostile CUDA kernel: a buffer is not device memory of the fake "     \
          "CUDA runtime (libcudart.so.12) in this process");                    \
  } while (0)
#else
#define REQUIRE_DEVICE(s, a, b) (void)0
#endif

#if HOSTILE_FORGES
#include <errno.h>
#include <fcntl.h>

static int hex_digit(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

/* The gate stamps its messages {"k":"<32 hex digits>",...}: look for one in
 * every readable mapping of this process (through /proc/self/mem, so that an
 * unreadable page costs nothing). */
static int find_token(char token[33]) {
  static char buf[1 << 20];
  FILE* maps = fopen("/proc/self/maps", "r");
  const int mem = open("/proc/self/mem", O_RDONLY);
  int found = 0;
  char line[512];
  while (maps && mem >= 0 && !found && fgets(line, sizeof line, maps)) {
    unsigned long lo, hi;
    char perms[8];
    if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3 || perms[0] != 'r') continue;
    if (strstr(line, "[vvar]") || strstr(line, "[vsyscall]")) continue;
    /* Heap-sized regions only: a sanitizer's shadow memory is terabytes of
     * readable address space, and the token lives in an ordinary heap. */
    if (hi - lo > (256ul << 20)) continue;
    for (unsigned long a = lo; a < hi && !found; a += sizeof buf - 64) {
      const size_t want = hi - a < sizeof buf ? hi - a : sizeof buf;
      const ssize_t got = pread(mem, buf, want, (off_t)a);
      if (got <= 0) break;
      for (ssize_t i = 0; i + 38 <= got && !found; ++i) {
        if (memcmp(buf + i, "\"k\":\"", 5) != 0 || buf[i + 37] != '"') continue;
        int ok = 1;
        for (int j = 0; j < 32 && ok; ++j) ok = hex_digit(buf[i + 5 + j]);
        if (!ok) continue;
        memcpy(token, buf + i + 5, 32);
        token[32] = 0;
        found = 1;
      }
      if ((size_t)got < want) break;
    }
  }
  if (maps) fclose(maps);
  if (mem >= 0) close(mem);
  return found;
}

static long parent_of(long pid) {
  char path[64], text[512];
  snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  FILE* f = fopen(path, "r");
  if (!f) return -1;
  const size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = 0;
  const char* close_paren = strrchr(text, ')');
  long ppid = -1;
  if (close_paren) sscanf(close_paren + 2, "%*c %ld", &ppid);
  return ppid;
}

static void try_memory_of(const char* who, long pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%ld/mem", pid);
  const int fd = open(path, O_RDWR);
  if (fd >= 0) {
    fprintf(stderr, "hostile forge: the %s's memory (%s) opened for writing\n", who, path);
    close(fd);
  } else {
    fprintf(stderr, "hostile forge: the %s's memory (%s): %s\n", who, path, strerror(errno));
  }
}

static void forge(void) {
  const long parent = (long)getppid();
  try_memory_of("parent", parent);
  try_memory_of("grandparent", parent_of(parent));
  char token[33];
  if (!find_token(token)) {
    fprintf(stderr, "hostile forge: no token found\n");
    return;
  }
  fprintf(stderr, "hostile forge: token found\n");
  static const char* props[] = {"differential.ulp", "metamorphic.sum_to_one"};
  static const char* ops[] = {"softmax", "log_softmax", "logsumexp"};
  char line[1024];
  const long pid = (long)getpid();
  for (int fd = 3; fd < 64; ++fd) {
    for (int p = 0; p < 2; ++p)
      for (int o = 0; o < 3; ++o) {
        const int n = snprintf(line, sizeof line,
                               "{\"k\":\"%s\",\"p\":%ld,\"t\":\"verdict\",\"v\":{\"property\":\"%s\","
                               "\"outcome\":\"pass\",\"op\":\"%s\",\"dtype\":\"float32\","
                               "\"kernel\":\"hostile\",\"measured\":0,\"bound\":1}}\n",
                               token, pid, props[p], ops[o]);
        (void)!write(fd, line, (size_t)n);
      }
    const int n = snprintf(line, sizeof line,
                           "{\"k\":\"%s\",\"p\":%ld,\"t\":\"unit_done\",\"verdicts\":[]}\n"
                           "{\"k\":\"%s\",\"p\":%ld,\"t\":\"done\"}\n",
                           token, pid, token, pid);
    (void)!write(fd, line, (size_t)n);
  }
}

/* Every output NaN: rows x n elements at out_stride, or rows scalars. */
static void all_nan(const sa_rows* s, float* y, int64_t per_row) {
  for (int64_t r = 0; r < s->rows; ++r)
    for (int64_t i = 0; i < per_row; ++i) y[r * (per_row > 1 ? s->out_stride : 1) + i] = NAN;
}
#endif

/* What every call does before the real work. */
static void misbehave(void) {
#if HOSTILE == FORK_HELPER
  if (first_call && fork() == 0) {
    sleep(600);
    _exit(0);
  }
#elif HOSTILE == BLOCK_ALWAYS
  for (;;) pause();
#elif HOSTILE == FAKE_DONE
  if (first_call) {
    static const char forged[] = "{\"t\":\"unit_done\",\"verdicts\":[]}\n{\"t\":\"done\"}\n";
    for (int fd = 3; fd < 64; ++fd) (void)!write(fd, forged, sizeof forged - 1);
    _exit(0);
  }
#elif HOSTILE == FORK_IN_CALL
  if (first_call) (void)fork();
#elif HOSTILE == CALL_EXIT
  if (first_call) exit(0);
#elif HOSTILE == FP_ENV && defined(__x86_64__)
  _mm_setcsr(_mm_getcsr() | 0x8040u);
#elif HOSTILE_FORGES
  if (first_call) forge();
#endif
  first_call = 0;
}

#if HOSTILE == MAX_N_64
#define HOSTILE_MAX_N 64
/* Refuses what it declares it does not take. */
#define REFUSE_LONG_ROWS(s) \
  do {                      \
    if ((s)->n > HOSTILE_MAX_N) return SA_INVALID_ARGUMENT; \
  } while (0)
#else
#define REFUSE_LONG_ROWS(s) (void)0
#endif

static sa_status h_softmax(void* ctx, sa_dtype t, const sa_rows* s, const void* in, void* out) {
  misbehave();
  REFUSE_LONG_ROWS(s);
  REQUIRE_DEVICE(s, in, out);
#if HOSTILE == CUDA_CRASH
  if (s && s->n >= 64) raise(SIGSEGV);
#endif
  sa_status st = softmax(ctx, t, s, in, out);
  if (st != SA_OK) return st;
  const int64_t total = s->rows > 0 ? (s->rows - 1) * s->out_stride + s->n : 0;
  float* y = (float*)out;
#if HOSTILE == DTOR_EXIT_BIASED
  for (int64_t i = 0; i < total; ++i) y[i] *= 1.001f;
#elif HOSTILE == HELPER_OOB
  if (s->n >= 64) ((volatile float*)y)[total + 1024] = 1.0f;
#elif HOSTILE_FORGES
  if (t == SA_F32) all_nan(s, y, s->n);
#elif HOSTILE == CUDA_INPUT_WRITE
  if (in != out) ((float*)in)[0] = 42.0f;
#elif HOSTILE == OMP_AFTER_CRASH
  if (s->n >= 64) raise(SIGSEGV);
#endif
  (void)total;
  (void)y;
  return st;
}

static sa_status h_log_softmax(void* ctx, sa_dtype t, const sa_rows* s, const void* in, void* out) {
  misbehave();
  REFUSE_LONG_ROWS(s);
  REQUIRE_DEVICE(s, in, out);
#if HOSTILE == OMP_AFTER_CRASH
  volatile double sink = 0;
#pragma omp parallel for reduction(+ : sink)
  for (int i = 0; i < 100000; ++i) sink += i;
  (void)sink;
#endif
  const sa_status st = log_softmax(ctx, t, s, in, out);
#if HOSTILE_FORGES
  if (st == SA_OK && t == SA_F32) all_nan(s, (float*)out, s->n);
#endif
  return st;
}

static sa_status h_logsumexp(void* ctx, sa_dtype t, const sa_rows* s, const void* in, float* lse) {
  misbehave();
  REFUSE_LONG_ROWS(s);
  REQUIRE_DEVICE(s, in, lse);
  const sa_status st = logsumexp(ctx, t, s, in, lse);
#if HOSTILE_FORGES
  if (st == SA_OK) all_nan(s, lse, 1);
#endif
  return st;
}

/* Shannon entropy in double through the streamed state (m, S, T); rows with
 * +inf are left to the example's conventions: only finite, masked and NaN
 * rows are exact here, which is all HELPER_OOB needs. */
static sa_status h_entropy(void* ctx, sa_dtype t, const sa_rows* s, const void* in, float* H,
                           sa_entropy_state* state) {
  (void)ctx;
  misbehave();
  sa_status st = check_args(t, s, in, H);
  if (st != SA_OK) return st;
  for (int64_t r = 0; r < s->rows; ++r) {
    const float* x = (const float*)in + r * s->in_stride;
    double m = -INFINITY;
    int nan = 0;
    for (int64_t i = 0; i < s->n; ++i) {
      const double l = x[i] / s->temperature;
      if (isnan(l)) nan = 1;
      if (l > m) m = l;
    }
    double S = 0, T = 0;
    if (!nan && isfinite(m))
      for (int64_t i = 0; i < s->n; ++i) {
        const double d = x[i] / s->temperature - m;
        if (d == -INFINITY) continue;
        S += exp(d);
        T += exp(d) * d;
      }
    H[r] = nan ? NAN : (isfinite(m) ? (float)(log(S) - T / S) : 0.0f);
    if (state) {
      state[r].m = nan ? NAN : (float)m;
      state[r].S = (float)S;
      state[r].T = (float)T;
    }
  }
  return SA_OK;
}

#if HOSTILE == CUDA_OK
/* attention_v2 on device memory: every pointer the arguments hold (the
 * structure itself is host memory, as kernel.h's callers pass it). */
static sa_status h_attention_v2(void* ctx, const sa_attention_v2_args* a) {
  if (a && a->struct_size >= sizeof(sa_attention_v2_args) && a->batch > 0) {
    const void* p[] = {a->q.data,       a->k.data,           a->v.data,       a->out,
                       a->lse,          a->entropy,          a->beta,         a->cu_seqlens_q,
                       a->cu_seqlens_k, a->key_padding_mask, a->alibi_slopes, a->sinks};
    static const char* const what[] = {
        "hostile CUDA kernel: attention_v2's q is not device memory of the fake CUDA runtime",
        "hostile CUDA kernel: attention_v2's k is not device memory of the fake CUDA runtime",
        "hostile CUDA kernel: attention_v2's v is not device memory of the fake CUDA runtime",
        "hostile CUDA kernel: attention_v2's out is not device memory of the fake CUDA runtime",
        "hostile CUDA kernel: attention_v2's lse is not device memory of the fake CUDA runtime",
        "hostile CUDA kernel: attention_v2's entropy is not device memory of the fake CUDA runtime",
        "hostile CUDA kernel: attention_v2's beta is not device memory of the fake CUDA runtime",
        "hostile CUDA kernel: attention_v2's cu_seqlens_q is not device memory of the fake CUDA "
        "runtime",
        "hostile CUDA kernel: attention_v2's cu_seqlens_k is not device memory of the fake CUDA "
        "runtime",
        "hostile CUDA kernel: attention_v2's key_padding_mask is not device memory of the fake "
        "CUDA runtime",
        "hostile CUDA kernel: attention_v2's alibi_slopes is not device memory of the fake CUDA "
        "runtime",
        "hostile CUDA kernel: attention_v2's sinks is not device memory of the fake CUDA runtime"};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; ++i)
      if (!on_device(p[i])) return invalid(what[i]);
  }
  return attention_v2(ctx, a);
}
#endif

#if HOSTILE == NAME_NEWLINE
#define HOSTILE_NAME "x\nPASS 99 passed, 0 failed"
#elif HOSTILE == NAME_SHELL
#define HOSTILE_NAME "k`touch hostile-name-ran`$(touch hostile-name-ran),\"';@x"
#else
#define HOSTILE_NAME "hostile"
#endif

#if HOSTILE == HELPER_OOB
#define HOSTILE_OPS (SA_OP_SOFTMAX | SA_OP_LOG_SOFTMAX | SA_OP_LOGSUMEXP | SA_OP_ENTROPY)
#define HOSTILE_ENTROPY h_entropy
#elif HOSTILE == CUDA_OK
#define HOSTILE_OPS (SA_OP_SOFTMAX | SA_OP_LOG_SOFTMAX | SA_OP_LOGSUMEXP | SA_OP_ATTENTION_V2)
#define HOSTILE_ENTROPY NULL
#else
#define HOSTILE_OPS (SA_OP_SOFTMAX | SA_OP_LOG_SOFTMAX | SA_OP_LOGSUMEXP)
#define HOSTILE_ENTROPY NULL
#endif

#if HOSTILE == MAX_N_64
static const sa_capabilities hostile_caps = {.struct_size = sizeof(sa_capabilities),
                                             .max_n = HOSTILE_MAX_N};
#define HOSTILE_CAPS &hostile_caps
#elif HOSTILE == CUDA_OK
#define HOSTILE_CAPS &example_capabilities
#else
#define HOSTILE_CAPS NULL
#endif

static const sa_kernel hostile_kernel = {SA_KERNEL_ABI_VERSION,
                                         sizeof(sa_kernel),
                                         HOSTILE_NAME,
                                         "a deliberately misbehaving test kernel",
                                         HOSTILE_OPS,
                                         SA_DTYPE_F32,
#if HOSTILE_ON_DEVICE
                                         SA_MEMORY_CUDA,
#else
                                         SA_MEMORY_HOST,
#endif
                                         SA_ENTROPY_SHANNON,
                                         NULL,
                                         h_softmax,
                                         h_log_softmax,
                                         h_logsumexp,
                                         HOSTILE_ENTROPY,
                                         NULL,
                                         NULL,
                                         NULL,
                                         NULL,
                                         last_error,
                                         HOSTILE_CAPS,
#if HOSTILE == CUDA_OK
                                         h_attention_v2
#else
                                         NULL
#endif
};

__attribute__((visibility("default"))) const sa_kernel* sa_kernel_entry(void) {
#if HOSTILE == ENTRY_CRASH
  raise(SIGSEGV);
#endif
  return &hostile_kernel;
}
