// lowering.RewriteStorage: allocations of one dtype and scope, in sequence at the top of the
// function, whose uses do not overlap share one buffer (sized for the largest); `shared` ones
// never (each top-level part may be a GPU launch of its own, and shared memory lasts one). Runs on flat
// storage (after FlattenStorage); leaves any other function as it is. An intrinsic's regions are
// uses like stores and reads.
//
// Opt level 2: it only saves memory (a smaller working set), like TVM's StorageRewrite, which runs
// unless disabled; nothing downstream needs it.
import { mapExpr, type Expr } from "../../ast/te/expr.js"
import { mapStmt, type Buffer, type Region, type Stmt } from "../../ast/tir/tir.js"
import { tirPass } from "./tir-pass.js"

const uses = (s: Stmt, name: string): boolean => {
  let used = false
  mapStmt(
    s,
    (x) => {
      if (x.kind === "store" && x.buffer === name) used = true
      if (x.kind === "intrinsic" && [x.output, ...x.inputs].some((r) => r.buffer === name)) used = true
      return undefined
    },
    (e) => {
      mapExpr(e, (y) => {
        if (y.kind === "read" && y.source === name) used = true
        return undefined
      })
      return e
    },
  )
  return used
}

export const rewriteStorage = tirPass("lowering.RewriteStorage", 2, (f) => {
  // peel the chain of top-level allocations
  const allocs: Buffer[] = []
  let body = f.body
  while (body.kind === "allocate") {
    allocs.push(body.buffer)
    body = body.body
  }
  // (one statement, or one allocation, leaves no two lifetimes apart: nothing to share)
  if (body.kind !== "seq" || allocs.some((b) => b.shape.length !== 1)) return f
  const parts = body.body
  const span = new Map(
    allocs.map((b) => {
      const idx = parts.map((p, k) => (uses(p, b.name) ? k : -1)).filter((k) => k >= 0)
      return [b.name, { first: idx.length ? Math.min(...idx) : -1, last: idx.length ? Math.max(...idx) : -1 }] as const
    }),
  )
  const rename = new Map<string, string>()
  const kept: { buffer: Buffer; last: number }[] = []
  for (const b of allocs) {
    const sp = span.get(b.name)!
    // (a shared buffer is never handed on: on a GPU each top-level part is a launch of its own, and
    // shared memory lasts one launch — BERT's softmax on cuda had its sum reuse its max's partials)
    const host = b.scope === "shared" ? undefined : kept.find((k) => k.buffer.dtype === b.dtype && k.buffer.scope === b.scope && k.last < sp.first)
    if (host && sp.first >= 0) {
      rename.set(b.name, host.buffer.name)
      host.buffer = { ...host.buffer, shape: [Math.max(host.buffer.shape[0], b.shape[0])] }
      host.last = sp.last
    } else kept.push({ buffer: b, last: sp.last })
  }
  if (rename.size === 0) return f
  const g = (e: Expr): Expr => mapExpr(e, (x) => (x.kind === "read" && rename.has(x.source) ? { ...x, source: rename.get(x.source)!, indices: x.indices.map(g) } : undefined))
  const region = (r: Region): Region => (rename.has(r.buffer) ? { ...r, buffer: rename.get(r.buffer)! } : r)
  let out = mapStmt(
    body,
    (x) => {
      if (x.kind === "store" && rename.has(x.buffer)) return { ...x, buffer: rename.get(x.buffer)! }
      if (x.kind === "intrinsic") return { ...x, output: region(x.output), inputs: x.inputs.map(region) }
      return undefined
    },
    g,
  )
  for (const k of [...kept].reverse()) out = { kind: "allocate", buffer: k.buffer, body: out }
  return { ...f, body: out }
})
