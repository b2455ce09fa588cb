// The meaning of TE: every compute evaluated directly from its definition.
import { allocate, converter } from "../graph/dtype.js"
import { sizeOf, stridesOf, tensor, type Tensor } from "../graph/tensor.js"
import { evalExpr } from "./eval-expr.js"
import { postOrder, type TeTensor } from "./tensor.js"

export class TeEvalError extends Error {
  override readonly name = "TeEvalError"
}

/** Evaluates `outputs` given the placeholders' values by name. Out-of-bounds reads are errors. */
export const evaluateTE = (outputs: readonly TeTensor[], feeds: ReadonlyMap<string, Tensor>): Tensor[] => {
  const values = new Map<string, Tensor>()
  for (const t of postOrder(outputs)) {
    if (t.kind === "placeholder") {
      const x = feeds.get(t.name)
      if (!x) throw new TeEvalError(`placeholder '${t.name}' has no value`)
      if (x.shape.join(",") !== t.shape.join(",")) throw new TeEvalError(`placeholder '${t.name}' is [${t.shape}], given [${x.shape}]`)
      values.set(t.name, x)
      continue
    }
    const read = (source: string, idx: readonly number[]) => {
      const src = values.get(source)
      if (!src) throw new TeEvalError(`'${t.name}' reads '${source}', which is not computed`)
      let off = 0
      const st = stridesOf(src.shape)
      for (let k = 0; k < idx.length; k++) {
        if (!(idx[k] >= 0 && idx[k] < src.shape[k])) throw new TeEvalError(`'${t.name}' reads ${source}[${idx.join(", ")}] out of bounds [${src.shape.join(", ")}]`)
        off += idx[k] * st[k]
      }
      return src.data[off]
    }
    const n = sizeOf(t.shape)
    const out = allocate(t.dtype, n)
    const conv = converter(t.dtype)
    const env = new Map<string, number>()
    const idx = new Array<number>(t.shape.length).fill(0)
    for (let i = 0; i < n; i++) {
      t.axes.forEach((a, k) => env.set(a.var.name, idx[k]))
      out[i] = conv(evalExpr(t.body, env, read))
      for (let k = idx.length - 1; k >= 0; k--) {
        if (++idx[k] < t.shape[k]) break
        idx[k] = 0
      }
    }
    values.set(t.name, tensor(t.dtype, t.shape, out))
  }
  return outputs.map((o) => values.get(o.name)!)
}
