// The c target's thread pool (what TVM's and onnxruntime's runtimes do instead of an OpenMP team):
// a parallel loop's body is outlined into a task `fn(args, lo, hi)` over a range of its iterations
// (dialect.ts), run by `tessera_parallel_for(fn, args, extent)`. Its C text, for the runtime unit
// of a split artifact (one pool per loaded library) and for a single translation unit (static).
//
// - The calling thread takes part. The iterations are cut into chunks of a static size (up to
//   TESSERA_CHUNKS_PER_THREAD per thread; `tessera_parallel_for_chunks` takes fewer where the loop
//   asks — one for a short region's, lowering.ParallelChunks —, as each chunk's claim and count
//   move cache lines between the cores), each thread's home chunks a contiguous run, as OpenMP's
//   schedule(static) would give it; a thread takes its home chunks first, then any chunk nobody has
//   claimed, from the other homes. Claims are a compare-and-swap on a home's counter, which carries
//   the loop's generation: a worker that wakes after its loop is over claims nothing.
// - The caller returns when every *chunk* is done: it never waits for a worker that claimed none
//   (libgomp's barrier waits until every thread of the team has arrived, even one that was
//   descheduled with no work left: docs/backends.md, "Where the 2 threads go").
// - Waiting spins, then sleeps on a condition variable; the thread that would wake a sleeper
//   signals it. A worker spins TESSERA_SPIN_NS (1 ms; $TESSERA_SPIN_NS when the pool starts) after
//   the last loop ended: long enough to span the executor's gap between one run's last loop and the
//   next run's first (the outputs copied out, the next inputs in: 0.15–0.3 ms for ResNet-50), not
//   only the 1–2 µs it leaves between kernels. A sleeping worker costs the next run its first
//   region: the caller's wake (a futex call, 40–55 µs on the KVM guest of 2026-11-28) and the worker's late
//   start — 45–125 µs a ResNet-50 run at 2 threads, measured (docs/scheduling.md, the sixteenth
//   session). The caller waits on the workers' last chunks TESSERA_CALLER_SPIN_NS (200 µs) before
//   it sleeps (a sleeping caller lets the kernel move a descheduled worker onto its CPU). No
//   sched_yield in the spins: on a loaded machine a yielding worker lost its turn for milliseconds
//   (docs/backends.md).
// - A loop inside a running chunk (nested), a loop called while another thread's loop has the pool,
//   and any loop at one thread run serially on the calling thread. The workers start at the first
//   loop with more than one thread and one iteration (one thread starts none).
// - The thread count: `tessera_set_num_threads(n)` (the device's loader calls it), else
//   OMP_NUM_THREADS (as the OpenMP build reads it), else the CPUs this process may run on.

/**
 * How long a worker spins after the last parallel loop ended before it sleeps (TESSERA_SPIN_NS, ns):
 * the executor's gap between one run's last loop and the next run's first, with room (the header
 * says why; laws/emit/c-pool-spin.law.ts checks a worker does not sleep within half of it).
 */
export const POOL_SPIN_NS = 1_000_000

/** The declarations a kernel's unit needs (its tasks' type and the loop runner), as the prelude header has them. */
export const C_POOL_DECLARATIONS = `/* parallel loops: the body outlined into a task over iterations [lo, hi) (defined in tessera_runtime.c) */
typedef void (*tessera_task)(const void* args, int64_t lo, int64_t hi);
__attribute__((visibility("hidden"))) void tessera_parallel_for(tessera_task fn, const void* args, int64_t extent);
/* the same with \`per_thread\` chunks a thread (a short region's: one, each thread's home share whole) */
__attribute__((visibility("hidden"))) void tessera_parallel_for_chunks(tessera_task fn, const void* args, int64_t extent, int per_thread);
`

/**
 * The pool: `linkage` "static " in a single translation unit (its own pool, its own tasks' type),
 * "" in a split artifact's runtime unit (the prelude header declares the type and the runner).
 * The thread-count functions are exported either way (the loader looks them up by name).
 */
export const cPool = (linkage: string): string => `#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/syscall.h>
#endif
${linkage === "" ? "" : "typedef void (*tessera_task)(const void* args, int64_t lo, int64_t hi);\n"}
#define TESSERA_MAX_THREADS 256
#define TESSERA_CHUNKS_PER_THREAD 4
#define TESSERA_SPIN_NS ${POOL_SPIN_NS}
#define TESSERA_CALLER_SPIN_NS 200000
/* a thread's home chunks: generation << 32 | next << 16 | end (chunks per loop stay under 2^16) */
struct tessera_home { _Alignas(64) _Atomic uint64_t next; };
static struct {
  int threads, started;
  long spinNs;
  pthread_t workers[TESSERA_MAX_THREADS];
  _Atomic uint32_t generation;
  _Atomic int stop;
  _Atomic(tessera_task) fn;
  _Atomic(const void*) args;
  _Atomic int64_t extent, chunks;
  _Alignas(64) _Atomic int64_t done;
  _Alignas(64) _Atomic int sleepers, callerWaiting;
  _Atomic long naps; /* times a worker went to sleep (the spin law reads it) */
  atomic_flag busy;
  pthread_mutex_t lock;
  pthread_cond_t wake, finished;
  struct tessera_home home[TESSERA_MAX_THREADS];
} tessera_pool = { .busy = ATOMIC_FLAG_INIT, .lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER, .finished = PTHREAD_COND_INITIALIZER };
static _Thread_local int tessera_in_task;

static int tessera_default_threads(void) {
  const char* e = getenv("OMP_NUM_THREADS");
  if (e && atoi(e) > 0) return atoi(e);
#if defined(__linux__) && defined(SYS_sched_getaffinity)
  /* the CPUs this process may run on (the raw call: glibc's wrapper wants _GNU_SOURCE before any include) */
  unsigned long mask[64];
  const long bytes = syscall(SYS_sched_getaffinity, 0, sizeof mask, mask);
  int cpus = 0;
  for (long i = 0; i < bytes / (long)sizeof mask[0]; i++) cpus += __builtin_popcountl(mask[i]);
  if (cpus > 0) return cpus;
#endif
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}
static int tessera_threads_now(void) {
  if (tessera_pool.threads == 0) {
    int n = tessera_default_threads();
    tessera_pool.threads = n < 1 ? 1 : n > TESSERA_MAX_THREADS ? TESSERA_MAX_THREADS : n;
  }
  return tessera_pool.threads;
}
static long tessera_now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long)t.tv_sec * 1000000000L + t.tv_nsec;
}
static inline void tessera_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

/* the next chunk thread t may run of loop g (its home's first, then the others'), or -1: none left */
static int64_t tessera_claim(int t, int n, uint32_t g) {
  for (int k = 0; k < n; k++) {
    _Atomic uint64_t* h = &tessera_pool.home[(t + k) % n].next;
    uint64_t v = atomic_load_explicit(h, memory_order_acquire);
    for (;;) {
      if ((uint32_t)(v >> 32) != g) return -1;
      if (((v >> 16) & 0xffff) >= (v & 0xffff)) break;
      if (atomic_compare_exchange_weak_explicit(h, &v, v + (1u << 16), memory_order_acq_rel, memory_order_acquire)) return (int64_t)((v >> 16) & 0xffff);
    }
  }
  return -1;
}

/* thread t runs the chunks of loop g it can claim; the one that finishes the last wakes a sleeping caller */
static void tessera_work(int t, int n, uint32_t g) {
  const tessera_task fn = atomic_load_explicit(&tessera_pool.fn, memory_order_relaxed);
  const void* args = atomic_load_explicit(&tessera_pool.args, memory_order_relaxed);
  const int64_t extent = atomic_load_explicit(&tessera_pool.extent, memory_order_relaxed);
  const int64_t chunks = atomic_load_explicit(&tessera_pool.chunks, memory_order_relaxed);
  for (int64_t c; (c = tessera_claim(t, n, g)) >= 0;) {
    tessera_in_task = 1;
    fn(args, c * extent / chunks, (c + 1) * extent / chunks);
    tessera_in_task = 0;
    if (atomic_fetch_add(&tessera_pool.done, 1) + 1 == chunks && atomic_load(&tessera_pool.callerWaiting)) {
      pthread_mutex_lock(&tessera_pool.lock);
      pthread_cond_signal(&tessera_pool.finished);
      pthread_mutex_unlock(&tessera_pool.lock);
    }
  }
}

static void* tessera_worker(void* arg) {
  const int t = (int)(intptr_t)arg;
  uint32_t seen = atomic_load(&tessera_pool.generation);
  for (;;) {
    long until = tessera_now_ns() + tessera_pool.spinNs;
    for (int i = 1; atomic_load_explicit(&tessera_pool.generation, memory_order_acquire) == seen && !atomic_load(&tessera_pool.stop); i++) {
      tessera_pause();
      if ((i & 63) != 0) continue;
      const long now = tessera_now_ns();
      /* while the caller still runs its last chunks the next loop is near: the spin counts from the loop's end */
      if (atomic_load_explicit(&tessera_pool.done, memory_order_relaxed) < atomic_load_explicit(&tessera_pool.chunks, memory_order_relaxed)) until = now + tessera_pool.spinNs;
      if (now > until) {
        pthread_mutex_lock(&tessera_pool.lock);
        atomic_fetch_add(&tessera_pool.sleepers, 1);
        while (atomic_load(&tessera_pool.generation) == seen && !atomic_load(&tessera_pool.stop)) {
          atomic_fetch_add_explicit(&tessera_pool.naps, 1, memory_order_relaxed);
          pthread_cond_wait(&tessera_pool.wake, &tessera_pool.lock);
        }
        atomic_fetch_sub(&tessera_pool.sleepers, 1);
        pthread_mutex_unlock(&tessera_pool.lock);
      }
    }
    if (atomic_load(&tessera_pool.stop)) return 0;
    seen = atomic_load(&tessera_pool.generation);
    tessera_work(t, tessera_pool.threads, seen);
  }
}

static void tessera_stop_workers(void) {
  if (tessera_pool.started == 0) return;
  atomic_store(&tessera_pool.stop, 1);
  pthread_mutex_lock(&tessera_pool.lock);
  pthread_cond_broadcast(&tessera_pool.wake);
  pthread_mutex_unlock(&tessera_pool.lock);
  for (int t = 1; t < tessera_pool.started; t++) pthread_join(tessera_pool.workers[t], 0);
  tessera_pool.started = 0;
  atomic_store(&tessera_pool.stop, 0);
}

/* the threads the next loops run on (the caller and n - 1 workers); not while a loop runs */
int tessera_set_num_threads(int n) {
  n = n < 1 ? 1 : n > TESSERA_MAX_THREADS ? TESSERA_MAX_THREADS : n;
  if (tessera_pool.started != 0 && tessera_pool.started != n) tessera_stop_workers();
  tessera_pool.threads = n;
  return n;
}
int tessera_get_num_threads(void) { return tessera_threads_now(); }

${linkage}void tessera_parallel_for_chunks(tessera_task fn, const void* args, int64_t extent, int per_thread) {
  if (extent <= 0) return;
  const int n = tessera_threads_now();
  if (n == 1 || extent == 1 || tessera_in_task || atomic_flag_test_and_set(&tessera_pool.busy)) {
    fn(args, 0, extent);
    return;
  }
  if (tessera_pool.started != n) {
    const char* s = getenv("TESSERA_SPIN_NS");
    tessera_pool.spinNs = s && atol(s) >= 0 ? atol(s) : TESSERA_SPIN_NS;
    for (int t = 1; t < n; t++)
      if (pthread_create(&tessera_pool.workers[t], 0, tessera_worker, (void*)(intptr_t)t) != 0) {
        fprintf(stderr, "tessera: cannot start a worker thread\\n");
        abort();
      }
    tessera_pool.started = n;
  }
  const int64_t most = (int64_t)n * (per_thread < 1 ? 1 : per_thread > TESSERA_CHUNKS_PER_THREAD ? TESSERA_CHUNKS_PER_THREAD : per_thread);
  const int64_t chunks = extent < most ? extent : most;
  const uint32_t g = atomic_load(&tessera_pool.generation) + 1;
  atomic_store_explicit(&tessera_pool.fn, fn, memory_order_relaxed);
  atomic_store_explicit(&tessera_pool.args, args, memory_order_relaxed);
  atomic_store_explicit(&tessera_pool.extent, extent, memory_order_relaxed);
  atomic_store_explicit(&tessera_pool.chunks, chunks, memory_order_relaxed);
  atomic_store(&tessera_pool.done, 0);
  for (int t = 0; t < n; t++)
    atomic_store_explicit(&tessera_pool.home[t].next, (uint64_t)g << 32 | (uint64_t)(t * chunks / n) << 16 | (uint64_t)((t + 1) * chunks / n), memory_order_relaxed);
  atomic_store(&tessera_pool.generation, g);
  if (atomic_load(&tessera_pool.sleepers) > 0) {
    pthread_mutex_lock(&tessera_pool.lock);
    pthread_cond_broadcast(&tessera_pool.wake);
    pthread_mutex_unlock(&tessera_pool.lock);
  }
  tessera_work(0, n, g);
  /* a worker runs its last chunk: spin up to TESSERA_CALLER_SPIN_NS, then sleep */
  const long until = tessera_now_ns() + TESSERA_CALLER_SPIN_NS;
  for (int i = 1; atomic_load_explicit(&tessera_pool.done, memory_order_acquire) < chunks; i++) {
    tessera_pause();
    if ((i & 63) == 0 && tessera_now_ns() > until) {
      pthread_mutex_lock(&tessera_pool.lock);
      atomic_store(&tessera_pool.callerWaiting, 1);
      while (atomic_load(&tessera_pool.done) < chunks) pthread_cond_wait(&tessera_pool.finished, &tessera_pool.lock);
      atomic_store(&tessera_pool.callerWaiting, 0);
      pthread_mutex_unlock(&tessera_pool.lock);
    }
  }
  atomic_flag_clear(&tessera_pool.busy);
}
${linkage}void tessera_parallel_for(tessera_task fn, const void* args, int64_t extent) { tessera_parallel_for_chunks(fn, args, extent, TESSERA_CHUNKS_PER_THREAD); }
`
