// The meaning of VTA's TIR: runs a VFunc on its DRAM tensors, statement by statement in program
// order (a vthread loop runs its threads one after another, each with its own allocations; tokens
// do not exist yet at this level). Buffers hold elements of lanes (see ir.ts); every access is
// bounds-checked. The GEMM is the intrinsic's declaration (src/ast/vta/intrinsic.ts:
// acc[b][o] += Σ_i int32(inp[b][i]) · int32(wgt[o][i]), wrapping), LOAD/STORE/ALU the simulator's
// semantics (src/device/vta/execute.ts): pads zero, a STORE keeps an accumulator's low 8 bits, ALU
// ADD wraps, SHR is arithmetic by
// its operand's low LOG_ACC_WIDTH bits read as signed.
import { evalExpr } from "../../../ast/te/eval-expr.js"
import type { Expr } from "../../../ast/te/expr.js"
import type { VtaDerived } from "../../../ast/vta/config.js"
import type { VtaAluOp } from "../../../ast/vta/isa.js"
import { DRAM_TENSORS, isDramTensor, VtaTirError, type Ref, type VFunc, type VStmt, type VtaScope } from "./ir.js"

interface Buf {
  readonly lanes: number
  readonly data: Int32Array
  readonly out8: boolean
}

const lanesOf = (d: VtaDerived, kind: VtaScope | "out"): number => (kind === "inp" ? d.batch * d.blockIn : kind === "wgt" ? d.blockOut * d.blockIn : d.batch * d.blockOut)

/** One lane of an ALU op, as the simulator's: SHR by the operand's low `shrArgBits` bits read as signed (negative: left), MUL by its low 8 bits read as signed. */
export const aluApply = (op: VtaAluOp, a: number, b: number, shrArgBits: number): number => {
  switch (op) {
    case "MIN":
      return Math.min(a, b)
    case "MAX":
      return Math.max(a, b)
    case "ADD":
      return (a + b) | 0
    case "SHR": {
      const sh = (b << (32 - shrArgBits)) >> (32 - shrArgBits)
      return sh >= 0 ? a >> sh : (a << -sh) | 0
    }
    case "MUL":
      return Math.imul(a, (b << 24) >> 24)
  }
}

/**
 * Runs `f` with its DRAM tensors given as flat lane arrays (data, kernel, bias: input; out is
 * created zeroed); returns every DRAM tensor as it ends.
 */
export const evaluateVFunc = (d: VtaDerived, f: VFunc, inputs: ReadonlyMap<string, ArrayLike<number>>): Map<string, Int32Array> => {
  const bufs = new Map<string, Buf>()
  for (const [name, elems] of f.tensors) {
    const kind = DRAM_TENSORS[name]
    const lanes = lanesOf(d, kind)
    const data = new Int32Array(elems * lanes)
    const given = inputs.get(name)
    if (given) {
      if (given.length !== data.length) throw new VtaTirError({ pass: "evaluate", reason: `tensor ${name} has ${given.length} values, expected ${data.length}` })
      data.set(Array.from(given))
    }
    bufs.set(name, { lanes, data, out8: kind === "out" })
  }
  const env = new Map<string, number>()
  const num = (e: Expr): number => evalExpr(e, env, () => {
    throw new VtaTirError({ pass: "evaluate", reason: "an index reads a buffer" })
  })
  const at = (r: Ref): { b: Buf; off: number } => {
    const b = bufs.get(r.buf)
    if (!b) throw new VtaTirError({ pass: "evaluate", reason: `unknown buffer ${r.buf}` })
    const i = num(r.idx)
    if (!(Number.isInteger(i) && i >= 0 && (i + 1) * b.lanes <= b.data.length)) throw new VtaTirError({ pass: "evaluate", reason: `element ${i} of ${r.buf} is out of bounds (${b.data.length / b.lanes} elements)` })
    return { b, off: i * b.lanes }
  }
  const put = (b: Buf, off: number, x: number) => (b.data[off] = b.out8 ? (x << 24) >> 24 : x | 0)
  const copyElem = (dst: Ref, src: Ref | undefined) => {
    const o = at(dst)
    const s = src ? at(src) : undefined
    if (s && s.b.lanes !== o.b.lanes) throw new VtaTirError({ pass: "evaluate", reason: `copy between ${src!.buf} and ${dst.buf}: ${s.b.lanes} and ${o.b.lanes} lanes` })
    for (let l = 0; l < o.b.lanes; l++) put(o.b, o.off + l, s ? s.b.data[s.off + l] : 0)
  }
  const gemm = (reset: boolean, acc: Ref, inp: Ref | undefined, wgt: Ref | undefined) => {
    const a = at(acc)
    if (reset) {
      a.b.data.fill(0, a.off, a.off + a.b.lanes)
      return
    }
    if (!inp || !wgt) throw new VtaTirError({ pass: "evaluate", reason: "a GEMM without operands" })
    const x = at(inp)
    const w = at(wgt)
    for (let b = 0; b < d.batch; b++)
      for (let o = 0; o < d.blockOut; o++) {
        let s = a.b.data[a.off + b * d.blockOut + o]
        for (let i = 0; i < d.blockIn; i++) s = (s + Math.imul(x.b.data[x.off + b * d.blockIn + i], w.b.data[w.off + o * d.blockIn + i])) | 0
        a.b.data[a.off + b * d.blockOut + o] = s
      }
  }
  const loops2 = (iterOut: number, iterIn: number, body: (o: number, i: number) => void) => {
    for (let o = 0; o < iterOut; o++) for (let i = 0; i < iterIn; i++) body(o, i)
  }
  const shifted = (r: Ref, off: number): Ref => ({ buf: r.buf, idx: { kind: "const", value: num(r.idx) + off, dtype: "int32" } })
  const exec = (s: VStmt): void => {
    switch (s.kind) {
      case "for": {
        const n = num(s.extent)
        const prev = env.get(s.var)
        for (let i = 0; i < n; i++) {
          env.set(s.var, i)
          exec(s.body)
        }
        if (prev === undefined) env.delete(s.var)
        else env.set(s.var, prev)
        return
      }
      case "seq":
        s.body.forEach(exec)
        return
      case "if":
        if (num(s.cond)) exec(s.then)
        return
      case "alloc": {
        if (bufs.has(s.name)) throw new VtaTirError({ pass: "evaluate", reason: `${s.name} is allocated twice` })
        bufs.set(s.name, { lanes: lanesOf(d, s.scope), data: new Int32Array(s.elems * lanesOf(d, s.scope)), out8: false })
        exec(s.body)
        bufs.delete(s.name)
        return
      }
      case "copy":
        copyElem(s.dst, s.valid === undefined || num(s.valid) ? s.src : undefined)
        return
      case "ew": {
        const o = at(s.dst)
        const vals: number[] = []
        for (let l = 0; l < o.b.lanes; l++)
          vals.push(evalExpr(s.value, env, (src, idx) => {
            const r = at({ buf: src, idx: { kind: "const", value: idx[0], dtype: "int32" } })
            if (r.b.lanes !== o.b.lanes) throw new VtaTirError({ pass: "evaluate", reason: `${src} read lane-wise into ${s.dst.buf}` })
            return r.b.data[r.off + l]
          }))
        vals.forEach((x, l) => put(o.b, o.off + l, x))
        return
      }
      case "gemm":
        gemm(s.reset, s.acc, s.inp, s.wgt)
        return
      case "dma": {
        const f = s.f
        const [ys, xs, st, y0, y1, x0, x1] = [f.ySize, f.xSize, f.xStride, f.yPad0, f.yPad1, f.xPad0, f.xPad1].map(num)
        if (s.op === "LOAD") {
          const width = x0 + xs + x1
          for (let y = 0; y < y0 + ys + y1; y++)
            for (let x = 0; x < width; x++) {
              const inside = y >= y0 && y < y0 + ys && x >= x0 && x < x0 + xs
              copyElem(shifted(s.sram, y * width + x), inside ? shifted(s.dram, (y - y0) * st + (x - x0)) : undefined)
            }
        } else loops2(ys, xs, (y, x) => copyElem(shifted(s.dram, y * st + x), shifted(s.sram, y * xs + x)))
        return
      }
      case "alu": {
        const o = at(s.dst)
        const src = s.imm === undefined ? at(s.src!) : undefined
        for (let l = 0; l < o.b.lanes; l++) o.b.data[o.off + l] = aluApply(s.op, o.b.data[o.off + l], src ? src.b.data[src.off + l] : s.imm!, d.shrArgBits)
        return
      }
      case "gemmKernel":
        loops2(num(s.iterOut), num(s.iterIn), (o, i) => {
          for (const u of s.uops)
            gemm(s.reset, shifted(u.dst, o * s.dstFactor[0] + i * s.dstFactor[1]), u.src && shifted(u.src, o * s.srcFactor[0] + i * s.srcFactor[1]), u.wgt && shifted(u.wgt, o * s.wgtFactor[0] + i * s.wgtFactor[1]))
        })
        return
      case "aluKernel":
        loops2(num(s.iterOut), num(s.iterIn), (o, i) => {
          for (const u of s.uops)
            exec({ kind: "alu", op: s.op, dst: shifted(u.dst, o * s.dstFactor[0] + i * s.dstFactor[1]), ...(s.imm !== undefined ? { imm: s.imm } : { src: shifted(u.src!, o * s.srcFactor[0] + i * s.srcFactor[1]) }) })
        })
        return
    }
  }
  exec(f.body)
  return new Map([...bufs].filter(([n]) => isDramTensor(n)).map(([n, b]) => [n, b.data]))
}
