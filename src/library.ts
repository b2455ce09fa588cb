// The library's stages that run anywhere — decode, graph passes, fusion, lowering, TIR passes, the
// emitters, the executor, the zoo — exported by both entries: Node's (./index.ts) adds the backend
// table, the pipeline over it and the devices with Node's workers, the c device and the tuner; a
// browser's (./browser.ts) the portable backends on a page's devices. Nothing here imports a Node module.
export * from "./ast/graph/dtype.js"
export * from "./ast/graph/tensor.js"
export * from "./ast/graph/attrs.js"
export * from "./ast/graph/op.js"
export * from "./ast/graph/graph.js"
export * from "./ast/graph/errors.js"
export { evaluate, runGraph, checkFeeds } from "./ast/graph/evaluate.js"
export { OPS, isOpName, lookupOp, type OpName } from "./ast/graph/ops/index.js"
export { decodeOnnx, decodeModelSync, MAX_OPSET, MIN_OPSET } from "./ast/onnx/decode.js"
export { DecodeError, UnsupportedModelError } from "./ast/onnx/errors.js"
export { decodeTensor, encodeTensor } from "./ast/onnx/tensor-proto.js"
export { bind, bindSync, inferNodes } from "./ast/graph/infer.js"
export { arbGraphCase, buildRandomGraph, prng, type GraphCase } from "./ast/graph/arbitrary.js"
export { encodeOnnx } from "./ast/onnx/encode.js"
// graph level
export * as rewrite from "./rewrite/index.js"
export { optimize, optimizeAndPlan, defaultPasses } from "./rewrite/index.js"
// the quantization pass for fp32 models (`tessera quantize`): model + calibration inputs → QDQ bytes + report
export {
  quantizeModel,
  quantizeModelSync,
  prepareForQuantization,
  planQuantization,
  CALIBRATION_METHODS,
  QuantizationUnsupportedError,
  QuantizeOptionError,
  evaluatorRunner,
  withObservedOutputs,
  observingInputs,
  type GraphRunner,
  type ObservedRun,
  type CalibrationMethod,
  type LayerReport,
  type QuantizeOptions,
  type QuantizeReport,
  type QuantizeResult,
} from "./rewrite/quantize/index.js"
// operator level: languages, schedules, lowering
export * as te from "./ast/te/tensor.js"
export * as expr from "./ast/te/expr.js"
export * as schedule from "./ast/schedule/schedule.js"
export { evaluateTE } from "./ast/te/evaluate.js"
export { evaluatePrimFunc } from "./ast/tir/evaluate.js"
export { printPrimFunc } from "./ast/tir/tir.js"
export { lower, lowerSync } from "./lowering/lower.js"
export { arbComputeCase, arbScheduledCase, buildCompute, randomSchedule } from "./ast/te/arbitrary.js"
export { verifyPrimFunc, type TirExpect } from "./ast/tir/verify.js"
export { cpuTirPipeline, cpuEmitterAssumes, type CpuTirOptions } from "./lowering/tir/cpu-pipeline.js"
export { runTirSync, tirPass, tirSequential, type TirPass, type TirPipelineSpec } from "./lowering/tir/tir-pass.js"
export { simplifyTir } from "./lowering/tir/simplify-tir.js"
export { promoteAccumulators } from "./lowering/tir/promote-accumulators.js"
export { loopPartition } from "./lowering/tir/loop-partition.js"
export { vectorizeLoops } from "./lowering/tir/vectorize-loops.js"
export { unrollLoops } from "./lowering/tir/unroll-loops.js"
export { injectVirtualThread } from "./lowering/tir/inject-virtual-thread.js"
export { flattenStorage, type StorageAligns } from "./lowering/tir/flatten-storage.js"
export { rewriteStorage } from "./lowering/tir/rewrite-storage.js"
export { lowerIntrinsics, IntrinsicModeError } from "./lowering/tir/lower-intrinsics.js"
export { lowerGroups } from "./lowering/lower-group.js"
// targets, backends and the whole pipeline
export * from "./ast/target.js"
export { type Program, type Artifact, type KernelEntry } from "./lowering/program.js"
export { emitJsModule } from "./emit/js/emit.js"
export { emitC } from "./emit/c/emit.js"
export { EmitError } from "./emit/emit-error.js"
export { Device, type DeviceModule, type DeviceShape } from "./device/device.js"
export { createExecutor } from "./device/executor.js"
// auto-tuning
export { parseLog, bestRecords } from "./search/records.js"
export { zooGraph, zooModel, ZOO_NAMES } from "./zoo/index.js"
