// The CLI for a GPU machine that has no Node and no node_modules (scripts/gpu-node-check.sh):
// writes DIR (default .gpu/tessera) with main.js and commands.js — the CLI bundled with every
// dependency but the native and optional ones (run: node DIR/main.js …) — and the two packages it loads at run time, koffi and its
// linux-x64 binary, copied from node_modules; plus, for ResNet-18 from the zoo (seeded weights), a
// seeded input and onnxruntime-node's CPU outputs for it and the model's sha256 (DIR/ref), which the
// check compares with (it writes the model itself with `tessera zoo`).
// The lead packs a node binary at .gpu/node/bin/node beside it. Run here after `npm run build`:
//   node scripts/gpu-node-bundle.mjs [--out .gpu/tessera]
import { build } from "esbuild"
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { createRequire } from "node:module"

const i = process.argv.indexOf("--out")
const out = i >= 0 ? process.argv[i + 1] : ".gpu/tessera"
fs.rmSync(out, { recursive: true, force: true })
fs.mkdirSync(path.join(out, "node_modules", "@koromix"), { recursive: true })
await build({
  // (gpu-prepare too: with --references it writes the cuda artifacts on the GPU machine; gpu-tune-apply to turn a sweep into a tuning log there)
  entryPoints: { main: "src/cli/main.ts", commands: "src/cli/commands.ts", "gpu-prepare": "scripts/gpu-prepare.ts", "gpu-tune-apply": "scripts/gpu-tune-apply.ts" },
  outdir: out,
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  external: ["koffi", "onnxruntime-node", "vega", "vega-lite", "@viz-js/viz"],
  // (CommonJS dependencies bundled into ESM call require)
  banner: { js: 'import { createRequire as __tesseraRequire } from "node:module"; const require = __tesseraRequire(import.meta.url);' },
  logLevel: "warning",
})
fs.writeFileSync(path.join(out, "package.json"), '{ "type": "module" }\n')
const req = createRequire(import.meta.url)
const koffiDir = fs.realpathSync(path.dirname(req.resolve("koffi")))
fs.cpSync(koffiDir, path.join(out, "node_modules", "koffi"), { recursive: true, dereference: true, filter: (p) => !p.includes(`${path.sep}doc${path.sep}`) && !p.includes(`${path.sep}vendor${path.sep}`) && !p.includes(`${path.sep}lib${path.sep}native`) })
const bin = path.join(path.dirname(koffiDir), "@koromix", "koffi-linux-x64")
fs.cpSync(bin, path.join(out, "node_modules", "@koromix", "koffi-linux-x64"), { recursive: true, dereference: true, filter: (p) => !p.includes("musl") })
// ml-xgboost (the tuner's cost model, required at run time) with its dependencies' closure
const copyPackage = (name, from, seen = new Set()) => {
  if (seen.has(name)) return
  seen.add(name)
  const dir = fs.realpathSync(path.dirname(createRequire(from).resolve(`${name}/package.json`)))
  fs.cpSync(dir, path.join(out, "node_modules", name), { recursive: true, dereference: true })
  const deps = JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8")).dependencies ?? {}
  for (const d of Object.keys(deps)) copyPackage(d, path.join(dir, "package.json"), seen)
}
copyPackage("ml-xgboost", import.meta.url)
// the model, a seeded input and onnxruntime's outputs for it
const ref = path.join(out, "ref")
fs.mkdirSync(ref, { recursive: true })
execFileSync(process.execPath, ["dist/scripts/gpu-node-ref.js", "resnet18", ref], { stdio: "inherit" })
// (the model is written again on the GPU machine by `tessera zoo resnet18`, checked by its sha256: 45 MB less to carry)
fs.rmSync(path.join(ref, "resnet18.onnx"))
const size = (p) => (fs.statSync(p).isDirectory() ? fs.readdirSync(p).reduce((s, f) => s + size(path.join(p, f)), 0) : fs.statSync(p).size)
console.log(`${out}: ${(size(out) / 2 ** 20).toFixed(1)} MiB`)
