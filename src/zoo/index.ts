// The model zoo: standard networks with seeded random weights, as graphs or as ONNX bytes
// (`tessera zoo NAME`). The same name and seed always give the same bytes.
import type { Graph } from "../ast/graph/graph.js"
import { encodeOnnx } from "../ast/onnx/encode.js"
import { bert } from "./bert.js"
import { mlp } from "./mlp.js"
import { mobilenetv2 } from "./mobilenet.js"
import { resnet18, resnet50 } from "./resnet.js"
import { squeezenet11 } from "./squeezenet.js"

export interface ZooEntry {
  readonly build: (seed: number) => Graph
  readonly description: string
}

export const ZOO = {
  resnet18: { build: resnet18, description: "ResNet-18 (torchvision), input [1,3,224,224] → logits [1,1000], opset 13" },
  resnet50: { build: resnet50, description: "ResNet-50 v1.5 (torchvision), input [1,3,224,224] → logits [1,1000], opset 13" },
  mobilenetv2: { build: mobilenetv2, description: "MobileNetV2 (torchvision), ReLU6 as Clip, input [1,3,224,224] → logits [1,1000], opset 13" },
  "squeezenet1.1": { build: squeezenet11, description: "SqueezeNet 1.1 (torchvision), input [1,3,224,224] → [1,1000], opset 13" },
  mlp: { build: mlp, description: "MLP 784-512-256-10 (Gemm, Relu, Softmax), input [1,784] → [1,10], opset 13" },
  bert: { build: bert, description: "one BERT encoder layer: seq 128, hidden 256, 4 heads, Erf GELU, input [1,128,256], opset 17" },
} as const satisfies Record<string, ZooEntry>

export type ZooName = keyof typeof ZOO

export const ZOO_NAMES = Object.keys(ZOO) as ZooName[]

export const isZooName = (name: string): name is ZooName => Object.prototype.hasOwnProperty.call(ZOO, name)

export const DEFAULT_SEED = 0

/** A zoo model's graph; throws on an unknown name (check with `isZooName` first). */
export const zooGraph = (name: string, seed: number = DEFAULT_SEED): Graph => {
  if (!isZooName(name)) throw new Error(`unknown zoo model '${name}'; known: ${ZOO_NAMES.join(", ")}`)
  return ZOO[name].build(seed)
}

/** A zoo model as ONNX ModelProto bytes. */
export const zooModel = (name: string, seed: number = DEFAULT_SEED): Uint8Array => encodeOnnx(zooGraph(name, seed))
