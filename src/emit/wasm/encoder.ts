// The WebAssembly binary encoder of the `wasm` target (no binaryen): LEB128, the instruction table
// (MVP, sign-extension, saturating truncation and SIMD128 — never relaxed SIMD), and module
// assembly from a small module description. Pure: the same description gives the same bytes.
//
// Instructions are data (`Instr`): the emitter builds lists of them, this file turns them into
// bytes, and print.ts turns the same lists into text, so the golden text and the bytes agree.

export type ValType = "i32" | "i64" | "f32" | "f64" | "v128"

const VALTYPE: { readonly [T in ValType]: number } = { i32: 0x7f, i64: 0x7e, f32: 0x7d, f64: 0x7c, v128: 0x7b }

/** How an instruction's immediates are encoded. */
type ImmKind =
  | "none"
  | "u32" // local / label index
  | "i32" // signed constant
  | "i64" // signed 64-bit constant (an integer number; at or past ±2^63, the type's bound)
  | "f32"
  | "f64"
  | "mem" // memarg: align (log2), offset
  | "block" // block type: a value type or none
  | "call" // a function by symbolic name, resolved at assembly
  | "lane" // one lane byte
  | "v128" // 16 bytes
  | "shuffle" // 16 lane indices (i8x16.shuffle)

const simd = (n: number): readonly number[] => [0xfd, ...uleb(n)]
const misc = (n: number): readonly number[] => [0xfc, ...uleb(n)]

/** Every instruction the target emits: mnemonic → opcode bytes and immediate kind. */
export const OPS = {
  unreachable: { code: [0x00], imm: "none" },
  nop: { code: [0x01], imm: "none" },
  block: { code: [0x02], imm: "block" },
  loop: { code: [0x03], imm: "block" },
  if: { code: [0x04], imm: "block" },
  else: { code: [0x05], imm: "none" },
  end: { code: [0x0b], imm: "none" },
  br: { code: [0x0c], imm: "u32" },
  br_if: { code: [0x0d], imm: "u32" },
  return: { code: [0x0f], imm: "none" },
  call: { code: [0x10], imm: "call" },
  drop: { code: [0x1a], imm: "none" },
  select: { code: [0x1b], imm: "none" },
  "local.get": { code: [0x20], imm: "u32" },
  "local.set": { code: [0x21], imm: "u32" },
  "local.tee": { code: [0x22], imm: "u32" },
  "i32.load": { code: [0x28], imm: "mem" },
  "i64.load": { code: [0x29], imm: "mem" },
  "f32.load": { code: [0x2a], imm: "mem" },
  "f64.load": { code: [0x2b], imm: "mem" },
  "i32.load8_s": { code: [0x2c], imm: "mem" },
  "i32.load8_u": { code: [0x2d], imm: "mem" },
  "i32.load16_s": { code: [0x2e], imm: "mem" },
  "i32.load16_u": { code: [0x2f], imm: "mem" },
  "i32.store": { code: [0x36], imm: "mem" },
  "i64.store": { code: [0x37], imm: "mem" },
  "f32.store": { code: [0x38], imm: "mem" },
  "f64.store": { code: [0x39], imm: "mem" },
  "i32.store8": { code: [0x3a], imm: "mem" },
  "i32.store16": { code: [0x3b], imm: "mem" },
  "i32.const": { code: [0x41], imm: "i32" },
  "i64.const": { code: [0x42], imm: "i64" },
  "f32.const": { code: [0x43], imm: "f32" },
  "f64.const": { code: [0x44], imm: "f64" },
  "i32.eqz": { code: [0x45], imm: "none" },
  "i32.eq": { code: [0x46], imm: "none" },
  "i32.ne": { code: [0x47], imm: "none" },
  "i32.lt_s": { code: [0x48], imm: "none" },
  "i32.lt_u": { code: [0x49], imm: "none" },
  "i32.gt_s": { code: [0x4a], imm: "none" },
  "i32.gt_u": { code: [0x4b], imm: "none" },
  "i32.le_s": { code: [0x4c], imm: "none" },
  "i32.le_u": { code: [0x4d], imm: "none" },
  "i32.ge_s": { code: [0x4e], imm: "none" },
  "i32.ge_u": { code: [0x4f], imm: "none" },
  "i64.eqz": { code: [0x50], imm: "none" },
  "i64.eq": { code: [0x51], imm: "none" },
  "i64.ne": { code: [0x52], imm: "none" },
  "i64.lt_s": { code: [0x53], imm: "none" },
  "i64.lt_u": { code: [0x54], imm: "none" },
  "i64.gt_s": { code: [0x55], imm: "none" },
  "i64.gt_u": { code: [0x56], imm: "none" },
  "i64.le_s": { code: [0x57], imm: "none" },
  "i64.le_u": { code: [0x58], imm: "none" },
  "i64.ge_s": { code: [0x59], imm: "none" },
  "i64.ge_u": { code: [0x5a], imm: "none" },
  "f32.eq": { code: [0x5b], imm: "none" },
  "f32.ne": { code: [0x5c], imm: "none" },
  "f32.lt": { code: [0x5d], imm: "none" },
  "f32.gt": { code: [0x5e], imm: "none" },
  "f32.le": { code: [0x5f], imm: "none" },
  "f32.ge": { code: [0x60], imm: "none" },
  "f64.eq": { code: [0x61], imm: "none" },
  "f64.ne": { code: [0x62], imm: "none" },
  "f64.lt": { code: [0x63], imm: "none" },
  "f64.gt": { code: [0x64], imm: "none" },
  "f64.le": { code: [0x65], imm: "none" },
  "f64.ge": { code: [0x66], imm: "none" },
  "i32.add": { code: [0x6a], imm: "none" },
  "i32.sub": { code: [0x6b], imm: "none" },
  "i32.mul": { code: [0x6c], imm: "none" },
  "i32.div_s": { code: [0x6d], imm: "none" },
  "i32.div_u": { code: [0x6e], imm: "none" },
  "i32.rem_s": { code: [0x6f], imm: "none" },
  "i32.rem_u": { code: [0x70], imm: "none" },
  "i32.and": { code: [0x71], imm: "none" },
  "i32.or": { code: [0x72], imm: "none" },
  "i32.xor": { code: [0x73], imm: "none" },
  "i32.shl": { code: [0x74], imm: "none" },
  "i32.shr_s": { code: [0x75], imm: "none" },
  "i32.shr_u": { code: [0x76], imm: "none" },
  "i64.add": { code: [0x7c], imm: "none" },
  "i64.sub": { code: [0x7d], imm: "none" },
  "i64.mul": { code: [0x7e], imm: "none" },
  "i64.div_s": { code: [0x7f], imm: "none" },
  "i64.div_u": { code: [0x80], imm: "none" },
  "i64.rem_s": { code: [0x81], imm: "none" },
  "i64.rem_u": { code: [0x82], imm: "none" },
  "i64.and": { code: [0x83], imm: "none" },
  "i64.or": { code: [0x84], imm: "none" },
  "i64.xor": { code: [0x85], imm: "none" },
  "f32.abs": { code: [0x8b], imm: "none" },
  "f32.neg": { code: [0x8c], imm: "none" },
  "f32.ceil": { code: [0x8d], imm: "none" },
  "f32.floor": { code: [0x8e], imm: "none" },
  "f32.trunc": { code: [0x8f], imm: "none" },
  "f32.nearest": { code: [0x90], imm: "none" },
  "f32.sqrt": { code: [0x91], imm: "none" },
  "f32.add": { code: [0x92], imm: "none" },
  "f32.sub": { code: [0x93], imm: "none" },
  "f32.mul": { code: [0x94], imm: "none" },
  "f32.div": { code: [0x95], imm: "none" },
  "f32.min": { code: [0x96], imm: "none" },
  "f32.max": { code: [0x97], imm: "none" },
  "f64.abs": { code: [0x99], imm: "none" },
  "f64.neg": { code: [0x9a], imm: "none" },
  "f64.ceil": { code: [0x9b], imm: "none" },
  "f64.floor": { code: [0x9c], imm: "none" },
  "f64.trunc": { code: [0x9d], imm: "none" },
  "f64.nearest": { code: [0x9e], imm: "none" },
  "f64.sqrt": { code: [0x9f], imm: "none" },
  "f64.add": { code: [0xa0], imm: "none" },
  "f64.sub": { code: [0xa1], imm: "none" },
  "f64.mul": { code: [0xa2], imm: "none" },
  "f64.div": { code: [0xa3], imm: "none" },
  "f64.min": { code: [0xa4], imm: "none" },
  "f64.max": { code: [0xa5], imm: "none" },
  "f32.convert_i32_s": { code: [0xb2], imm: "none" },
  "f32.convert_i32_u": { code: [0xb3], imm: "none" },
  "i64.extend_i32_s": { code: [0xac], imm: "none" },
  "i64.extend_i32_u": { code: [0xad], imm: "none" },
  "f32.convert_i64_s": { code: [0xb4], imm: "none" },
  "f32.convert_i64_u": { code: [0xb5], imm: "none" },
  "f32.demote_f64": { code: [0xb6], imm: "none" },
  "f64.convert_i32_s": { code: [0xb7], imm: "none" },
  "f64.convert_i32_u": { code: [0xb8], imm: "none" },
  "f64.convert_i64_s": { code: [0xb9], imm: "none" },
  "f64.convert_i64_u": { code: [0xba], imm: "none" },
  "f64.promote_f32": { code: [0xbb], imm: "none" },
  "i32.extend8_s": { code: [0xc0], imm: "none" },
  "i32.extend16_s": { code: [0xc1], imm: "none" },
  "i32.trunc_sat_f32_s": { code: misc(0), imm: "none" },
  "i32.trunc_sat_f32_u": { code: misc(1), imm: "none" },
  "i32.trunc_sat_f64_s": { code: misc(2), imm: "none" },
  "i32.trunc_sat_f64_u": { code: misc(3), imm: "none" },
  "i64.trunc_sat_f64_s": { code: misc(6), imm: "none" },
  "i64.trunc_sat_f64_u": { code: misc(7), imm: "none" },
  "i32.wrap_i64": { code: [0xa7], imm: "none" },
  "v128.load": { code: simd(0x00), imm: "mem" },
  "v128.load8x8_s": { code: simd(0x01), imm: "mem" },
  "v128.load8x8_u": { code: simd(0x02), imm: "mem" },
  "v128.load16x4_s": { code: simd(0x03), imm: "mem" },
  "v128.load16x4_u": { code: simd(0x04), imm: "mem" },
  "v128.load16_splat": { code: simd(0x08), imm: "mem" },
  "v128.load32_splat": { code: simd(0x09), imm: "mem" },
  "v128.store": { code: simd(0x0b), imm: "mem" },
  "v128.const": { code: simd(0x0c), imm: "v128" },
  "i8x16.shuffle": { code: simd(0x0d), imm: "shuffle" },
  "i32x4.splat": { code: simd(0x11), imm: "none" },
  "f32x4.splat": { code: simd(0x13), imm: "none" },
  "f64x2.splat": { code: simd(0x14), imm: "none" },
  "i32x4.extract_lane": { code: simd(0x1b), imm: "lane" },
  "i32x4.replace_lane": { code: simd(0x1c), imm: "lane" },
  "f32x4.extract_lane": { code: simd(0x1f), imm: "lane" },
  "f32x4.replace_lane": { code: simd(0x20), imm: "lane" },
  "f32x4.demote_f64x2_zero": { code: simd(0x5e), imm: "none" },
  "f64x2.promote_low_f32x4": { code: simd(0x5f), imm: "none" },
  "f32x4.ceil": { code: simd(0x67), imm: "none" },
  "f32x4.floor": { code: simd(0x68), imm: "none" },
  "f32x4.nearest": { code: simd(0x6a), imm: "none" },
  "f64x2.ceil": { code: simd(0x74), imm: "none" },
  "f64x2.floor": { code: simd(0x75), imm: "none" },
  "i16x8.extend_low_i8x16_s": { code: simd(0x87), imm: "none" },
  "f64x2.nearest": { code: simd(0x94), imm: "none" },
  "i16x8.extend_high_i8x16_s": { code: simd(0x88), imm: "none" },
  "i16x8.extend_low_i8x16_u": { code: simd(0x89), imm: "none" },
  "i16x8.extend_high_i8x16_u": { code: simd(0x8a), imm: "none" },
  "i32x4.abs": { code: simd(0xa0), imm: "none" },
  "i32x4.extend_low_i16x8_s": { code: simd(0xa7), imm: "none" },
  "i32x4.extend_low_i16x8_u": { code: simd(0xa9), imm: "none" },
  "i32x4.neg": { code: simd(0xa1), imm: "none" },
  "i32x4.add": { code: simd(0xae), imm: "none" },
  "i32x4.sub": { code: simd(0xb1), imm: "none" },
  "i32x4.mul": { code: simd(0xb5), imm: "none" },
  "i32x4.min_s": { code: simd(0xb6), imm: "none" },
  "i32x4.max_s": { code: simd(0xb8), imm: "none" },
  "i32x4.dot_i16x8_s": { code: simd(0xba), imm: "none" },
  "f32x4.abs": { code: simd(0xe0), imm: "none" },
  "f32x4.neg": { code: simd(0xe1), imm: "none" },
  "f32x4.sqrt": { code: simd(0xe3), imm: "none" },
  "f32x4.add": { code: simd(0xe4), imm: "none" },
  "f32x4.sub": { code: simd(0xe5), imm: "none" },
  "f32x4.mul": { code: simd(0xe6), imm: "none" },
  "f32x4.div": { code: simd(0xe7), imm: "none" },
  "f32x4.min": { code: simd(0xe8), imm: "none" },
  "f32x4.max": { code: simd(0xe9), imm: "none" },
  "f32x4.pmin": { code: simd(0xea), imm: "none" },
  "f32x4.pmax": { code: simd(0xeb), imm: "none" },
  "f64x2.abs": { code: simd(0xec), imm: "none" },
  "f64x2.neg": { code: simd(0xed), imm: "none" },
  "f64x2.sqrt": { code: simd(0xef), imm: "none" },
  "f64x2.add": { code: simd(0xf0), imm: "none" },
  "f64x2.sub": { code: simd(0xf1), imm: "none" },
  "f64x2.mul": { code: simd(0xf2), imm: "none" },
  "f64x2.div": { code: simd(0xf3), imm: "none" },
  "f64x2.min": { code: simd(0xf4), imm: "none" },
  "f64x2.max": { code: simd(0xf5), imm: "none" },
  "i32x4.trunc_sat_f32x4_s": { code: simd(0xf8), imm: "none" },
  "f32x4.convert_i32x4_s": { code: simd(0xfa), imm: "none" },
  "i32x4.trunc_sat_f64x2_s_zero": { code: simd(0xfc), imm: "none" },
  "f64x2.convert_low_i32x4_s": { code: simd(0xfe), imm: "none" },
} as const satisfies Record<string, { readonly code: readonly number[]; readonly imm: ImmKind }>

export type Op = keyof typeof OPS

/** One instruction: `a`/`b` are numeric immediates (memarg: a = align log2, b = offset), `sym` a callee, `t` a block type, `lanes` a shuffle's 16 lane indices. */
export interface Instr {
  readonly op: Op
  readonly a?: number
  readonly b?: number
  readonly sym?: string
  readonly t?: ValType
  readonly lanes?: readonly number[]
}

export const ins = (op: Op, a?: number, b?: number): Instr => (a === undefined ? { op } : b === undefined ? { op, a } : { op, a, b })

// ---------------------------------------------------------------------------------------------
// LEB128 and primitive encodings

export function uleb(n: number): number[] {
  if (!(Number.isInteger(n) && n >= 0 && n <= 0xffffffff)) throw new RangeError(`uleb: ${n} is not a u32`)
  const out: number[] = []
  do {
    let byte = n % 128
    n = Math.floor(n / 128)
    if (n !== 0) byte |= 0x80
    out.push(byte)
  } while (n !== 0)
  return out
}

export function sleb(n: number): number[] {
  if (!(Number.isInteger(n) && n >= -0x80000000 && n <= 0x7fffffff)) throw new RangeError(`sleb: ${n} is not an i32`)
  const out: number[] = []
  for (;;) {
    const byte = n & 0x7f
    n >>= 7
    if ((n === 0 && (byte & 0x40) === 0) || (n === -1 && (byte & 0x40) !== 0)) {
      out.push(byte)
      return out
    }
    out.push(byte | 0x80)
  }
}

/** Signed LEB128 of an integer number as an i64 (at or past ±2^63: the type's bounds, which a double cannot hold). */
export function sleb64(x: number): number[] {
  if (!Number.isInteger(x)) throw new RangeError(`sleb64: ${x} is not an integer`)
  let n = x >= 2 ** 63 ? 2n ** 63n - 1n : x <= -(2 ** 63) ? -(2n ** 63n) : BigInt(x)
  const out: number[] = []
  for (;;) {
    const byte = Number(n & 0x7fn)
    n >>= 7n
    if ((n === 0n && (byte & 0x40) === 0) || (n === -1n && (byte & 0x40) !== 0)) {
      out.push(byte)
      return out
    }
    out.push(byte | 0x80)
  }
}

const f32Bytes = (x: number): number[] => {
  const b = new Uint8Array(4)
  new DataView(b.buffer).setFloat32(0, x, true)
  return [...b]
}
const f64Bytes = (x: number): number[] => {
  const b = new Uint8Array(8)
  new DataView(b.buffer).setFloat64(0, x, true)
  return [...b]
}
const utf8 = (s: string): number[] => [...new TextEncoder().encode(s)]
const name = (s: string): number[] => {
  const b = utf8(s)
  return [...uleb(b.length), ...b]
}
const vec = (items: readonly (readonly number[])[]): number[] => [...uleb(items.length), ...items.flat()]

// ---------------------------------------------------------------------------------------------
// Instructions

/** The bytes of an instruction list; `callee` resolves symbolic call targets to function indices. */
export const encodeInstrs = (code: readonly Instr[], callee: (sym: string) => number): number[] => {
  const out: number[] = []
  for (const i of code) {
    const def = OPS[i.op]
    out.push(...def.code)
    switch (def.imm as ImmKind) {
      case "none":
        break
      case "u32":
        out.push(...uleb(i.a!))
        break
      case "i32":
        out.push(...sleb(i.a!))
        break
      case "i64":
        out.push(...sleb64(i.a!))
        break
      case "f32":
        out.push(...f32Bytes(i.a!))
        break
      case "f64":
        out.push(...f64Bytes(i.a!))
        break
      case "mem":
        out.push(...uleb(i.a!), ...uleb(i.b!))
        break
      case "block":
        out.push(i.t ? VALTYPE[i.t] : 0x40)
        break
      case "call":
        out.push(...uleb(callee(i.sym!)))
        break
      case "lane":
        out.push(i.a!)
        break
      case "v128":
        out.push(...f32Bytes(i.a!), ...f32Bytes(i.a!), ...f32Bytes(i.a!), ...f32Bytes(i.a!))
        break
      case "shuffle":
        if (!(i.lanes?.length === 16 && i.lanes.every((l) => Number.isInteger(l) && l >= 0 && l < 32))) throw new RangeError(`${i.op}: 16 lane indices in [0, 32) expected`)
        out.push(...i.lanes)
        break
    }
  }
  return out
}

// ---------------------------------------------------------------------------------------------
// Modules

export interface FuncType {
  readonly params: readonly ValType[]
  readonly results: readonly ValType[]
}

export interface WasmFunc {
  /** Symbolic name (call target); exported under it when `exported`. */
  readonly name: string
  readonly exported: boolean
  readonly type: FuncType
  /** Declared locals after the params, in index order. */
  readonly locals: readonly ValType[]
  readonly code: readonly Instr[]
  /** Free-form notes for the text rendering (never encoded). */
  readonly notes?: readonly string[]
}

export interface WasmImportFunc {
  readonly module: string
  readonly field: string
  /** Symbolic name used by `call`. */
  readonly name: string
  readonly type: FuncType
}

export interface WasmModule {
  readonly memory: { readonly module: string; readonly field: string; readonly minPages: number; readonly maxPages?: number; readonly shared: boolean }
  readonly imports: readonly WasmImportFunc[]
  readonly funcs: readonly WasmFunc[]
}

const typeKey = (t: FuncType) => `${t.params.join(",")}>${t.results.join(",")}`

/** The distinct function types of a module, in order of first use (imports first). */
export const moduleTypes = (m: WasmModule): FuncType[] => {
  const seen = new Map<string, FuncType>()
  for (const t of [...m.imports.map((i) => i.type), ...m.funcs.map((f) => f.type)]) if (!seen.has(typeKey(t))) seen.set(typeKey(t), t)
  return [...seen.values()]
}

/** Function index of every symbolic name (imports first, then defined functions). */
export const functionIndex = (m: WasmModule): Map<string, number> => new Map([...m.imports.map((i) => i.name), ...m.funcs.map((f) => f.name)].map((n, k) => [n, k] as const))

const section = (id: number, body: readonly number[]): number[] => [id, ...uleb(body.length), ...body]

/** Groups consecutive equal local types into (count, type) runs. */
const localRuns = (locals: readonly ValType[]): number[][] => {
  const runs: { n: number; t: ValType }[] = []
  for (const t of locals) {
    const last = runs[runs.length - 1]
    if (last && last.t === t) last.n++
    else runs.push({ n: 1, t })
  }
  return runs.map((r) => [...uleb(r.n), VALTYPE[r.t]])
}

/** The module's bytes: type, import, function, export and code sections. */
export const encodeModule = (m: WasmModule): Uint8Array => {
  const types = moduleTypes(m)
  const typeIdx = new Map(types.map((t, k) => [typeKey(t), k] as const))
  const fnIdx = functionIndex(m)
  const callee = (sym: string) => {
    const k = fnIdx.get(sym)
    if (k === undefined) throw new Error(`call to unknown function '${sym}'`)
    return k
  }
  const mem = m.memory
  const limits = mem.shared ? [0x03, ...uleb(mem.minPages), ...uleb(mem.maxPages ?? 65536)] : mem.maxPages !== undefined ? [0x01, ...uleb(mem.minPages), ...uleb(mem.maxPages)] : [0x00, ...uleb(mem.minPages)]
  const bytes = [
    ...[0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00],
    ...section(1, vec(types.map((t) => [0x60, ...vec(t.params.map((p) => [VALTYPE[p]])), ...vec(t.results.map((r) => [VALTYPE[r]]))]))),
    ...section(
      2,
      vec([
        [...name(mem.module), ...name(mem.field), 0x02, ...limits],
        ...m.imports.map((i) => [...name(i.module), ...name(i.field), 0x00, ...uleb(typeIdx.get(typeKey(i.type))!)]),
      ]),
    ),
    ...section(3, vec(m.funcs.map((f) => uleb(typeIdx.get(typeKey(f.type))!)))),
    ...section(7, vec(m.funcs.filter((f) => f.exported).map((f) => [...name(f.name), 0x00, ...uleb(callee(f.name))]))),
  ]
  // the code section, the module's bulk, is written into its bytes once: each body's pieces, then
  // its length before it, then the section's (spread into array after array, every code byte was
  // copied half a dozen times)
  const bodies = m.funcs.map((f) => [vec(localRuns(f.locals)), encodeInstrs(f.code, callee), [0x0b]])
  const bodyLengths = bodies.map((parts) => parts.reduce((n, p) => n + p.length, 0))
  const pieces: (readonly number[])[] = [uleb(m.funcs.length)]
  bodies.forEach((parts, k) => pieces.push(uleb(bodyLengths[k]), ...parts))
  const codeLength = pieces.reduce((n, p) => n + p.length, 0)
  pieces.unshift(bytes, [10], uleb(codeLength))
  const out = new Uint8Array(pieces.reduce((n, p) => n + p.length, 0))
  let at = 0
  for (const p of pieces) {
    out.set(p, at)
    at += p.length
  }
  return out
}
