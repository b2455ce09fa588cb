// lowering.UnrollLoops: same meaning; its output verifies (no unrolled loop beyond the limit).
import { unrollLoops } from "../../../src/lowering/tir/unroll-loops.js"
import { passLaws } from "./support.js"

passLaws(unrollLoops(8))
