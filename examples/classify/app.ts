// The example app's one function: the model imported as a module (compiled at build time by
// tessera's esbuild plugin, typed by the typings it writes beside the model: mlp.d.onnx.ts), run on
// a seeded input, its top-1 class.
import model from "./mlp.onnx"
import { seededInput } from "./input.js"

export const classify = async (): Promise<{ top1: number; scores: number[] }> => {
  const input = model.inputs[0]
  const size = input.shape.reduce((a: number, b) => a * b, 1)
  const out = await model.run({ [input.name]: seededInput(size) })
  const scores = Array.from(out[model.outputNames[0]].data)
  const top1 = scores.indexOf(Math.max(...scores))
  return { top1, scores }
}
