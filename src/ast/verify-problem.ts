// What a verifier reports of an ill-formed program (a Graph, a PrimFunc): where, and what does not
// hold. The pass that produced it turns it into a VerifyError (src/rewrite/pass.ts).
export interface VerifyProblem {
  readonly where: string
  readonly reason: string
}
