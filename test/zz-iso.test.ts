import { it } from "vitest"
import { readFileSync } from "node:fs"
import * as ort from "onnxruntime-node"
import { runGraph } from "../src/ast/graph/evaluate.js"
import { fromArray } from "../src/ast/graph/tensor.js"
import { decodeModelSync } from "../src/ast/onnx/decode.js"
import { encodeOnnx } from "../src/ast/onnx/encode.js"
import { bindSync } from "../src/ast/graph/infer.js"
it("isolated", async () => {
  const g0 = decodeModelSync(readFileSync(process.env.MODEL!))
  const vt = bindSync(g0).valueTypes
  const x = g0.inputs[0]
  const shape = x.type.shape.map((d) => (typeof d === "number" ? d : 1))
  const stats = new Map<string, { max: number; cnt: number; n: number }>()
  for (let seed = 0; seed < 3; seed++) {
    const data = Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, (_, i) => Math.sin(i * 0.37 + seed) * 1.5)
    const g = { ...g0, outputs: g0.nodes.filter((n) => vt.get(n.outputs[0])).map((n) => ({ name: n.outputs[0], type: vt.get(n.outputs[0])! })) }
    const s = await ort.InferenceSession.create(encodeOnnx(g), { intraOpNumThreads: 1 })
    const r = await s.run({ [x.name]: new ort.Tensor("float32", data, shape) })
    const val = (name: string) => name === x.name ? fromArray("float32", shape, data) : (() => { const t = r[name]; return { dtype: vt.get(name)!.dtype, shape: t.dims.map(Number), data: t.data } as any })()
    for (const n of g0.nodes) {
      const ins = n.inputs.filter((i) => i !== "" && !g0.initializers.has(i))
      const one = { ...g0, inputs: ins.map((i) => ({ name: i, type: { dtype: vt.get(i)?.dtype ?? "float32", shape: val(i).shape } })), outputs: [{ name: n.outputs[0], type: vt.get(n.outputs[0])! }], nodes: [n] }
      const [got] = runGraph(one as any, new Map(ins.map((i) => [i, val(i)])))
      const w = r[n.outputs[0]].data as any
      const key = `${n.domain}.${n.op}`
      const st = stats.get(key) ?? { max: 0, cnt: 0, n: 0 }
      for (let i = 0; i < w.length; i++) { const e = Math.abs(Number(w[i]) - Number(got.data[i])); if (e > 0) st.cnt++; st.max = Math.max(st.max, e); st.n++ }
      stats.set(key, st)
    }
  }
  console.log([...stats].map(([k, v]) => `${k}: max ${v.max} differing ${v.cnt}/${v.n}`).join("\n"))
}, 600000)
