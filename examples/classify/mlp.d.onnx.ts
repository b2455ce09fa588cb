// written by tessera's esbuild plugin for mlp.onnx: the module `import model from "./mlp.onnx"` gives
export declare const inputs: readonly [{ readonly name: "input"; readonly dtype: "float32"; readonly shape: readonly [1, 784] }]
export declare const outputs: readonly [{ readonly name: "output"; readonly dtype: "float32"; readonly shape: readonly [1, 10] }]
export declare const inputNames: readonly ["input"]
export declare const outputNames: readonly ["output"]
export declare const run: (feeds: { readonly "input": Float32Array }) => Promise<{ readonly "output": { readonly dtype: "float32"; readonly shape: readonly number[]; readonly data: Float32Array } }>
declare const model: { readonly run: typeof run; readonly inputs: typeof inputs; readonly outputs: typeof outputs; readonly inputNames: typeof inputNames; readonly outputNames: typeof outputNames }
export default model
