// The c target's thread pool (src/emit/c/pool.ts) keeps its workers awake across the executor's gap
// between runs: after a parallel loop ends, a worker spins POOL_SPIN_NS before it sleeps, so a run
// that starts within that gap finds it spinning (a sleeping worker costs the next run's first region
// the caller's futex wake and the worker's late start: docs/scheduling.md, the sixteenth session).
// Law: on 2 threads, for any gap up to half of POOL_SPIN_NS after a short loop ends, no worker has
// gone to sleep (the pool's \`naps\` count is unchanged). A case counts only where the caller ran
// through (the loop within a quarter of the spin of the count's first read, the count's last read
// within a quarter past the gap): a worker sleeps only once its own clock is past the spin from the
// last time it saw a loop running (or it leaves its spin at a new loop before it checks the clock),
// so in such a case a sleep cannot fall between the reads — whatever the scheduler does to the worker
// — and the law holds on a loaded machine. With the spin at its old 20 µs it fails.
import * as fc from "fast-check"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { buildC, compilerAvailable, C_POOL_FLAGS, defaultCBuildConfig } from "../../src/device/c/build.js"
import { loadC } from "../../src/device/c/load.js"
import { cPool, POOL_SPIN_NS } from "../../src/emit/c/pool.js"

/**
 * `gap(e, out)`: a 2-thread loop to wake the worker (then waits, up to a second, until no worker is
 * asleep), a loop of 64 iterations of 1 µs, then a busy wait of e[0] ns from its end; out[0] the
 * worker's naps over the loop and the wait, out[1] 1 where the worker could not be woken, out[2] the
 * ns from the naps' first read to the loop's end, out[3] from the loop's end to their last read.
 */
const HARNESS = `#include <stdint.h>
${cPool("static ")}
static void tessera_law_spin(const void* a, int64_t lo, int64_t hi) {
  (void)a;
  for (int64_t i = lo; i < hi; i++) {
    const long t0 = tessera_now_ns();
    while (tessera_now_ns() - t0 < 1000) tessera_pause();
  }
}
void gap(const float* e, int32_t* out) {
  const long g = (long)e[0];
  tessera_parallel_for(tessera_law_spin, 0, 64);
  const long deadline = tessera_now_ns() + 1000000000L;
  while (atomic_load(&tessera_pool.sleepers) > 0 && tessera_now_ns() < deadline) tessera_pause();
  out[1] = atomic_load(&tessera_pool.sleepers) > 0;
  const long start = tessera_now_ns();
  const long naps = atomic_load(&tessera_pool.naps);
  tessera_parallel_for(tessera_law_spin, 0, 64);
  const long end = tessera_now_ns();
  while (tessera_now_ns() - end < g) tessera_pause();
  out[0] = (int32_t)(atomic_load(&tessera_pool.naps) - naps);
  const long check = tessera_now_ns();
  out[2] = (int32_t)(end - start < 2000000000L ? end - start : 2000000000L);
  out[3] = (int32_t)(check - end < 2000000000L ? check - end : 2000000000L);
}
`

describe.skipIf(!compilerAvailable())("c pool: a worker spins through the executor's gap between runs", () => {
  it("no worker sleeps within half of POOL_SPIN_NS after a loop ends (2 threads, random gaps)", async () => {
    const so = await Effect.runPromise(buildC(HARNESS, defaultCBuildConfig(C_POOL_FLAGS)))
    const mod = await Effect.runPromise(
      loadC(so, [{ name: "gap", params: [{ dtype: "float32", elements: 1 }, { dtype: "int32", elements: 4 }] }], 2),
    )
    const run = (g: number) => {
      const out = new Int32Array(4)
      mod.kernels.get("gap")!(Float32Array.of(g), out)
      return { naps: out[0], unwoken: out[1], loop: out[2], after: out[3] }
    }
    fc.assert(
      fc.property(fc.integer({ min: 0, max: POOL_SPIN_NS / 2 }), (g) => {
        const r = run(g)
        fc.pre(r.unwoken === 0 && r.loop <= POOL_SPIN_NS / 4 && r.after <= g + POOL_SPIN_NS / 4)
        expect(r.naps).toBe(0)
      }),
      { seed: 28, numRuns: 24 },
    )
  })
})
