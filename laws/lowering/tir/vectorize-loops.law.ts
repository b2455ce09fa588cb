// lowering.VectorizeLoops: same meaning; its output verifies (every vectorized loop left is of
// constant extent within the lanes, over straight-line code).
import { vectorizeLoops } from "../../../src/lowering/tir/vectorize-loops.js"
import { passLaws } from "./support.js"

passLaws(vectorizeLoops(8))
