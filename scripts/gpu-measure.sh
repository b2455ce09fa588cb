#!/usr/bin/env bash
# One short run on a lent GPU (about 5 minutes, under 8) that measures what issue 22's sixth wave
# changed, from the repository root, with .gpu prepared HERE (no GPU needed):
#
#   npm run build && node dist/scripts/gpu-prepare.js --ablation && node scripts/gpu-node-bundle.mjs
#   mkdir -p .gpu/node/bin && cp "$(command -v node)" .gpu/node/bin/node     # a linux-x64 node
#
# then, on the GPU machine (carry .gpu):
#
#   bash scripts/gpu-measure.sh [--budget 60s] [--trials 4]
#
#   1. the tuner's measure (tune --target cuda: its candidates are the GPU rules' space, each timed
#      as its launches alone between two events) and bench's kernel time: scripts/gpu-node-check.sh
#      on ResNet-18 — `run` against onnxruntime's outputs, `bench` (median_ms of whole runs beside
#      kernel_ms, the kernels alone), a 60 s whole-model `tune` (each task's best GFLOP/s: ResNet-18's
#      3x3 convs should read hundreds to thousands, not the 0.28 of a one-thread candidate);
#   2. per-buffer fetch widths: scripts/gpu-check.sh .gpu --variants on gpu-prepare's ablation —
#      ResNet-18 and MobileNetV2, the default (float4 fetches where proven, coalesced scalars
#      elsewhere) against no-float4 (every fetch scalar), no-shuffle and previous (neither), each
#      one's outputs against onnxruntime's, median of 20 whole runs, in one call.
# Prints both reports and writes .gpu/measure.json ({"node": …, "sweep": …}). Each step has its own
# time limit; a step that fails is reported and the other still runs.
set -uo pipefail
root="$(pwd)"
budget=60s
trials=4
while [ $# -gt 0 ]; do
  case "$1" in
    --budget) budget="$2"; shift 2 ;;
    --trials) trials="$2"; shift 2 ;;
    *) echo "gpu-measure: unknown flag $1" >&2; exit 2 ;;
  esac
done
if [ -n "${CUDA_HOME:-}" ]; then export PATH="$CUDA_HOME/bin:$PATH"; fi
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH="/usr/local/cuda/bin:$PATH"; fi
[ -f "$root/.gpu/models.json" ] || { echo "gpu-measure: no .gpu/models.json (node dist/scripts/gpu-prepare.js --ablation, here)" >&2; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1
echo "== 1. tune --target cuda's measure, bench's kernel time (ResNet-18, through Node) =="
node_json="$(timeout 200 bash "$root/scripts/gpu-node-check.sh" --trials "$trials" --budget "$budget" | tail -1)"
echo "$node_json"
echo "== 2. per-buffer fetch widths: default against no-float4 / no-shuffle / previous (ResNet-18, MobileNetV2) =="
timeout 280 bash "$root/scripts/gpu-check.sh" "$root/.gpu" --variants --sweep-runs 20 --sweep-budget 120
sweep_rc=$?
python3 - "$root/.gpu" "$node_json" "$sweep_rc" <<'PY'
import json, os, sys
d, node_json, sweep_rc = sys.argv[1], sys.argv[2], int(sys.argv[3])
try:
    node = json.loads(node_json)
except Exception:
    node = {"ok": False, "error": node_json[-400:]}
sweep = json.load(open(os.path.join(d, "sweep.json"))) if os.path.exists(os.path.join(d, "sweep.json")) else {"error": f"no sweep.json (gpu-check exit {sweep_rc})"}
json.dump({"node": node, "sweep": sweep}, open(os.path.join(d, "measure.json"), "w"), indent=1)
print("wrote", os.path.join(d, "measure.json"))
PY
