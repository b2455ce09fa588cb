// The esbuild plugin (`tessera/esbuild`): `import model from "./net.onnx"` compiles the model at
// build time — for the wasm or js target, with input shapes, an opt level and a tuning log — into
// an ES module and two assets: the kernels (`.wasm`, or `.js` for the js target) and the packed
// program (`.bin`: the optimized graph's constants and what the executor needs). The module exports
// `run(feeds) → Promise<outputs>`, the input and output names, shapes and dtypes; typings are
// written beside the model (`net.d.onnx.ts`, TypeScript's name for a `.onnx` import's types). The
// same model and options give the same bytes; a model Tessera cannot take is an esbuild error on
// the model's file, with the node and the op the compiler names; a tuning log that cannot be read is
// an error on the log, and its lines that are not records (and records outside their template's
// knobs) are warnings on it.
import { readFileSync, writeFileSync, existsSync } from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { Effect } from "effect"
import type { Plugin, PluginBuild } from "esbuild"
import { cpuAttrs, type Target } from "../ast/target.js"
import { backendOf } from "../backend/index.js"
import { compileGraph, emitArtifact } from "../pipeline.js"
import { parseLog, recordsByWorkload, type TuningRecord } from "../search/records.js"
import { compileModel } from "../web/compile-model.js"
import { packProgram } from "../web/packed-program.js"

export interface TesseraPluginOptions {
  /** wasm (default) or js. */
  readonly target?: "wasm" | "js"
  /** Shapes binding the models' symbolic input dims, by input name. */
  readonly shapes?: Readonly<Record<string, readonly number[]>>
  /** The graph and TIR passes' opt level (0–3, default 3). */
  readonly optLevel?: number
  /** A `tessera tune` log whose best records (for this target) the schedules take. */
  readonly tuningLog?: string
  /** Write `NAME.d.onnx.ts` beside each model (default true). */
  readonly typings?: boolean
  /** Where the module imports its runtime from (default: this package's). */
  readonly runtime?: string
}

const ASSETS = "tessera-asset"

/** This package's runtime: the built browser entry beside this bundle, or the source when run from src/. */
const defaultRuntime = (): string => {
  const here = fileURLToPath(import.meta.url)
  return here.endsWith(".ts") ? path.join(path.dirname(here), "../web/runtime.ts") : path.join(path.dirname(here), "browser.js")
}

/** The error's own message, and its node and op where it names them. */
const diagnostic = (file: string, e: unknown) => {
  const err = e as { _tag?: string; message?: string; node?: string; op?: string }
  const tag = typeof err?._tag === "string" ? err._tag : "Error"
  const where = err.node !== undefined ? ` (node '${err.node}', op ${err.op})` : ""
  return {
    text: `tessera cannot compile ${path.basename(file)}${where}: ${err.message ?? String(e)}`,
    location: { file, namespace: "file", line: 1, column: 0, length: 0, lineText: "" },
    notes: [{ text: `${tag}: 'tessera inspect ${path.basename(file)}' lists the model's operators` }],
    detail: e,
  }
}

/** A message on the tuning log (on a line of it where one is named). */
const logMessage = (log: string, text: string, line?: number) => ({
  text: `tessera: tuning log ${path.basename(log)}${line !== undefined ? `, line ${line}` : ""}: ${text}`,
  location: { file: log, namespace: "file", ...(line !== undefined ? { line, column: 0 } : {}) },
})

/**
 * The tuning log's records, and a warning for each line that is not one (parseLog's reasons: cut
 * off, not a record, another version, implausible, a duplicate); a log that cannot be read is an
 * error on it, never an exception out of the build.
 */
const readTuningLog = (file: string): { readonly records: readonly TuningRecord[]; readonly warnings: ReturnType<typeof logMessage>[] } | { readonly error: ReturnType<typeof logMessage> } => {
  let text: string
  try {
    text = readFileSync(file, "utf8")
  } catch (e) {
    return { error: logMessage(file, `cannot be read (${e instanceof Error ? e.message : String(e)})`) }
  }
  const log = parseLog(text)
  return { records: log.records, warnings: log.skipped.map((k) => logMessage(file, `${k.detail}, skipped`, k.line)) }
}

interface IoInfo {
  readonly name: string
  readonly dtype: string
  readonly shape: readonly (number | string)[]
}

/** The module's source: assets imported as URLs, loaded on the first run. */
const moduleSource = (o: { runtime: string; code: string; program: string; node: boolean; artifact: object; inputs: IoInfo[]; outputs: IoInfo[] }): string => `// compiled by tessera at build time
import { loadPackedModel } from ${JSON.stringify(o.runtime)}
import codeUrl from ${JSON.stringify(o.code)}
import programUrl from ${JSON.stringify(o.program)}
${o.node ? 'import { readFile } from "node:fs/promises"\n' : ""}
const info = ${JSON.stringify(o.artifact)}
export const inputs = ${JSON.stringify(o.inputs)}
export const outputs = ${JSON.stringify(o.outputs)}
export const inputNames = inputs.map((i) => i.name)
export const outputNames = outputs.map((o) => o.name)
const bytes = async (url) => {
  const at = new URL(url, import.meta.url)
  ${o.node ? "return new Uint8Array(await readFile(at))" : "const r = await fetch(at)\n  if (!r.ok) throw new Error(`cannot fetch ${at}: ${r.status}`)\n  return new Uint8Array(await r.arrayBuffer())"}
}
let loaded
/** Loads the model (once) and runs it: outputs by name for inputs by name. */
export const run = async (feeds) => {
  loaded ??= Promise.all([bytes(codeUrl), bytes(programUrl)]).then(([code, program]) =>
    loadPackedModel(program, { ...info, files: new Map([[info.manifest.module, code]]) }))
  return (await loaded).run(feeds)
}
export default { run, inputs, outputs, inputNames, outputNames }
`

const ARRAYS: Readonly<Record<string, string>> = { float32: "Float32Array", float64: "Float64Array", int32: "Int32Array", int64: "Float64Array", int8: "Int8Array", uint8: "Uint8Array", int16: "Int16Array", uint16: "Uint16Array", bool: "Uint8Array", float16: "Uint16Array" }

/** The typings of one model's module. */
const typingsSource = (file: string, inputs: IoInfo[], outputs: IoInfo[]): string => {
  const io = (xs: IoInfo[]) => `readonly [${xs.map((x) => `{ readonly name: ${JSON.stringify(x.name)}; readonly dtype: ${JSON.stringify(x.dtype)}; readonly shape: readonly [${x.shape.map((d) => JSON.stringify(d)).join(", ")}] }`).join(", ")}]`
  const feeds = inputs.map((i) => `readonly ${JSON.stringify(i.name)}: ${ARRAYS[i.dtype] ?? "ArrayLike<number>"}`).join("; ")
  const outs = outputs.map((o) => `readonly ${JSON.stringify(o.name)}: { readonly dtype: ${JSON.stringify(o.dtype)}; readonly shape: readonly number[]; readonly data: ${ARRAYS[o.dtype] ?? "ArrayLike<number>"} }`).join("; ")
  return `// written by tessera's esbuild plugin for ${path.basename(file)}: the module \`import model from "./${path.basename(file)}"\` gives
export declare const inputs: ${io(inputs)}
export declare const outputs: ${io(outputs)}
export declare const inputNames: readonly [${inputs.map((i) => JSON.stringify(i.name)).join(", ")}]
export declare const outputNames: readonly [${outputs.map((o) => JSON.stringify(o.name)).join(", ")}]
export declare const run: (feeds: { ${feeds} }) => Promise<{ ${outs} }>
declare const model: { readonly run: typeof run; readonly inputs: typeof inputs; readonly outputs: typeof outputs; readonly inputNames: typeof inputNames; readonly outputNames: typeof outputNames }
export default model
`
}

/** The plugin: every `.onnx` import compiled with these options. */
export const tessera = (o: TesseraPluginOptions = {}): Plugin => ({
  name: "tessera",
  setup(build: PluginBuild) {
    const kind = o.target ?? "wasm"
    if (kind !== "wasm" && kind !== "js") throw new Error(`tessera: target '${String(kind)}' is not one the plugin builds (wasm, js)`)
    // the portable targets' attributes are fixed (no host is read: the same bytes on every machine)
    const target = backendOf(kind).target(cpuAttrs(), 1) as Target
    const assets = new Map<string, Uint8Array>()
    const node = build.initialOptions.platform === "node"
    const runtime = o.runtime ?? defaultRuntime()
    build.onResolve({ filter: /\.onnx$/ }, (a) => (a.namespace === "file" || a.namespace === "" ? { path: path.resolve(a.resolveDir, a.path), namespace: "tessera-model" } : undefined))
    build.onResolve({ filter: /.*/, namespace: "tessera-model" }, (a) => (assets.has(a.path) ? { path: a.path, namespace: ASSETS } : undefined))
    build.onLoad({ filter: /.*/, namespace: ASSETS }, (a) => ({ contents: assets.get(a.path)!, loader: "file" }))
    build.onLoad({ filter: /.*/, namespace: "tessera-model" }, (a) => {
      const file = a.path
      const bytes = new Uint8Array(readFileSync(file))
      // (every record of the target, of which compileGraph applies the best that fits each template, as `tessera compile --tuned` does)
      const log = o.tuningLog !== undefined ? readTuningLog(o.tuningLog) : undefined
      if (log && "error" in log) return { errors: [log.error], watchFiles: [file, o.tuningLog!] }
      const tuned = log ? recordsByWorkload(log.records, kind) : undefined
      const shapes = new Map(Object.entries(o.shapes ?? {}).map(([k, v]) => [k, [...v]] as const))
      const compiled = Effect.runSync(Effect.result(compileModel({ compileGraph, emitArtifact }, bytes, target, { optLevel: o.optLevel ?? 3, shapes, ...(tuned ? { tuned } : {}) })))
      if (compiled._tag === "Failure") return { errors: [diagnostic(file, compiled.failure)], watchFiles: [file] }
      const { program, artifact } = compiled.success
      // a log's lines that are not records, and records outside their template's knobs: warnings on the log
      const warnings = log ? [...log.warnings, ...program.tuning.skipped.map((x) => logMessage(o.tuningLog!, `group ${x.group}: ${x.reason}, not applied`))] : []
      const g = program.graph
      const io = (vs: readonly { name: string; type: { dtype: string; shape: readonly (number | string)[] } }[]): IoInfo[] =>
        vs.map((v) => { const t = g.valueTypes.get(v.name) ?? v.type; return { name: v.name, dtype: t.dtype, shape: t.shape } })
      const inputs = io(g.inputs)
      const outputs = io(g.outputs)
      const module = String(artifact.manifest.module)
      const base = path.basename(file, ".onnx")
      // (asset paths beside the model: the file loader names each output after it, with its hash)
      const code = path.join(path.dirname(file), `${base}${path.extname(module)}`)
      const programName = path.join(path.dirname(file), `${base}.bin`)
      assets.set(code, artifact.files.get(module)!)
      assets.set(programName, packProgram(program))
      if (o.typings !== false) {
        const dts = path.join(path.dirname(file), `${base}.d.onnx.ts`)
        const text = typingsSource(file, inputs, outputs)
        if (!existsSync(dts) || readFileSync(dts, "utf8") !== text) writeFileSync(dts, text)
      }
      const info = { kind: artifact.kind, manifest: artifact.manifest, kernels: artifact.kernels }
      return { warnings, contents: moduleSource({ runtime, code, program: programName, node, artifact: info, inputs, outputs }), loader: "js", resolveDir: path.dirname(file), watchFiles: [file, ...(o.tuningLog ? [o.tuningLog] : [])] }
    })
  },
})

export default tessera
