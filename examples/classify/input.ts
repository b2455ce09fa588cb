// The example's input: seeded, the same in Node, in a page and in the test's reference.
/** A seeded input in [-1, 1) (a 32-bit LCG: the same numbers in Node and in a page). */
export const seededInput = (n: number, seed = 7): Float32Array => {
  const x = new Float32Array(n)
  let s = seed >>> 0
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0
    x[i] = s / 2 ** 31 - 1
  }
  return x
}
