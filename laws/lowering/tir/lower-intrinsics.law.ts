// lowering.LowerIntrinsics: same meaning on tensorized matmuls (the intrinsic runs by its
// declaration before, as a loop nest after), before or after FlattenStorage; its output verifies
// with no intrinsic left.
import * as fc from "fast-check"
import { flattenStorage } from "../../../src/lowering/tir/flatten-storage.js"
import { lowerIntrinsics } from "../../../src/lowering/tir/lower-intrinsics.js"
import { arbLoweredCase, arbTensorizedCase, passLaws } from "./support.js"

const cases = fc.oneof(arbTensorizedCase(), arbLoweredCase(["matmul", "conv2d_nchwc"]))
passLaws(lowerIntrinsics, { cases, runs: 30 })
passLaws(lowerIntrinsics, { cases, runs: 30, after: [flattenStorage()], variant: "after FlattenStorage" })
