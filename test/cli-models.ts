// Small ONNX models built directly as ModelProto bytes, for the CLI and bad-input tests (the
// models are deliberately raw protobuf, so tests can make them wrong in any way).
import { create, toBinary } from "@bufbuild/protobuf"
import * as fs from "node:fs"
import * as path from "node:path"
import {
  AttributeProtoSchema,
  GraphProtoSchema,
  ModelProtoSchema,
  NodeProtoSchema,
  TensorProtoSchema,
  TypeProtoSchema,
  ValueInfoProtoSchema,
  type AttributeProto,
  type TensorProto,
} from "onnx-buf"
import { DTYPE_ONNX, type DType } from "../src/ast/graph/dtype.js"
import type { Tensor } from "../src/ast/graph/tensor.js"
import { encodeTensor } from "../src/ast/onnx/tensor-proto.js"
import { ONNX_TESTS } from "./support/onnx-cases.js"

export type DimSpec = number | string

export const valueInfo = (name: string, dtype: DType | number, shape: readonly DimSpec[] | undefined) =>
  create(ValueInfoProtoSchema, {
    name,
    type: create(TypeProtoSchema, {
      value: {
        case: "tensorType",
        value: {
          elemType: typeof dtype === "number" ? dtype : DTYPE_ONNX[dtype],
          shape: shape === undefined ? undefined : { dim: shape.map((d) => ({ value: typeof d === "number" ? { case: "dimValue" as const, value: BigInt(d) } : { case: "dimParam" as const, value: d } })) },
        },
      },
    }),
  })

export const intsAttr = (name: string, ints: readonly number[]): AttributeProto =>
  create(AttributeProtoSchema, { name, type: 7, ints: ints.map(BigInt) })

export interface NodeSpec {
  readonly op: string
  readonly inputs: readonly string[]
  readonly outputs: readonly string[]
  readonly name?: string
  readonly domain?: string
  readonly attrs?: readonly AttributeProto[]
}

export interface ModelSpec {
  readonly opset?: number
  readonly inputs: readonly ReturnType<typeof valueInfo>[]
  readonly outputs: readonly ReturnType<typeof valueInfo>[]
  readonly nodes: readonly NodeSpec[]
  readonly initializers?: readonly TensorProto[]
  readonly extraOpsets?: readonly { domain: string; version: number }[]
}

export const modelBytes = (m: ModelSpec): Uint8Array =>
  toBinary(
    ModelProtoSchema,
    create(ModelProtoSchema, {
      irVersion: 8n,
      producerName: "tessera-tests",
      opsetImport: [{ domain: "", version: BigInt(m.opset ?? 17) }, ...(m.extraOpsets ?? []).map((o) => ({ domain: o.domain, version: BigInt(o.version) }))],
      graph: create(GraphProtoSchema, {
        name: "test",
        input: [...m.inputs],
        output: [...m.outputs],
        initializer: [...(m.initializers ?? [])],
        node: m.nodes.map((n, k) =>
          create(NodeProtoSchema, {
            opType: n.op,
            input: [...n.inputs],
            output: [...n.outputs],
            name: n.name ?? `${n.op}_${k}`,
            domain: n.domain ?? "",
            attribute: [...(n.attrs ?? [])],
          }),
        ),
      }),
    }),
  )

export const initializer = (t: Tensor, name: string): TensorProto => encodeTensor(t, name)

/** A raw initializer with arbitrary (possibly hostile) dims. */
export const rawInitializer = (name: string, dims: readonly bigint[], rawData = new Uint8Array(0)): TensorProto =>
  create(TensorProtoSchema, { name, dataType: 1, dims: [...dims], rawData })

/** x: float32[N, 3] → Transpose → y: float32[3, N]: a symbolic dim to bind. */
export const transposeModel = (opset = 17): Uint8Array =>
  modelBytes({
    opset,
    inputs: [valueInfo("x", "float32", ["N", 3])],
    outputs: [valueInfo("y", "float32", [3, "N"])],
    nodes: [{ op: "Transpose", inputs: ["x"], outputs: ["y"], attrs: [intsAttr("perm", [1, 0])] }],
  })

/**
 * Two inputs, two outputs with names that are not file names: a: float32[2, 3] and
 * 'b/in': int64[4] → 'out:a' = Transpose(a), 'out/b' = Concat(b, b).
 */
export const twoOutputModel = (): Uint8Array =>
  modelBytes({
    inputs: [valueInfo("a", "float32", [2, 3]), valueInfo("b/in", "int64", [4])],
    outputs: [valueInfo("out:a", "float32", [3, 2]), valueInfo("out/b", "int64", [8])],
    nodes: [
      { op: "Transpose", inputs: ["a"], outputs: ["out:a"] },
      { op: "Concat", inputs: ["b/in", "b/in"], outputs: ["out/b"], attrs: [create(AttributeProtoSchema, { name: "axis", type: 2, i: 0n })] },
    ],
  })

/** Real model files from ONNX's conformance data (node suite and a PyTorch export). */
export const REAL_MODELS = [
  "node/test_transpose_default",
  "node/test_concat_2d_axis_0",
  "node/test_reshape_negative_dim",
  "node/test_gather_0",
  "node/test_slice",
  "node/test_conv_with_strides_padding",
  "node/test_lstm_defaults",
  "node/test_if",
  "pytorch-converted/test_Conv2d",
  "pytorch-converted/test_BatchNorm2d_eval",
].map((c) => path.join(ONNX_TESTS, c, "model.onnx"))

export const readReal = (file: string): Uint8Array => new Uint8Array(fs.readFileSync(file))
