// The bounds a model must stay within, so that a small file cannot make compilation or the
// interpreter run unbounded time or memory. Each is generous: every zoo network and every ONNX
// conformance case is far inside it. A model past one gets a typed error naming the limit (never a
// hang, a stack overflow or an "internal error").
export const LIMITS = {
  /** Subgraphs (If / Loop / Scan bodies) nested inside each other. */
  subgraphDepth: 64,
  /** Nodes in a model, its subgraphs' included. */
  nodes: 1 << 20,
  /** Elements of any one tensor: inputs, initializers and every intermediate. */
  tensorElements: 2 ** 31 - 1,
  /**
   * Work the interpreter does for one node's subgraphs: each Loop / Scan iteration and each node a
   * body runs counts one. A Loop with a trip count of 2⁶² stops here instead of running forever.
   */
  subgraphSteps: 1 << 22,
} as const

/** `n` with thousands separators, for limit messages. */
export const showCount = (n: number): string => n.toLocaleString("en-US")
