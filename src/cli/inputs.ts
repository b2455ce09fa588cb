// Model inputs from the command line: `--input NAME=FILE.npy` and `--shape NAME=1x3x224x224`
// parsing, binding the model's symbolic dims from what was given, and seeded random tensors
// for the inputs that were not given.
import { allocate, converter, isFloat, type DType } from "../ast/graph/dtype.js"
import { InputError } from "../ast/graph/errors.js"
import type { Graph } from "../ast/graph/graph.js"
import type { Dim } from "../ast/graph/op.js"
import { showShape, sizeOf, type Tensor } from "../ast/graph/tensor.js"
import { UsageError } from "./errors.js"

/** `NAME=VALUE`, split at the last '=' (input names may contain '='; file names rarely do). */
export const splitAssignment = (spec: string, flag: string): { readonly name: string; readonly value: string } => {
  const k = spec.lastIndexOf("=")
  if (k <= 0) throw new UsageError({ flag, reason: `'${spec}' is not NAME=VALUE` })
  return { name: spec.slice(0, k), value: spec.slice(k + 1) }
}

/** "1x3x224x224" → [1, 3, 224, 224]; "" is a scalar's shape. */
export const parseDims = (text: string, flag: string): number[] => {
  if (text.trim() === "") return []
  return text.split(/[x,]/).map((d) => {
    const s = d.trim()
    if (!/^\d+$/.test(s) || !Number.isSafeInteger(Number(s)))
      throw new UsageError({ flag, reason: `'${text}' is not a shape like 1x3x224x224 (dims are non-negative integers)` })
    return Number(s)
  })
}

/** A dim the decoder marks as "rank unknown": the whole shape is this one name. */
const unknownRank = (shape: readonly Dim[]): boolean => shape.length === 1 && typeof shape[0] === "string" && shape[0].endsWith("?rank")

/** The largest random input we agree to make (elements). */
export const MAX_RANDOM_ELEMENTS = 2 ** 28

export interface InputPlan {
  readonly name: string
  readonly dtype: DType
  readonly shape: readonly number[]
  /** The tensor given with --input; absent: a random one is made. */
  readonly given?: Tensor
}

/**
 * Checks the given tensors and shapes against the model's inputs and binds its symbolic dims:
 * a dim named 'N' gets the value it has in every input that mentions it. Every input then has a
 * static shape, or the InputError says which input and dim is unbound and how to bind it.
 */
export const planInputs = (
  graph: Graph,
  given: ReadonlyMap<string, Tensor>,
  shapes: ReadonlyMap<string, readonly number[]>,
): InputPlan[] => {
  const names = graph.inputs.map((i) => i.name)
  for (const name of [...given.keys(), ...shapes.keys()])
    if (!names.includes(name))
      throw new InputError({
        input: name,
        reason: graph.initializers.has(name)
          ? "is a weight (initializer) of the model, not an input"
          : `the model has no such input (its inputs: ${names.join(", ") || "none"})`,
      })
  const symbols = new Map<string, { value: number; input: string }>()
  const bindFrom = (input: string, declared: readonly Dim[], actual: readonly number[], what: string) => {
    if (unknownRank(declared)) return
    if (declared.length !== actual.length)
      throw new InputError({ input, reason: `${what} ${showShape(actual)} has rank ${actual.length}, the model expects rank ${declared.length} ${showShape(declared)}` })
    declared.forEach((d, k) => {
      const got = actual[k]
      if (typeof d === "number") {
        if (d !== got) throw new InputError({ input, reason: `${what} ${showShape(actual)} has dim ${k} = ${got}, the model fixes it at ${d} ${showShape(declared)}` })
        return
      }
      const prev = symbols.get(d)
      if (prev && prev.value !== got)
        throw new InputError({ input, reason: `${what} ${showShape(actual)} has dim ${k} ('${d}') = ${got}, but '${d}' is ${prev.value} in input '${prev.input}'` })
      symbols.set(d, { value: got, input })
    })
  }
  for (const i of graph.inputs) {
    const t = given.get(i.name)
    const s = shapes.get(i.name)
    if (t) {
      if (t.dtype !== i.type.dtype)
        throw new InputError({ input: i.name, reason: `the file holds ${t.dtype}, the model expects ${i.type.dtype}` })
      bindFrom(i.name, i.type.shape, t.shape, "the file's shape")
      if (s && (s.length !== t.shape.length || s.some((d, k) => d !== t.shape[k])))
        throw new InputError({ input: i.name, reason: `--shape ${showShape(s)} disagrees with the file's shape ${showShape(t.shape)}` })
    } else if (s) bindFrom(i.name, i.type.shape, s, "--shape")
  }
  return graph.inputs.map((i) => {
    const t = given.get(i.name)
    if (t) return { name: i.name, dtype: t.dtype, shape: t.shape, given: t }
    const s = shapes.get(i.name)
    const example = (dims: readonly Dim[]) => dims.map((d) => (typeof d === "number" ? d : "N")).join("x")
    let shape: number[]
    if (s) shape = [...s]
    else if (unknownRank(i.type.shape))
      throw new InputError({ input: i.name, reason: `its rank is not declared by the model: give its data with --input ${i.name}=FILE.npy, or its shape with --shape ${i.name}=DxD...` })
    else
      shape = i.type.shape.map((d, k) => {
        if (typeof d === "number") return d
        const b = symbols.get(d)
        if (b) return b.value
        throw new InputError({
          input: i.name,
          reason: `dim ${k} ('${d}') is symbolic and unbound: give the input's data with --input ${i.name}=FILE.npy, or its shape with --shape ${i.name}=${example(i.type.shape)}`,
        })
      })
    if (sizeOf(shape) > MAX_RANDOM_ELEMENTS)
      throw new InputError({ input: i.name, reason: `shape ${showShape(shape)} has ${sizeOf(shape)} elements, more than the ${MAX_RANDOM_ELEMENTS} a random input may have` })
    return { name: i.name, dtype: i.type.dtype, shape }
  })
}

/** mulberry32: a small seeded PRNG giving floats in [0, 1). */
const prng = (seed: number): (() => number) => {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/**
 * A seeded random tensor: floats uniform in [-1, 1), integers uniform in [0, 10), bools 0/1.
 * `index` (the input's position) varies the stream, so inputs of one model differ.
 */
export const randomTensor = (dtype: DType, shape: readonly number[], seed: number, index = 0): Tensor => {
  const next = prng((Math.imul(seed | 0, 0x9e3779b1) ^ Math.imul(index + 1, 0x85ebca77)) >>> 0)
  const n = sizeOf(shape)
  const data = allocate(dtype, n)
  if (isFloat(dtype)) {
    const conv = converter(dtype) // float16/bfloat16 storage holds rounded values
    for (let i = 0; i < n; i++) data[i] = conv(next() * 2 - 1)
  } else if (dtype === "bool") for (let i = 0; i < n; i++) data[i] = next() < 0.5 ? 0 : 1
  else for (let i = 0; i < n; i++) data[i] = Math.floor(next() * 10)
  return { dtype, shape: [...shape], data }
}
