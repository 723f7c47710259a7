/* A fake CUDA runtime for the gate's tests on machines without a GPU: the
 * entry points kernels/device_memory.cpp binds (cudaGetDeviceCount,
 * cudaMalloc, cudaFree, cudaMemcpy, cudaGetErrorString, cudaGetLastError),
 * backed by host memory. Every allocation is its own anonymous mapping, so a
 * "device" pointer is never an address of the gate's shared arena, and
 * sa_fake_cuda_is_device tells the test kernels whether a pointer is one
 * (tests/gate/kernels/hostile_kernel.c, the CUDA_* behaviours).
 *
 * Built as libcudart.so.12 in a folder of its own (tests/gate/CMakeLists.txt)
 * and used only where a test names it in SA_CUDA_RUNTIME; nothing finds it
 * by itself, so real CUDA builds are unaffected.
 *
 * Environment:
 *   SA_FAKE_CUDA_LOG      a file: one line per process that loads the library
 *                         ("load"), asks for a device ("init") and allocates
 *                         ("alloc", the first time), with its pid, its parent's
 *                         pid and how many seccomp filters each has
 *                         (Seccomp_filters in /proc/PID/status; -1 when the
 *                         kernel does not say): a kernel host has one more
 *                         than the judge that forked it, so a test can tell
 *                         hosts from judges, in a container with its own
 *                         filters too;
 *   SA_FAKE_CUDA_DEVICES  "0": cudaGetDeviceCount reports no device. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

enum {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevicePointer = 17
};

static int seccomp_filters(long pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%ld/status", pid);
  FILE* f = fopen(path, "r");
  if (!f) return -1;
  char line[256];
  int n = -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "Seccomp_filters: %d", &n) == 1) break;
  fclose(f);
  return n;
}

static void note(const char* what) {
  const char* path = getenv("SA_FAKE_CUDA_LOG");
  if (!path || !*path) return;
  const int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  char line[160];
  const long pid = (long)getpid(), ppid = (long)getppid();
  const int n = snprintf(line, sizeof line, "%s pid=%ld ppid=%ld filters=%d parent_filters=%d\n",
                         what, pid, ppid, seccomp_filters(pid), seccomp_filters(ppid));
  if (n > 0) (void)!write(fd, line, (size_t)n);
  close(fd);
}

__attribute__((constructor)) static void fake_cudart_loaded(void) { note("load"); }

/* Live allocations: [base, base + size) each. */
#define MAX_ALLOCS 4096
static struct {
  uintptr_t base;
  size_t size, mapped;
} allocs[MAX_ALLOCS];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pid_t noted_alloc = 0, noted_init = 0;

static int find(const void* p, size_t bytes) {
  const uintptr_t a = (uintptr_t)p;
  for (int i = 0; i < MAX_ALLOCS; ++i)
    if (allocs[i].base && a >= allocs[i].base && a + bytes <= allocs[i].base + allocs[i].size)
      return i;
  return -1;
}

EXPORT int sa_fake_cuda_is_device(const void* p, size_t bytes) {
  pthread_mutex_lock(&mu);
  const int i = find(p, bytes);
  pthread_mutex_unlock(&mu);
  return i >= 0;
}

EXPORT int cudaGetDeviceCount(int* count) {
  if (noted_init != getpid()) {
    noted_init = getpid();
    note("init");
  }
  const char* d = getenv("SA_FAKE_CUDA_DEVICES");
  if (d && strcmp(d, "0") == 0) {
    if (count) *count = 0;
    return cudaErrorNoDevice;
  }
  if (count) *count = 1;
  return cudaSuccess;
}

EXPORT int cudaMalloc(void** p, size_t bytes) {
  if (!p) return cudaErrorInvalidValue;
  if (noted_alloc != getpid()) {
    noted_alloc = getpid();
    note("alloc");
  }
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  const size_t mapped = (bytes + page - 1) / page * page + page;
  void* m = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return cudaErrorMemoryAllocation;
  pthread_mutex_lock(&mu);
  int slot = -1;
  for (int i = 0; i < MAX_ALLOCS && slot < 0; ++i)
    if (!allocs[i].base) slot = i;
  if (slot >= 0) {
    allocs[slot].base = (uintptr_t)m;
    allocs[slot].size = bytes;
    allocs[slot].mapped = mapped;
  }
  pthread_mutex_unlock(&mu);
  if (slot < 0) {
    munmap(m, mapped);
    return cudaErrorMemoryAllocation;
  }
  *p = m;
  return cudaSuccess;
}

EXPORT int cudaFree(void* p) {
  if (!p) return cudaSuccess;
  pthread_mutex_lock(&mu);
  int i = -1;
  for (int j = 0; j < MAX_ALLOCS; ++j)
    if (allocs[j].base == (uintptr_t)p) i = j;
  size_t mapped = 0;
  if (i >= 0) {
    mapped = allocs[i].mapped;
    allocs[i].base = 0;
  }
  pthread_mutex_unlock(&mu);
  if (i < 0) return cudaErrorInvalidDevicePointer;
  munmap(p, mapped);
  return cudaSuccess;
}

/* kind: 1 host to device, 2 device to host (cudaMemcpyKind). */
EXPORT int cudaMemcpy(void* dst, const void* src, size_t bytes, int kind) {
  if (kind == 1 && !sa_fake_cuda_is_device(dst, bytes)) return cudaErrorInvalidValue;
  if (kind == 2 && !sa_fake_cuda_is_device(src, bytes)) return cudaErrorInvalidValue;
  if (kind != 1 && kind != 2) return cudaErrorInvalidValue;
  if (bytes) memcpy(dst, src, bytes);
  return cudaSuccess;
}

EXPORT const char* cudaGetErrorString(int e) {
  switch (e) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument (fake runtime)";
    case cudaErrorMemoryAllocation:
      return "out of memory (fake runtime)";
    case cudaErrorNoDevice:
      return "no CUDA-capable device is detected (fake runtime, SA_FAKE_CUDA_DEVICES=0)";
    case cudaErrorInvalidDevicePointer:
      return "invalid device pointer (fake runtime)";
    default:
      return "unknown error (fake runtime)";
  }
}

EXPORT int cudaGetLastError(void) { return cudaSuccess; }
