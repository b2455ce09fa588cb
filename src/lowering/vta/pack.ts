// The graph pack (TVM's vta.top.graph_pack at batch 1): activations NCHW → NCHW1n16c, i.e.
// [C/BLOCK][H][W][BATCH][BLOCK] — exactly VTA's input / output elements in DRAM — and weights OIHW
// → OIHW16o16i, [O/BLOCK][I/BLOCK][KH][KW][BLOCK_OUT][BLOCK_IN] — VTA's weight elements. Channels
// that are not a multiple of the block are padded with zeros (a zero input channel or a zero weight
// adds nothing; padded output channels are dropped by the unpack). Pure and total over its shapes.

/** Channel blocks of `n` channels in blocks of `block`. */
export const blocksOf = (n: number, block: number): number => Math.ceil(n / block)

/** NCHW (N = 1) int8 → [⌈C/B⌉][H][W][1][B], zero-padded channels. */
export const packActivation = (block: number, c: number, h: number, w: number, data: ArrayLike<number>): Int8Array => {
  const cb = blocksOf(c, block)
  const out = new Int8Array(cb * h * w * block)
  for (let ch = 0; ch < c; ch++) {
    const b = Math.floor(ch / block)
    const lane = ch % block
    for (let y = 0; y < h; y++)
      for (let x = 0; x < w; x++) out[((b * h + y) * w + x) * block + lane] = data[(ch * h + y) * w + x]
  }
  return out
}

/** The inverse of packActivation: [⌈C/B⌉][H][W][1][B] → NCHW (N = 1), padded channels dropped. */
export const unpackActivation = (block: number, c: number, h: number, w: number, packed: ArrayLike<number>): Int8Array => {
  const out = new Int8Array(c * h * w)
  for (let ch = 0; ch < c; ch++) {
    const b = Math.floor(ch / block)
    const lane = ch % block
    for (let y = 0; y < h; y++)
      for (let x = 0; x < w; x++) out[(ch * h + y) * w + x] = packed[((b * h + y) * w + x) * block + lane]
  }
  return out
}

/** OIHW int8 → [⌈O/Bo⌉][⌈I/Bi⌉][KH][KW][Bo][Bi], zero-padded channels. */
export const packWeights = (blockOut: number, blockIn: number, o: number, i: number, kh: number, kw: number, data: ArrayLike<number>): Int8Array => {
  const ob = blocksOf(o, blockOut)
  const ib = blocksOf(i, blockIn)
  const out = new Int8Array(ob * ib * kh * kw * blockOut * blockIn)
  for (let oc = 0; oc < o; oc++)
    for (let ic = 0; ic < i; ic++)
      for (let y = 0; y < kh; y++)
        for (let x = 0; x < kw; x++) {
          const at = ((((Math.floor(oc / blockOut) * ib + Math.floor(ic / blockIn)) * kh + y) * kw + x) * blockOut + (oc % blockOut)) * blockIn + (ic % blockIn)
          out[at] = data[((oc * i + ic) * kh + y) * kw + x]
        }
  return out
}

/** The inverse of packWeights. */
export const unpackWeights = (blockOut: number, blockIn: number, o: number, i: number, kh: number, kw: number, packed: ArrayLike<number>): Int8Array => {
  const ib = blocksOf(i, blockIn)
  const out = new Int8Array(o * i * kh * kw)
  for (let oc = 0; oc < o; oc++)
    for (let ic = 0; ic < i; ic++)
      for (let y = 0; y < kh; y++)
        for (let x = 0; x < kw; x++) {
          const at = ((((Math.floor(oc / blockOut) * ib + Math.floor(ic / blockIn)) * kh + y) * kw + x) * blockOut + (oc % blockOut)) * blockIn + (ic % blockIn)
          out[((oc * i + ic) * kh + y) * kw + x] = packed[at]
        }
  return out
}

/** A per-channel int32 bias as [⌈O/Bo⌉][Bo] accumulator rows (BATCH 1), zero-padded. */
export const packBias = (blockOut: number, o: number, data: ArrayLike<number>): Int32Array => {
  const out = new Int32Array(blocksOf(o, blockOut) * blockOut)
  for (let k = 0; k < o; k++) out[k] = data[k]
  return out
}
