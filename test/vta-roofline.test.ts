// The VTA roofline (src/search/vta-conv2d.ts's bounds, src/search/vta-roofline.ts's picture): the
// roof and ridge of the default configuration, the class and epilogue ceiling of ResNet-18 layers
// worked out by hand, and the SVG — the same bytes on every render, each layer's points where the
// axes put them.
import { describe, expect, it } from "vitest"
import { defaultVtaConfig, deriveVta } from "../src/ast/vta/config.js"
import { VTA_CYCLE_MODEL } from "../src/device/vta/cycle-model.js"
import type { VtaConv2d } from "../src/lowering/vta/conv2d.js"
import { conv2dBound, vtaRoof } from "../src/search/vta-conv2d.js"
import { renderRooflineSvg, rooflineAxes, type RooflinePoint } from "../src/search/vta-roofline.js"

const d = deriveVta(defaultVtaConfig)
const roof = vtaRoof(d, VTA_CYCLE_MODEL)
// ResNet-18's C2 (56×56, 64 → 64, 3×3) and C3 (the same, 1×1), in blocks of 16 channels
const c2: VtaConv2d = { ci: 4, co: 4, h: 56, w: 56, kh: 3, kw: 3, stride: 1, pad: 1, shift: 8 }
const c3: VtaConv2d = { ...c2, kh: 1, kw: 1, pad: 0 }

describe("VTA roofline", () => {
  it("the default configuration: 512 ops a cycle (1×16 · 16×16 multiply-adds), 8 bytes a cycle, ridge at 64 ops a byte", () => {
    expect(roof).toEqual({ opsPerCycle: 512, bytesPerCycle: 8 })
  })

  it("C2 is compute-bound and its epilogue caps it at 36 / 43; C3 sits just under the ridge", () => {
    const b2 = conv2dBound(d, VTA_CYCLE_MODEL, c2)
    expect(b2.ops).toBe(2 * 56 * 56 * 64 * 64 * 9)
    expect(b2.bytes).toBe(56 * 56 * 64 + 64 * 64 * 9 + 56 * 56 * 64) // input, weights, output: once each
    expect(b2.bound).toBe("compute")
    // per output vector: 4 · 9 GEMM iterations, 1 reset, 3 ALU passes at II 2
    expect(b2.epilogueCeiling).toBeCloseTo(36 / 43, 12)
    const b3 = conv2dBound(d, VTA_CYCLE_MODEL, c3)
    expect(b3.intensity).toBeCloseTo((2 * 56 * 56 * 64 * 64) / (2 * 56 * 56 * 64 + 64 * 64), 9)
    expect(b3.bound).toBe("memory")
    expect(b3.attainable).toBeCloseTo(b3.intensity * 8, 9)
    // a 1×1 stride-2 conv touches a quarter of its input
    const s2 = conv2dBound(d, VTA_CYCLE_MODEL, { ...c3, stride: 2 })
    expect(s2.bytes).toBe(28 * 28 * 64 + 64 * 64 + 28 * 28 * 64)
  })

  const points: RooflinePoint[] = [
    { label: "C2", intensity: 528.5, without: 343.4, with: 426.4, ceiling: 428.7 },
    { label: "C3", intensity: 63.4, without: 76.3, with: 90.6, ceiling: 186.2 },
  ]

  it("renders the same bytes twice; a layer's points sit at its intensity and its ops per cycle", () => {
    const a = renderRooflineSvg(roof, points, "test")
    expect(renderRooflineSvg(roof, points.map((p) => ({ ...p })), "test")).toBe(a)
    const { px, py, x0, x1, y1 } = rooflineAxes(roof, points)
    expect([x0, x1, y1]).toEqual([4, 11, 10]) // 16 .. 2048 ops/B, up to 1024 ops/cycle
    const g = a.slice(a.indexOf('data-label="C2"'), a.indexOf("</g>", a.indexOf('data-label="C2"')))
    expect(g).toContain(`<circle cx="${px(528.5).toFixed(2)}" cy="${py(343.4).toFixed(2)}" r="4" fill="white"`)
    expect(g).toContain(`<circle cx="${px(528.5).toFixed(2)}" cy="${py(426.4).toFixed(2)}" r="4" fill="hsl(`)
    // the roof: the slope meets it at the ridge (64 ops/B, 512 ops/cycle)
    expect(a).toContain(`${px(64).toFixed(2)},${py(512).toFixed(2)} ${px(2048).toFixed(2)},${py(512).toFixed(2)}`)
    // an attainable point is never above the roof
    expect(py(426.4)).toBeGreaterThan(py(512))
  })
})
