#!/usr/bin/env bash
# The Node-side cuda check, run ON a GPU machine that has no Node, from the repository root:
#
#   bash scripts/gpu-node-check.sh [--trials N] [--budget 60s]
#
# Expects .gpu/node/bin/node (a node binary the lead packs) and .gpu/tessera/ (written here by
# `npm run build && node scripts/gpu-node-bundle.mjs`: the CLI bundled, koffi and its linux-x64
# binary, ResNet-18 from the zoo, a seeded input and onnxruntime's CPU outputs for it in ref/), and
# nvcc ($CUDA_HOME/bin or /usr/local/cuda/bin). Runs
#   1. `tessera run --target cuda` on ResNet-18 (the Device through the CUDA driver: nvcc builds the
#      cubin for this GPU, the driver loads and launches it) and compares its output with
#      onnxruntime's (max abs and rel error, top-5 agreement);
#   2. `tessera bench --target cuda` (median ms of the whole network on the GPU, and kernel_ms: its
#      kernels alone, launched back to back between two events);
#   3. a short `tessera tune --target cuda` (whole-model, --time-budget 60s, at most --trials 4 a
#      task) and counts its records and their errors, with each task's best GFLOP/s;
# and prints one line of JSON. Each step has a time limit; the whole stays under 3 minutes.
set -uo pipefail
root="$(pwd)"
node="$root/.gpu/node/bin/node"
t="$root/.gpu/tessera"
trials=4
budget=60s
while [ $# -gt 0 ]; do
  case "$1" in
    --trials) trials="$2"; shift 2 ;;
    --budget) budget="$2"; shift 2 ;;
    *) echo "gpu-node-check: unknown flag $1" >&2; exit 2 ;;
  esac
done
if [ -n "${CUDA_HOME:-}" ]; then export PATH="$CUDA_HOME/bin:$PATH"; fi
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH="/usr/local/cuda/bin:$PATH"; fi
[ -x "$node" ] || { echo "{\"ok\": false, \"error\": \"no node at $node\"}"; exit 1; }
[ -f "$t/main.js" ] || { echo "{\"ok\": false, \"error\": \"no $t/main.js (node scripts/gpu-node-bundle.mjs)\"}"; exit 1; }
out="$(mktemp -d)"
export TESSERA_CACHE_DIR="$out/cache"
mkdir -p "$TESSERA_CACHE_DIR" && chmod 700 "$TESSERA_CACHE_DIR"
model="$out/resnet18.onnx"
timeout 60 "$node" "$t/main.js" zoo resnet18 --out "$model" >"$out/zoo.log" 2>&1
want=$(python3 -c "import json; print(json.load(open('$t/ref/ref.json'))['sha256'])")
got=$(python3 -c "import hashlib; print(hashlib.sha256(open('$model','rb').read()).hexdigest())" 2>/dev/null)
[ "$want" = "$got" ] || { echo "{\"ok\": false, \"error\": \"the zoo model differs from the one the reference was computed on ($got, want $want)\"}"; exit 1; }
inputs=$(python3 -c "import json; r=json.load(open('$t/ref/ref.json')); print(' '.join('--input %s=$t/ref/%s' % (i['name'], i['file']) for i in r['inputs']))")
start=$(date +%s.%N)
timeout 120 "$node" "$t/main.js" run "$model" --target cuda $inputs --out "$out/run" >"$out/run.log" 2>&1
run_rc=$?
run_s=$(python3 -c "import time; print(round(time.time() - $start, 1))")
timeout 60 "$node" "$t/main.js" bench "$model" --target cuda --format json >"$out/bench.log" 2>&1
bench_rc=$?
start=$(date +%s.%N)
timeout 100 "$node" "$t/main.js" tune "$model" --target cuda --trials "$trials" --batch "$trials" --time-budget "$budget" --log "$out/tune.json" --seed 1 >"$out/tune.log" 2>&1
tune_rc=$?
tune_s=$(python3 -c "import time; print(round(time.time() - $start, 1))")
python3 - "$t" "$out" "$run_rc" "$run_s" "$bench_rc" "$tune_rc" "$tune_s" <<'PY'
import json, os, sys
import numpy as np
t, out, run_rc, run_s, bench_rc, tune_rc, tune_s = sys.argv[1:]
res = {"ok": False, "run_rc": int(run_rc), "run_s": float(run_s), "bench_rc": int(bench_rc), "tune_rc": int(tune_rc), "tune_s": float(tune_s)}
ref = json.load(open(os.path.join(t, "ref", "ref.json")))
errs = []
try:
    for o in ref["outputs"]:
        got = np.load(os.path.join(out, "run", o["file"])).astype(np.float64).ravel()
        want = np.load(os.path.join(t, "ref", o["reference"])).astype(np.float64).ravel()
        d = np.abs(got - want)
        errs.append({"output": o["name"], "max_abs": float(d.max()), "max_rel": float((d / (np.abs(want) + 1e-6)).max()),
                     "top5_same": sorted(np.argsort(-got)[:5].tolist()) == sorted(np.argsort(-want)[:5].tolist())})
    res["outputs"] = errs
except Exception as e:
    res["run_error"] = (open(os.path.join(out, "run.log")).read()[-600:] if os.path.exists(os.path.join(out, "run.log")) else str(e))
try:
    lines = [l for l in open(os.path.join(out, "bench.log")).read().splitlines() if l.startswith("{")]
    b = json.loads(lines[-1])
    # median_ms: whole runs (copies in and out, a synchronize after each kernel); kernel_ms: the kernels alone, back to back between two events
    res["bench"] = {k: b[k] for k in b if k in ("median_ms", "kernel_ms", "runs", "target")} or b
except Exception:
    res["bench_error"] = open(os.path.join(out, "bench.log")).read()[-400:]
try:
    recs = [json.loads(l) for l in open(os.path.join(out, "tune.json")) if l.strip().startswith("{")]
    # per task: its best GFLOP/s (the kernel's launches timed alone between events) and its records' errors
    tasks = {}
    for r in recs:
        t = tasks.setdefault(r["task"], {"records": 0, "errors": 0, "best_gflops": 0.0})
        t["records"] += 1
        t["errors"] += 1 if r.get("error") else 0
        t["best_gflops"] = round(max(t["best_gflops"], r.get("gflops", 0.0)), 1)
    res["tune"] = {"records": len(recs), "errors": sum(1 for r in recs if r.get("error")), "tasks": tasks,
                   "log_tail": open(os.path.join(out, "tune.log")).read()[-600:]}
except Exception:
    res["tune_error"] = open(os.path.join(out, "tune.log")).read()[-400:]
res["ok"] = res["run_rc"] == 0 and bool(errs) and all(e["max_abs"] < 1e-3 and e["top5_same"] for e in errs)
print(json.dumps(res))
PY
