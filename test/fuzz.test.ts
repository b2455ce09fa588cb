// Mutated model bytes never crash the decoder: decodeModelSync returns a Graph or throws one of
// its typed errors (an Error with a `_tag`), and does so quickly, whatever the bytes are.
// Mutations: truncation, bit flips, byte overwrites, deletions, splices (of the same or another
// model), and inserted length-delimited fields with huge varint length prefixes.
import { clone, create, fromBinary, toBinary } from "@bufbuild/protobuf"
import * as fc from "fast-check"
import { AttributeProtoSchema, ModelProtoSchema, StringStringEntryProtoSchema, ValueInfoProtoSchema, type ModelProto } from "onnx-buf"
import { describe, expect, it } from "vitest"
import { DecodeError, UnsupportedModelError } from "../src/ast/onnx/errors.js"
import { NodeError, UnsupportedOpError } from "../src/ast/graph/errors.js"
import { decodeModelSync } from "../src/ast/onnx/decode.js"
import { fromArray } from "../src/ast/graph/tensor.js"
import { NpyError, parseNpy, serializeNpy } from "../src/device/npy.js"
import { readReal, REAL_MODELS, transposeModel, twoOutputModel } from "./cli-models.js"
import { ONNX_TESTS } from "./support/onnx-cases.js"
import * as path from "node:path"

const SEEDS: readonly Uint8Array[] = [
  ...REAL_MODELS.map(readReal),
  readReal(path.join(ONNX_TESTS, "pytorch-operator/test_operator_conv/model.onnx")),
  readReal(path.join(ONNX_TESTS, "pytorch-converted/test_Conv3d_groups/model.onnx")),
  transposeModel(),
  twoOutputModel(),
]

/** A varint's bytes. */
const varint = (v: bigint): number[] => {
  const out: number[] = []
  do {
    let b = Number(v & 0x7fn)
    v >>= 7n
    if (v > 0n) b |= 0x80
    out.push(b)
  } while (v > 0n)
  return out
}

type Mutation =
  | { kind: "truncate"; at: number }
  | { kind: "flip"; at: number; bit: number }
  | { kind: "set"; at: number; value: number }
  | { kind: "delete"; at: number; length: number }
  | { kind: "splice"; at: number; from: number; start: number; length: number }
  | { kind: "hugeLength"; at: number; field: number; length: bigint }

const arbMutation: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ kind: fc.constant("truncate" as const), at: fc.nat() }),
  fc.record({ kind: fc.constant("flip" as const), at: fc.nat(), bit: fc.integer({ min: 0, max: 7 }) }),
  fc.record({ kind: fc.constant("set" as const), at: fc.nat(), value: fc.integer({ min: 0, max: 255 }) }),
  fc.record({ kind: fc.constant("delete" as const), at: fc.nat(), length: fc.integer({ min: 1, max: 64 }) }),
  fc.record({
    kind: fc.constant("splice" as const),
    at: fc.nat(),
    from: fc.nat({ max: SEEDS.length - 1 }),
    start: fc.nat(),
    length: fc.integer({ min: 1, max: 128 }),
  }),
  fc.record({
    kind: fc.constant("hugeLength" as const),
    at: fc.nat(),
    // length-delimited fields of ModelProto / GraphProto / NodeProto / TensorProto
    field: fc.constantFrom(1, 2, 3, 4, 5, 7, 8, 9, 10, 11, 12, 13, 14, 15),
    length: fc.constantFrom(2n ** 31n, 2n ** 32n - 1n, 2n ** 35n, 2n ** 53n, 2n ** 63n - 1n, 2n ** 64n - 1n),
  }),
)

const mutate = (bytes: Uint8Array, m: Mutation): Uint8Array => {
  const n = bytes.length
  const at = n === 0 ? 0 : m.at % (n + 1)
  switch (m.kind) {
    case "truncate":
      return bytes.slice(0, at)
    case "flip": {
      if (n === 0) return bytes
      const out = bytes.slice()
      out[at % n] ^= 1 << m.bit
      return out
    }
    case "set": {
      if (n === 0) return bytes
      const out = bytes.slice()
      out[at % n] = m.value
      return out
    }
    case "delete":
      return new Uint8Array([...bytes.subarray(0, at), ...bytes.subarray(at + m.length)])
    case "splice": {
      const src = SEEDS[m.from]
      const start = m.start % src.length
      return new Uint8Array([...bytes.subarray(0, at), ...src.subarray(start, start + m.length), ...bytes.subarray(at)])
    }
    case "hugeLength":
      return new Uint8Array([...bytes.subarray(0, at), (m.field << 3) | 2, ...varint(m.length), ...bytes.subarray(at)])
  }
}

const TYPED = [DecodeError, UnsupportedModelError, UnsupportedOpError, NodeError]

/** Decodes; returns the outcome's name, or throws when the decoder failed in an untyped way. */
const outcome = (bytes: Uint8Array): string => {
  try {
    const g = decodeModelSync(bytes)
    if (!Array.isArray(g.nodes) || !Array.isArray(g.inputs) || !Array.isArray(g.outputs)) throw new Error("decoded to something that is not a Graph")
    return "Graph"
  } catch (e) {
    if (TYPED.some((C) => e instanceof C) && typeof (e as { _tag?: unknown })._tag === "string") return (e as { _tag: string })._tag
    throw new Error(`untyped failure: ${e instanceof Error ? `${e.name}: ${e.message}\n${e.stack}` : String(e)}`)
  }
}

describe("fuzzing the ONNX decoder", () => {
  it("every seed model decodes or fails typed", () => {
    for (const s of SEEDS) expect(() => outcome(s)).not.toThrow()
  })

  it("2000 mutated models: a Graph or a typed error, each within a second", () => {
    const counts = new Map<string, number>()
    const t0 = performance.now()
    let slowest = 0
    fc.assert(
      fc.property(fc.nat({ max: SEEDS.length - 1 }), fc.array(arbMutation, { minLength: 1, maxLength: 3 }), (k, ms) => {
        const bytes = ms.reduce(mutate, SEEDS[k])
        const t = performance.now()
        const o = outcome(bytes)
        const dt = performance.now() - t
        slowest = Math.max(slowest, dt)
        expect(dt).toBeLessThan(1000)
        counts.set(o, (counts.get(o) ?? 0) + 1)
      }),
      { seed: 42, numRuns: 2000 },
    )
    const total = performance.now() - t0
    console.log(`fuzz: 2000 cases in ${Math.round(total)} ms (slowest ${slowest.toFixed(1)} ms): ${[...counts].map(([k, v]) => `${k} ${v}`).join(", ")}`)
    expect(total).toBeLessThan(30_000)
  })
})

// Structure-aware mutations: well-formed protobuf with hostile field values, so the decoder's own
// checks (dims, types, attributes, opsets, external data, graph wiring) are what is exercised.
type Edit = (m: ModelProto, pick: (n: number) => number) => void

const HOSTILE_DIMS = [-1n, 0n, 3n, 2n ** 31n, 2n ** 40n, 2n ** 62n]
const EDITS: readonly Edit[] = [
  (m, pick) => {
    if (m.opsetImport[0]) m.opsetImport[0].version = [0n, 1n, 28n, 29n, 2n ** 40n][pick(5)]
  },
  (m) => (m.opsetImport = []),
  (m, pick) => {
    const t = m.graph?.initializer[pick(m.graph.initializer.length)]
    if (t) t.dims = [HOSTILE_DIMS[pick(6)], HOSTILE_DIMS[pick(6)]]
  },
  (m, pick) => {
    const t = m.graph?.initializer[pick(m.graph.initializer.length)]
    if (t) t.dataType = pick(32)
  },
  (m, pick) => {
    const t = m.graph?.initializer[pick(m.graph.initializer.length)]
    if (t) t.rawData = t.rawData.subarray(0, pick(t.rawData.length + 1))
  },
  (m, pick) => {
    const t = m.graph?.initializer[pick(m.graph.initializer.length)]
    if (t) {
      t.dataLocation = 1
      t.externalData = [create(StringStringEntryProtoSchema, { key: "location", value: ["../w.bin", "/etc/passwd", "a\0b", "w.bin", ""][pick(5)] })]
    }
  },
  (m, pick) => {
    const n = m.graph?.node[pick(m.graph.node.length)]
    if (n) n.opType = ["Foo", "", "Conv", "If", "Loop", "Constant"][pick(6)]
  },
  (m, pick) => {
    const n = m.graph?.node[pick(m.graph.node.length)]
    if (n) n.domain = ["", "ai.onnx", "com.example", "ai.onnx.ml", "tessera", "com.microsoft"][pick(6)]
  },
  (m, pick) => {
    const n = m.graph?.node[pick(m.graph.node.length)]
    if (n) n.input = [...n.input, ["", "nowhere", n.output[0] ?? "x"][pick(3)]]
  },
  (m, pick) => {
    const n = m.graph?.node[pick(m.graph.node.length)]
    if (n) n.output = pick(2) ? [] : [...n.output, n.output[0] ?? ""]
  },
  (m, pick) => {
    const n = m.graph?.node[pick(m.graph.node.length)]
    const a = n?.attribute[pick(n.attribute.length)]
    if (a) a.type = pick(16)
  },
  (m, pick) => {
    const n = m.graph?.node[pick(m.graph.node.length)]
    if (n) n.attribute = [...n.attribute, create(AttributeProtoSchema, { name: n.attribute[0]?.name ?? "axis", type: 7, ints: [HOSTILE_DIMS[pick(6)]] })]
  },
  (m, pick) => {
    const v = [...(m.graph?.input ?? []), ...(m.graph?.output ?? [])][pick((m.graph?.input.length ?? 0) + (m.graph?.output.length ?? 0))]
    if (v?.type?.value.case === "tensorType") {
      v.type.value.value.elemType = pick(32)
      for (const d of v.type.value.value.shape?.dim ?? []) d.value = { case: "dimValue", value: HOSTILE_DIMS[pick(6)] }
    }
  },
  (m, pick) => {
    if (m.graph) m.graph.output = [...m.graph.output, create(ValueInfoProtoSchema, { name: ["nowhere", ""][pick(2)] })]
  },
  (m, pick) => {
    if (m.graph) m.graph.node = m.graph.node.reverse().slice(0, pick(m.graph.node.length + 1))
  },
]

describe("structure-aware fuzzing of the ONNX decoder", () => {
  it("1000 models with hostile field values: a Graph or a typed error", () => {
    const parsed = SEEDS.map((b) => fromBinary(ModelProtoSchema, b))
    const counts = new Map<string, number>()
    fc.assert(
      fc.property(fc.nat({ max: SEEDS.length - 1 }), fc.array(fc.tuple(fc.nat({ max: EDITS.length - 1 }), fc.nat()), { minLength: 1, maxLength: 4 }), (k, edits) => {
        const m = clone(ModelProtoSchema, parsed[k])
        for (const [e, seed] of edits) {
          let r = seed
          EDITS[e](m, (n) => (n <= 0 ? 0 : (r = (r * 1103515245 + 12345) >>> 0) % n))
        }
        const o = outcome(toBinary(ModelProtoSchema, m))
        counts.set(o, (counts.get(o) ?? 0) + 1)
      }),
      { seed: 42, numRuns: 1000 },
    )
    console.log(`structural fuzz: ${[...counts].map(([k, v]) => `${k} ${v}`).join(", ")}`)
  })
})

describe("fuzzing the .npy reader", () => {
  const seeds = [
    serializeNpy(fromArray("float32", [2, 3], [1, 2, 3, 4, 5, 6])),
    serializeNpy(fromArray("int64", [3], [-1, 0, 1])),
    serializeNpy(fromArray("bool", [], [1])),
  ]
  it("1000 mutated arrays: a Tensor or an NpyError", () => {
    fc.assert(
      fc.property(fc.nat({ max: seeds.length - 1 }), fc.array(arbMutation, { minLength: 1, maxLength: 3 }), (k, ms) => {
        const bytes = ms.reduce(mutate, seeds[k])
        try {
          const t = parseNpy(bytes)
          expect(t.data.length).toBe(t.shape.reduce((a, b) => a * b, 1))
        } catch (e) {
          if (!(e instanceof NpyError)) throw new Error(`untyped failure: ${e instanceof Error ? e.stack : String(e)}`)
        }
      }),
      { seed: 42, numRuns: 1000 },
    )
  })
})
