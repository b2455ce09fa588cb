// lowering.UnrollLoops: an unrolled loop of constant bounds and at most `maxUnroll` iterations
// becomes the sequence of its copies; any other unrolled loop becomes serial.
//
// Opt level 0: it legalises loop kinds (no unrolled loop the emitters would have to copy is left).
import { c, constValue } from "../../ast/te/expr.js"
import { mapStmt, seq, substituteStmt } from "../../ast/tir/tir.js"
import { tirPass, type TirPass } from "./tir-pass.js"

export const unrollLoops = (maxUnroll = 16): TirPass =>
  tirPass(
    "lowering.UnrollLoops",
    0,
    (f) => ({
      ...f,
      body: mapStmt(f.body, (x) => {
        if (x.kind !== "for" || x.forKind !== "unrolled") return undefined
        const lo = constValue(x.min)
        const ext = constValue(x.extent)
        if (lo === undefined || ext === undefined || ext > maxUnroll) return { ...x, forKind: "serial" }
        return seq(Array.from({ length: ext }, (_, i) => substituteStmt(x.body, new Map([[x.var.name, c(lo + i)]]))))
      }),
    }),
    { maxUnroll },
  )
