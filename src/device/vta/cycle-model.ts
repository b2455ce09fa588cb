// The cycle model the simulator times with: the record lives beside the configuration
// (src/ast/vta/cycle-model.ts, the target's description) so that the lowering can derive defaults
// from it too; one record, re-exported here for the device side.
export * from "../../ast/vta/cycle-model.js"
