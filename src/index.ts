// Tessera's library entry point in Node: every stage as a composable function (./library.ts), the
// backend table, the pipeline over it, the devices and the tuner.
export * from "./library.js"
export { BACKENDS, backendOf, TargetUnavailableError, type Backend, type Codegen } from "./backend/index.js"
export { compileGraph, emitArtifact, loadArtifact, loadProgram, type CompileOptions, type TuningReport } from "./pipeline.js"
export { cDeviceLayer } from "./device/c/device.js"
export { jsDeviceLayer } from "./device/js/node.js"
export { wasmDeviceLayer } from "./device/wasm/node.js"
export { tuneTask } from "./search/tune.js"
export { randomTuner, gridTuner, gaTuner, xgbTuner } from "./search/tuners.js"
export { CostModel, XGBoostCostModel } from "./search/cost-model.js"
