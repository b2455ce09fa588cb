// The example app's one function: the model imported as a module (compiled at build time by
// tessera's esbuild plugin), run on a seeded input, its top-1 class.
import model from "./mlp.onnx"
import { seededInput } from "./input.js"

export const classify = async (): Promise<{ top1: number; scores: number[] }> => {
  const input = model.inputs[0]
  const size = input.shape.reduce((a: number, b) => a * Number(b), 1)
  const out = await model.run({ [input.name]: seededInput(size) } as never)
  const scores = Array.from((out as Record<string, { data: Float32Array }>)[model.outputNames[0]].data)
  const top1 = scores.indexOf(Math.max(...scores))
  return { top1, scores }
}
