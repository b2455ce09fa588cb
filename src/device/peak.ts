// This CPU's peak fp32 FLOP rate on one core, measured: the roof that `npm run bench` and
// `npm run layer-compare` state their GFLOP/s against (a kernel's share of it says how much a
// better schedule could still gain).
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { compilerAvailable } from "./c/build.js"
import { runProbeSync } from "./process-group.js"

/**
 * Peak single-core fp32 FLOP/s: independent vector FMAs in registers, at this CPU's vector width
 * (10 accumulators: enough to cover the FMA latency, few enough for AVX2's 16 registers).
 */
export const peakGflops = (lanes: number): number | undefined => {
  if (!compilerAvailable()) return undefined
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "tessera-peak-"))
  const src = path.join(dir, "peak.c")
  fs.writeFileSync(
    src,
    `#include <stdio.h>
#include <time.h>
#define LANES ${lanes}
#define ACC 10
typedef float vf __attribute__((vector_size(4 * LANES)));
int main(void) {
  vf a[ACC], b = {0}, c = {0};
  for (int i = 0; i < LANES; i++) { b[i] = 1.0f + 1e-7f * i; c[i] = 1e-7f; }
  for (int k = 0; k < ACC; k++) a[k] = b * (float)k;
  const long iters = 50000000;
  struct timespec t0, t1; clock_gettime(CLOCK_MONOTONIC, &t0);
  for (long i = 0; i < iters; i++) for (int k = 0; k < ACC; k++) a[k] = a[k] * b + c;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double s = (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec);
  float sink = 0; for (int k = 0; k < ACC; k++) sink += a[k][k % LANES];
  printf("%f %f\\n", 2.0 * LANES * ACC * iters / s / 1e9, sink);
  return 0;
}
`,
  )
  try {
    // (probes: their own process groups, killed on a stop — ./process-group.ts runProbeSync)
    const probe = (cmd: string, args: readonly string[]) => {
      const r = runProbeSync(cmd, args)
      if (r.code !== 0) throw new Error(`${[cmd, ...args].join(" ")}: ${r.stopped ? "stopped" : `exit code ${r.code}`}`)
      return r.stdout
    }
    probe("gcc", ["-O3", "-march=native", "-o", path.join(dir, "peak"), src])
    const out = probe(path.join(dir, "peak"), []).trim().split(" ")
    return Number(out[0])
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}
