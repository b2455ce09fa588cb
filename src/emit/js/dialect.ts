// The js dialect of the C-family walker (../c-family): JS shares C's statement syntax (blocks,
// `for`, `if`/`else`), so the js target is the same walker with this table. Every buffer is a typed
// array indexed by one flat index (the TIR is flattened before emission: several indices are
// summed as they come; int64 / uint64 buffers are BigInt64Arrays / BigUint64Arrays); loops of every kind run serially, their kind in a trailing comment;
// allocations are fresh typed arrays of the buffer's elements; barriers are no-ops (one thread of
// control); tensor intrinsics must be lowered first (lowering.LowerIntrinsics).
import { bigArray } from "../../ast/graph/dtype.js"
import type { CDialect } from "../c-family/dialect.js"
import { commentSafe } from "../c-family/names.js"
import { JS_EXPR, JS_PRELUDE } from "./expr.js"

export const JS_DIALECT: CDialect = {
  target: "js",
  prelude: JS_PRELUDE,
  signature: (f, name, params) => [
    `// ${commentSafe(f.name)}: ${f.params.map((p) => `${commentSafe(p.name)} ${p.dtype}[${(p.view?.shape ?? p.shape).join("x")}]`).join(", ")}`,
    `export function ${name}(${params.join(", ")}) {`,
  ],
  expr: JS_EXPR,
  access: (source, indices, w) => `${w.buf(source)}[${indices.map(w.expr).join(" + ")}]`,
  loop: (s, w) => {
    const v = w.variable(s.var.name)
    const kind = s.forKind === "serial" ? "" : ` // ${s.forKind}${s.thread ? ` ${s.thread}` : ""}`
    return { open: [`for (let ${v} = ${w.expr(s.min)}, ${v}$end = ${w.expr(s.min)} + ${w.expr(s.extent)}; ${v} < ${v}$end; ${v}++) {${kind}`], close: ["}"] }
  },
  allocate: (s, w) => {
    const b = s.buffer
    const elements = b.shape.reduce((a, d) => a * d, 1)
    return { open: [`{ const ${w.buf(b.name)} = new ${bigArray(b.dtype).name}(${elements}); // ${commentSafe(b.name)} @${b.scope}`], close: ["}"] }
  },
  let: (s, w) => ({ open: [`{ const ${w.variable(s.var.name)} = ${w.expr(s.value)};`], close: ["}"] }),
  leaf: {
    store: (s, w) => {
      const idx = s.indices.map(w.expr).join(" + ")
      return [`${w.buf(s.buffer)}[${idx}] = ${w.expr(s.value)};`]
    },
    evaluate: (s, w) => [`${w.expr(s.value)};`],
    barrier: () => ["// barrier (no-op: one thread of control)"],
    shuffle: (_s, w) => w.fail("a warp shuffle (a cuda reduction across threads) cannot run on the js target"),
    intrinsic: (s, w) => w.fail(`intrinsic ${s.intrin.name} reached the js emitter: run lowering.LowerIntrinsics first`),
  },
}
