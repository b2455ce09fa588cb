// lowering.Simplify: same meaning; its output verifies.
import { simplifyTir } from "../../../src/lowering/tir/simplify-tir.js"
import { passLaws } from "./support.js"

passLaws(simplifyTir)
