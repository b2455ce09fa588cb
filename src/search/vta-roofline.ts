// The roofline picture of VTA layers, as the TVM paper draws it: attainable GEMM ops per cycle
// against arithmetic intensity (ops per DRAM byte), both axes log2; the configuration's compute
// roof and the bus's bandwidth slope; each layer a point without latency hiding (hollow) and with
// it (filled) at the layer's intensity, joined by a line, and a dash at the ceiling its own
// epilogue puts on the compute module. A pure function of its input: the same points give the
// same bytes (numbers printed with fixed decimals).
import type { VtaRoof } from "./vta-conv2d.js"

export interface RooflinePoint {
  readonly label: string
  /** GEMM ops per DRAM byte. */
  readonly intensity: number
  /** Ops per cycle achieved without and with virtual threads. */
  readonly without: number
  readonly with: number
  /** Ops per cycle the layer's epilogue lets the compute module reach. */
  readonly ceiling: number
}

const W = 720
const H = 480
const M = { left: 70, right: 150, top: 40, bottom: 56 }
const f = (v: number) => v.toFixed(2)
const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;")

/** The plot's axes: log2 ranges covering the roof, the ridge and every point, in whole powers of two. */
export const rooflineAxes = (roof: VtaRoof, points: readonly RooflinePoint[]) => {
  const ridge = roof.opsPerCycle / roof.bytesPerCycle
  const xs = [ridge, ...points.map((p) => p.intensity)]
  const ys = [roof.opsPerCycle, ...points.flatMap((p) => [p.without, p.with])].filter((v) => v > 0)
  const x0 = Math.floor(Math.log2(Math.min(...xs) / 2))
  const x1 = Math.ceil(Math.log2(Math.max(...xs) * 2))
  const y0 = Math.floor(Math.log2(Math.min(...ys) / 2))
  const y1 = Math.ceil(Math.log2(roof.opsPerCycle * 2))
  const px = (v: number) => M.left + ((Math.log2(v) - x0) / (x1 - x0)) * (W - M.left - M.right)
  const py = (v: number) => H - M.bottom - ((Math.log2(v) - y0) / (y1 - y0)) * (H - M.top - M.bottom)
  return { x0, x1, y0, y1, px, py, ridge }
}

export const renderRooflineSvg = (roof: VtaRoof, points: readonly RooflinePoint[], title: string): string => {
  const { x0, x1, y0, y1, px, py, ridge } = rooflineAxes(roof, points)
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="11">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${W / 2}" y="20" text-anchor="middle" font-size="14">${esc(title)}</text>`,
  ]
  // grid and ticks at powers of two
  for (let e = x0; e <= x1; e++) {
    const x = f(px(2 ** e))
    out.push(`<line x1="${x}" y1="${M.top}" x2="${x}" y2="${H - M.bottom}" stroke="#eee"/>`, `<text x="${x}" y="${H - M.bottom + 16}" text-anchor="middle">${2 ** e}</text>`)
  }
  for (let e = y0; e <= y1; e++) {
    const y = f(py(2 ** e))
    out.push(`<line x1="${M.left}" y1="${y}" x2="${W - M.right}" y2="${y}" stroke="#eee"/>`, `<text x="${M.left - 6}" y="${y}" text-anchor="end" dominant-baseline="middle">${2 ** e}</text>`)
  }
  out.push(
    `<rect x="${M.left}" y="${M.top}" width="${W - M.left - M.right}" height="${H - M.top - M.bottom}" fill="none" stroke="#333"/>`,
    `<text x="${(M.left + W - M.right) / 2}" y="${H - 16}" text-anchor="middle">arithmetic intensity (GEMM ops / DRAM byte)</text>`,
    `<text transform="translate(18 ${(M.top + H - M.bottom) / 2}) rotate(-90)" text-anchor="middle">attainable GEMM ops / cycle</text>`,
  )
  // the roofline: bandwidth slope up to the ridge, then the compute roof
  const xl = 2 ** x0
  const xr = 2 ** x1
  const yl = Math.max(xl * roof.bytesPerCycle, 2 ** y0)
  const xlFit = yl / roof.bytesPerCycle
  out.push(
    `<polyline class="roof" points="${f(px(xlFit))},${f(py(yl))} ${f(px(ridge))},${f(py(roof.opsPerCycle))} ${f(px(xr))},${f(py(roof.opsPerCycle))}" fill="none" stroke="#c0392b" stroke-width="2"/>`,
    `<text x="${f(px(xr) - 4)}" y="${f(py(roof.opsPerCycle) - 6)}" text-anchor="end" fill="#c0392b">GEMM roof ${roof.opsPerCycle} ops/cycle</text>`,
    `<text x="${f(px(ridge) - 6)}" y="${f(py(roof.opsPerCycle) + 14)}" text-anchor="end" fill="#c0392b">bus ${roof.bytesPerCycle} B/cycle</text>`,
  )
  // the layers
  points.forEach((p, k) => {
    const x = px(p.intensity)
    const hue = Math.round((k * 360) / Math.max(points.length, 1))
    const color = `hsl(${hue},65%,40%)`
    out.push(
      `<g class="layer" data-label="${esc(p.label)}" data-intensity="${f(p.intensity)}" data-without="${f(p.without)}" data-with="${f(p.with)}">`,
      `<line x1="${f(x - 6)}" y1="${f(py(p.ceiling))}" x2="${f(x + 6)}" y2="${f(py(p.ceiling))}" stroke="${color}" stroke-width="1.5" stroke-dasharray="2,1"/>`,
      `<line x1="${f(x)}" y1="${f(py(p.without))}" x2="${f(x)}" y2="${f(py(p.with))}" stroke="${color}"/>`,
      `<circle cx="${f(x)}" cy="${f(py(p.without))}" r="4" fill="white" stroke="${color}" stroke-width="1.5"/>`,
      `<circle cx="${f(x)}" cy="${f(py(p.with))}" r="4" fill="${color}"/>`,
      `<text x="${f(x + 7)}" y="${f(py(p.with) - 5)}" fill="${color}">${esc(p.label)}</text>`,
      `</g>`,
    )
  })
  // legend
  const lx = W - M.right + 12
  out.push(
    `<circle cx="${lx}" cy="${M.top + 10}" r="4" fill="white" stroke="#333" stroke-width="1.5"/><text x="${lx + 9}" y="${M.top + 14}">1 virtual thread</text>`,
    `<circle cx="${lx}" cy="${M.top + 28}" r="4" fill="#333"/><text x="${lx + 9}" y="${M.top + 32}">latency hiding</text>`,
    `<line x1="${lx - 6}" y1="${M.top + 46}" x2="${lx + 6}" y2="${M.top + 46}" stroke="#333" stroke-dasharray="2,1"/><text x="${lx + 9}" y="${M.top + 50}">epilogue ceiling</text>`,
    `</svg>`,
  )
  return `${out.join("\n")}\n`
}
