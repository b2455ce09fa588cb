// lowering.FlattenStorage: same meaning (storageAlign'd stages among the cases); its output
// verifies with flat storage.
import { flattenStorage } from "../../../src/lowering/tir/flatten-storage.js"
import { passLaws } from "./support.js"

passLaws(flattenStorage())
