// The quantization pass's typed failures.
import { Data } from "effect"

/** A node the pass cannot give a quantized meaning, with why. */
export interface UnquantizableNode {
  readonly node: string
  readonly op: string
  readonly reason: string
}

/**
 * Nodes inside the quantized region (a float input comes from a quantized tensor, or a float
 * output feeds a quantized node) that have no quantized meaning: never left float silently.
 */
export class QuantizationUnsupportedError extends Data.TaggedError("QuantizationUnsupportedError")<{
  readonly nodes: readonly UnquantizableNode[]
}> {
  override get message(): string {
    // every node named (the first ones with their reason): one line still, and none left out
    const shown = this.nodes.slice(0, 8).map((n) => `'${n.node}' (${n.op}): ${n.reason}`)
    const rest = this.nodes.slice(shown.length).map((n) => `'${n.node}' (${n.op})`)
    const more = rest.length ? `; and ${rest.length} more, for the same kind of reason: ${rest.join(", ")}` : ""
    return `${this.nodes.length} node(s) in the quantized region have no quantized meaning: ${shown.join("; ")}${more}`
  }
}

/** An option of the pass that does not fit the model (a --skip name it lacks, an opset too old). */
export class QuantizeOptionError extends Data.TaggedError("QuantizeOptionError")<{
  readonly option: string
  readonly reason: string
}> {
  override get message(): string {
    return `${this.option}: ${this.reason}`
  }
}
