// The model zoo: standard networks with seeded random weights, as graphs or as ONNX bytes
// (`tessera zoo NAME`). The same name and seed always give the same bytes.
import type { Graph } from "../ast/graph/graph.js"
import { encodeOnnx } from "../ast/onnx/encode.js"
import { bert, bertBase } from "./bert.js"
import { convnextTiny } from "./convnext.js"
import { efficientnetB0 } from "./efficientnet.js"
import { mlp } from "./mlp.js"
import { mobilenetv2 } from "./mobilenet.js"
import { mobilenetv3 } from "./mobilenetv3.js"
import { regnetY400mf } from "./regnet.js"
import { resnet18, resnet50 } from "./resnet.js"
import { shufflenetv2 } from "./shufflenet.js"
import { squeezenet11 } from "./squeezenet.js"
import { vitB16 } from "./vit.js"

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
  "efficientnet-b0": { build: efficientnetB0, description: "EfficientNet-B0 (torchvision), SiLU as Sigmoid·Mul, squeeze-excite, input [1,3,224,224] → logits [1,1000], opset 13" },
  mobilenetv3: { build: mobilenetv3, description: "MobileNetV3-Large (torchvision), HardSwish, squeeze-excite with HardSigmoid, input [1,3,224,224] → logits [1,1000], opset 14" },
  shufflenetv2: { build: shufflenetv2, description: "ShuffleNetV2 x1.0 (torchvision), Split, Concat, channel shuffle as Reshape/Transpose/Reshape, input [1,3,224,224] → logits [1,1000], opset 13" },
  regnet: { build: regnetY400mf, description: "RegNetY-400MF (torchvision regnet_y_400mf), grouped 3×3 convs (8 channels a group), squeeze-excite, input [1,3,224,224] → logits [1,1000], opset 13" },
  "convnext-t": { build: convnextTiny, description: "ConvNeXt-T (torchvision), 7×7 depthwise, channels-last LayerNorm via Transpose, MLP with Erf GELU, input [1,3,224,224] → logits [1,1000], opset 17" },
  "vit-b16": { build: vitB16, description: "ViT-B/16 (torchvision), patch embedding, class token Concat, position embedding Add, 12 pre-norm attention blocks, input [1,3,224,224] → logits [1,1000], opset 17" },
  "bert-base": { build: bertBase, description: "BERT-base encoder: 12 layers, seq 128, hidden 768, 12 heads, intermediate 3072, Erf GELU, input [1,128,768] → [1,128,768], opset 17" },
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
