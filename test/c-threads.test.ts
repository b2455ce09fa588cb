// The c device's thread count reaches OpenMP from the thread that loads the library and calls its
// kernels — not only through OMP_NUM_THREADS, which a Node worker thread (where the CLI runs every
// command) cannot set for the process: `tessera bench --threads 1` once ran its c kernels on every
// core. The count read back is the one OpenMP's next parallel region on this thread would use.
import { Effect } from "effect"
import { mkdtempSync } from "node:fs"
import koffi from "koffi"
import * as os from "node:os"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { buildC, compilerAvailable, defaultCBuildConfig } from "../src/device/c/build.js"
import { loadC } from "../src/device/c/load.js"

const HAVE_GCC = compilerAvailable()

// A kernel that reports the team size of its own parallel region: what the kernels' loops run on.
const SOURCE = `#include <omp.h>
void team(float* out) {
  int n = 0;
  #pragma omp parallel
  {
    #pragma omp single
    n = omp_get_num_threads();
  }
  out[0] = (float)n;
}
`

describe("c device: OpenMP threads", () => {
  it.skipIf(!HAVE_GCC)("loadC's thread count is what the library's parallel regions run on (1 and 3, whatever the environment says)", async () => {
    const config = { ...defaultCBuildConfig(), cacheDir: mkdtempSync(path.join(os.tmpdir(), "tessera-threads-")) }
    const so = await Effect.runPromise(buildC(SOURCE, config))
    const team = async (threads: number): Promise<number> => {
      const mod = await Effect.runPromise(loadC(so, [{ name: "team", params: [{ dtype: "float32", elements: 1 }] }], threads))
      const out = new Float32Array(1)
      mod.kernels.get("team")!(out)
      return out[0]
    }
    expect(await team(3)).toBe(3)
    expect(await team(1)).toBe(1)
    // and what OpenMP reports for this thread afterwards
    const maxThreads = koffi.load(so).func("int omp_get_max_threads()") as () => number
    expect(maxThreads()).toBe(1)
  })
})
