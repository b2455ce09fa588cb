// Runs Effects inside vitest (the shape of @effect/vitest's `it.effect`, which needs vitest 5).
import { Effect, Exit, Cause } from "effect"
import { it } from "vitest"

export const itEffect = <A, E>(name: string, body: () => Effect.Effect<A, E>, timeout?: number) =>
  it(name, () => Effect.runPromise(body() as Effect.Effect<A, E, never>), timeout)

/** Runs an Effect expected to fail; returns its typed error (throws if it succeeded or died). */
export const runFailure = async <A, E>(eff: Effect.Effect<A, E>): Promise<E> => {
  const exit = await Effect.runPromiseExit(eff)
  if (Exit.isSuccess(exit)) throw new Error("expected a failure, got success")
  const err = Cause.findErrorOption(exit.cause)
  if (err._tag === "None") throw new Error(`expected a typed failure, got ${Cause.pretty(exit.cause)}`)
  return err.value
}
