// Two or more ways of running the same network timed in one process: `rounds` blocks of `runs`
// end-to-end runs, the sides alternating block by block (the order reversed every other round:
// this shared machine's slow spells last seconds), one untimed run before each block. Per side,
// the wall and the process's CPU milliseconds of each run (scripts/parallel-ab.ts, plan-ab.ts).

const cpuMs = () => {
  const u = process.cpuUsage()
  return (u.user + u.system) / 1000
}
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms))

export interface Side {
  readonly side: string
  readonly run: () => void
}

/** Each side's wall and CPU times (ms) a run; `pauseMs` before each block (libgomp's workers spin for a while after a region). */
export const alternatedRuns = async (sides: readonly Side[], rounds: number, runs: number, pauseMs = 0) => {
  const wall: Record<string, number[]> = Object.fromEntries(sides.map((s) => [s.side, []]))
  const cpu: Record<string, number[]> = Object.fromEntries(sides.map((s) => [s.side, []]))
  for (let round = 0; round < rounds; round++)
    for (const { side, run } of round % 2 ? [...sides].reverse() : sides) {
      if (pauseMs > 0) await pause(pauseMs)
      run()
      for (let i = 0; i < runs; i++) {
        const c0 = cpuMs()
        const t0 = performance.now()
        run()
        wall[side].push(performance.now() - t0)
        cpu[side].push(cpuMs() - c0)
      }
    }
  return { wall, cpu }
}
