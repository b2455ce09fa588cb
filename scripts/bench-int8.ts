// `npm run bench -- --int8`: ResNet-18 and MobileNetV2 from the zoo quantized by `tessera
// quantize`'s pass (QDQ, per-channel weights, 32 seeded calibration inputs; scripts/int8-models.ts),
// then Tessera c and onnxruntime-node on the same int8 file, with Tessera c on the fp32 network
// beside them, at 1 and 2 threads (a process each, as the fp32 bench), the three alternating in
// blocks in one run: medians, and the ratios int8 / onnxruntime int8 and int8 / fp32 (< 1: faster).
// `--models a,b` picks the networks; `--int8-dir DIR` keeps the quantized files between runs.
import { Effect } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import type { Tensor } from "../src/ast/graph/tensor.js"
import { decodeModelSync } from "../src/ast/onnx/decode.js"
import { BACKENDS } from "../src/backend/index.js"
import { hostCpu } from "../src/device/host.js"
import { loadOrt, median, openOrtSession, settle } from "../src/device/onnxruntime.js"
import { peakGflops } from "../src/device/peak.js"
import { compileGraph, loadProgram } from "../src/pipeline.js"
import { zooGraph } from "../src/zoo/index.js"
import { INT8_MODELS, int8Folder, int8Model, MEASURE_SEED, zooInputs } from "./int8-models.js"

const RUNS = Number(process.env.BENCH_RUNS ?? 10)
const BLOCK = 5

interface Int8Row {
  readonly model: string
  readonly threads: number
  readonly int8?: number
  readonly ortInt8?: number
  readonly fp32?: number
  /** Largest |Tessera int8 - onnxruntime int8| over the output. */
  readonly diff?: number
  readonly error?: string
}

const maxAbs = (a: Tensor, b: ArrayLike<number>): number => {
  let m = 0
  for (let i = 0; i < b.length; i++) m = Math.max(m, Math.abs(Number(a.data[i]) - b[i]))
  return m
}

const timeBlock = (f: () => void, n: number, into: number[]) => {
  f()
  for (let i = 0; i < n; i++) {
    const t0 = performance.now()
    f()
    into.push(performance.now() - t0)
  }
}

const measureChild = async (threads: number, models: readonly string[], dir: string): Promise<Int8Row[]> => {
  const ort = await Effect.runPromise(loadOrt())
  const rows: Int8Row[] = []
  for (const name of models) {
    try {
      const bytes = new Uint8Array(fs.readFileSync(`${dir}/${name}.int8.onnx`))
      const int8Graph = decodeModelSync(bytes)
      const fp32Graph = zooGraph(name, 0)
      const feeds = zooInputs(name, 1, MEASURE_SEED)[0]
      const target = BACKENDS.c.target(hostCpu(), threads)
      const int8 = await Effect.runPromise(loadProgram(await Effect.runPromise(compileGraph(int8Graph, target, { optLevel: 3 })), target, { threads }))
      const fp32 = await Effect.runPromise(loadProgram(await Effect.runPromise(compileGraph(fp32Graph, target, { optLevel: 3 })), target, { threads }))
      const session = typeof ort === "string" ? undefined : await Effect.runPromise(openOrtSession(ort, bytes, feeds, threads))
      const ts = { int8: [] as number[], ort: [] as number[], fp32: [] as number[] }
      try {
        while (ts.int8.length < RUNS) {
          const n = Math.min(BLOCK, RUNS - ts.int8.length)
          await settle()
          timeBlock(() => void int8.run(feeds), n, ts.int8)
          if (session && typeof session !== "string") {
            await settle()
            await session.time()
            for (let i = 0; i < n; i++) ts.ort.push(await session.time())
          }
          await settle()
          timeBlock(() => void fp32.run(feeds), n, ts.fp32)
        }
        const ours = int8.run(feeds)
        const theirs = session && typeof session !== "string" ? [...session.outputs().values()][0] : undefined
        rows.push({
          model: name,
          threads,
          int8: median(ts.int8),
          fp32: median(ts.fp32),
          ...(ts.ort.length ? { ortInt8: median(ts.ort) } : {}),
          ...(theirs ? { diff: maxAbs([...ours.values()][0], theirs.data as ArrayLike<number>) } : {}),
        })
      } finally {
        if (session && typeof session !== "string") await session.release()
        int8.module.close()
        fp32.module.close()
      }
    } catch (e) {
      rows.push({ model: name, threads, error: (e instanceof Error ? e.message : String(e)).split("\n")[0].slice(0, 300) })
    }
  }
  return rows
}

export const benchInt8 = async (args: readonly string[]): Promise<void> => {
  const childAt = args.indexOf("--child")
  const picked = args.includes("--models") ? args[args.indexOf("--models") + 1].split(",").map((s) => s.trim()) : [...INT8_MODELS]
  const dir = int8Folder(args)
  if (childAt >= 0) {
    console.log(JSON.stringify(await measureChild(Number(args[childAt + 1]), picked, dir)))
    return
  }
  const unavailable = BACKENDS.c.unavailable()
  if (unavailable !== undefined) {
    console.log(`the c target is unavailable here (${unavailable}): nothing to measure`)
    return
  }
  for (const name of picked) int8Model(name, dir, (l) => console.log(l))
  const lanes = Math.max(1, hostCpu().vectorLanes)
  const peak = peakGflops(lanes)
  const rows: Int8Row[] = []
  for (const threads of [1, 2]) {
    const r = spawnSync(process.execPath, [process.argv[1], "--int8", "--child", String(threads), "--models", picked.join(","), "--int8-dir", dir], {
      env: { ...process.env, OMP_NUM_THREADS: String(threads) },
      encoding: "utf8",
      maxBuffer: 64 << 20,
    })
    try {
      rows.push(...(JSON.parse(r.stdout.trim().split("\n").pop() ?? "") as Int8Row[]))
    } catch {
      console.log(`the ${threads}-thread run failed:\n${r.stderr.slice(-2000)}`)
    }
  }
  const f = (x: number | undefined) => (x === undefined ? "-" : x.toFixed(1))
  const ratio = (a: number | undefined, b: number | undefined) => (a && b ? (a / b).toFixed(2) : "-")
  console.log(`cpu: ${os.cpus()[0]?.model ?? "unknown"}, ${os.cpus().length} cores (shared with other work: medians, ratios within one run); peak fp32 (one core, measured): ${peak ? `${peak.toFixed(0)} GFLOP/s` : "unknown (no gcc)"}; ${RUNS} runs a side, medians`)
  console.log("| model | threads | tessera c int8 ms | onnxruntime-node int8 ms | tessera c fp32 ms | int8 / ort int8 | int8 / fp32 | max abs diff vs ort |")
  console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
  for (const r of rows)
    console.log(`| ${r.model} | ${r.threads} | ${f(r.int8)} | ${f(r.ortInt8)} | ${f(r.fp32)} | ${ratio(r.int8, r.ortInt8)} | ${ratio(r.int8, r.fp32)} | ${r.diff === undefined ? "-" : r.diff.toExponential(1)} |`)
  for (const r of rows) if (r.error) console.log(`${r.model}, ${r.threads} thread(s): failed: ${r.error}`)
  console.log("goals (issue 20): int8 / ort int8 ≤ 0.8; int8 / fp32 ≤ 0.5")
}
