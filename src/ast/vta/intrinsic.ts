// VTA's GEMM core declared in TE: out[i, j] += int32(inp[i, k]) · int32(wgt[j, k]) for a
// BATCH×BLOCK_IN input row block and a BLOCK_OUT×BLOCK_IN weight block into a BATCH×BLOCK_OUT int32
// accumulator tile — the meaning of one GEMM micro-op iteration (hardware/xilinx/src/vta.cc's
// gemm(): w_tensor[oc][ic], i_tensor[b][ic], a_tensor[b][oc]). A stage whose inner loop nest
// matches it can be tensorized to it; the TIR evaluator runs it by this declaration.
import { cast, mul } from "../te/expr.js"
import type { TensorIntrinsic } from "../te/intrinsic.js"
import { at, compute, placeholder, reduceAxis, sum } from "../te/tensor.js"
import type { VtaDerived } from "./config.js"

export const vtaGemmIntrinsic = (d: VtaDerived): TensorIntrinsic => {
  const inp = placeholder("inp", [d.batch, d.blockIn], "int8")
  const wgt = placeholder("wgt", [d.blockOut, d.blockIn], "int8")
  const k = reduceAxis(d.blockIn, "k")
  const out = compute("out", [d.batch, d.blockOut], (i, j) => sum(mul(cast("int32", at(inp, i, k.var)), cast("int32", at(wgt, j, k.var))), [k]), "int32")
  return { name: `vta_gemm_${d.batch}x${d.blockIn}x${d.blockOut}`, compute: out, inputs: [inp, wgt], mode: "update", emit: {} }
}
