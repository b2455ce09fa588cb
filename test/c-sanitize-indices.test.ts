// The c kernels of the indexing ops' ONNX conformance cases (Gather, GatherElements, GatherND,
// NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss, RotaryEmbedding, GridSample) built with
// -fsanitize=address,undefined and called straight, with no executor to check their indices: each
// from a C driver that gives every param a heap block of exactly its size and the integer params
// (the indices) values in range, negative, just past the end, ±1e9 and 2³²+1, the float ones (GridSample's
// coordinates) NaN, ±inf and far-out values too. No kernel may read or
// write outside its buffers for any of them (issue 19): the kernels clamp every index from data.
import { Effect } from "effect"
import { spawnSync } from "node:child_process"
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { DTYPE_INFO, isInteger } from "../src/ast/graph/dtype.js"
import { cpuAttrs } from "../src/ast/target.js"
import { paramsOf } from "../src/ast/tir/analysis.js"
import { backendOf } from "../src/backend/index.js"
import { C_FLAGS, compileFlags, compilerAvailable } from "../src/device/c/build.js"
import { readModelSync } from "../src/device/files.js"
import { emitC } from "../src/emit/c/emit.js"
import { compiledKernels } from "../src/lowering/program.js"
import { compileGraph } from "../src/pipeline.js"
import { ONNX_TESTS } from "./support/onnx-cases.js"

const NODE = path.join(ONNX_TESTS, "node")
const INDEXING = /^test_(gather|gather_elements|gathernd|nllloss|sce|rotary_embedding|gridsample)(_|$)/
const cases = existsSync(NODE) ? readdirSync(NODE).filter((d) => INDEXING.test(d) && !d.endsWith("_expanded")).sort() : []
const sanitizerWorks = (): boolean => {
  if (!compilerAvailable()) return false
  const dir = mkdtempSync(path.join(os.tmpdir(), "tessera-asan-probe-"))
  try {
    writeFileSync(path.join(dir, "p.c"), "int main(void) { return 0; }\n")
    const r = spawnSync("gcc", ["-fsanitize=address,undefined", "-o", path.join(dir, "p"), path.join(dir, "p.c")])
    return r.status === 0 && spawnSync(path.join(dir, "p")).status === 0
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}
const HAVE_ASAN = cases.length > 0 && sanitizerWorks()
const work = mkdtempSync(path.join(os.tmpdir(), "tessera-asan-"))
afterAll(() => rmSync(work, { recursive: true, force: true }))

/** Index values the driver cycles through: in range, negative, past either end, far out, 2³²+1. */
const INDEX_VALUES = [0, 1, 2, -1, -2, 3, 5, 7, 64, -65, 1e9, -1e9, 2 ** 32 + 1, 2 ** 31 - 1, -(2 ** 31)]

describe.skipIf(!HAVE_ASAN)("c kernels of the indexing ops under -fsanitize=address,undefined", () => {
  it(`${cases.length} conformance cases: every index value, no access outside a buffer`, async () => {
    const target = backendOf("c").target(cpuAttrs(), 1)
    let kernels = 0
    for (const name of cases) {
      const graph = readModelSync(path.join(NODE, name, "model.onnx"))
      const program = await Effect.runPromise(compileGraph(graph, target))
      const funcs = compiledKernels(program).map((k) => k.func)
      if (funcs.length === 0) continue
      kernels += funcs.length
      const emitted = emitC(funcs, { libName: "k" })
      const dir = path.join(work, name)
      rmSync(dir, { recursive: true, force: true })
      mkdirSync(dir)
      writeFileSync(path.join(dir, emitted.prelude.file), emitted.prelude.source)
      writeFileSync(path.join(dir, "k.h"), emitted.header)
      for (const u of emitted.units) writeFileSync(path.join(dir, u.file), u.source)
      // the driver: each param its own heap block of exactly its size (ASan's redzones around it)
      const calls = funcs.map((f) => {
        const ps = paramsOf(f)
        const lines = ps.map((p, j) => {
          const t = DTYPE_INFO[p.dtype].c
          const fill = isInteger(p.dtype) ? `(${t})(long long)IDX[i % NIDX]` : `(${t})((double)(i % 7) * 0.25)`
          return `  ${t}* b${j} = (${t}*)malloc(sizeof(${t}) * ${Math.max(1, p.elements)});\n  for (long i = 0; i < ${p.elements}; i++) b${j}[i] = ${fill};`
        })
        return [
          `  { /* ${f.name} */`,
          ...lines,
          `  for (int r = 0; r < NIDX; r++) {`,
          ...ps.flatMap((p, j) =>
            isInteger(p.dtype)
              ? [`    for (long i = 0; i < ${p.elements}; i++) b${j}[i] = (${DTYPE_INFO[p.dtype].c})(long long)IDX[(i + r) % NIDX];`]
              : // coordinates from data too (GridSample's grid): after the first round, NaN, ±inf and far-out values among them
                p.dtype === "float32" || p.dtype === "float64"
                ? [`    if (r > 0) for (long i = 0; i < ${p.elements}; i++) b${j}[i] = (${DTYPE_INFO[p.dtype].c})FLT[(i + r) % NFLT];`]
                : [],
          ),
          `    ${f.name}(${ps.map((_, j) => `b${j}`).join(", ")});`,
          `  }`,
          ...ps.map((_, j) => `  free(b${j});`),
          `  }`,
        ].join("\n")
      })
      const driver = [
        `#include <stdlib.h>`,
        `#include "k.h"`,
        `static const double IDX[] = { ${INDEX_VALUES.map((v) => v.toFixed(1)).join(", ")} };`,
        `#define NIDX ${INDEX_VALUES.length}`,
        `#include <math.h>`,
        `static const double FLT[] = { 0.25, -0.5, 1.5, NAN, INFINITY, -INFINITY, 1e30, -1e30, 3.0, -7.25, 0.0, 1.0, -1.0, 2.5, 1e9 };`,
        `#define NFLT 15`,
        `int main(void) {`,
        ...calls,
        `  return 0;`,
        `}`,
      ].join("\n")
      writeFileSync(path.join(dir, "driver.c"), driver)
      const exe = path.join(dir, "driver")
      const sources = [...emitted.units.map((u) => path.join(dir, u.file)), path.join(dir, "driver.c")]
      const cc = spawnSync("gcc", [...compileFlags(C_FLAGS).filter((f) => f !== "-fPIC"), "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer", "-I", dir, "-o", exe, ...sources, "-lm"], { encoding: "utf8" })
      expect(cc.status, `${name}: ${cc.stderr}`).toBe(0)
      const r = spawnSync(exe, { encoding: "utf8", env: { ...process.env, ASAN_OPTIONS: "detect_leaks=0", OMP_NUM_THREADS: "1" }, timeout: 60_000 })
      expect(r.stderr, name).toBe("")
      expect(r.status, `${name}: ${r.stderr}`).toBe(0)
    }
    expect(kernels).toBeGreaterThan(cases.length / 2)
  }, 600_000)
})
