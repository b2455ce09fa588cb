#!/usr/bin/env bash
# Every GPU check of the cuda target in one call of the device tool (under 9 minutes), with what
# travels under 64 MiB: the artifacts are written ON the GPU machine, not carried. Here:
#
#   npm run build && node dist/scripts/gpu-prepare.js --ablation --fp16 && node scripts/gpu-node-bundle.mjs
#   bash scripts/gpu-session.sh --pack          # .gpu-carry/: node (xz), the bundle, onnxruntime's outputs
#
# then on the GPU machine (carry .gpu-carry):
#
#   bash scripts/gpu-session.sh [--deadline 540] [--tune R18_SECONDS,MNV2_SECONDS]
#
#   0. unpacks node, runs the bundled gpu-prepare with --references (the same bytes as here: the
#      same flags, the same seed) into .gpu, and puts node and the bundle where the checks expect;
#   1. scripts/gpu-node-check.sh: `run`, `bench` and a 60 s `tune --target cuda` through Node;
#   2. scripts/gpu-fp16.sh: the fp32 and fp16 artifacts against onnxruntime and PyTorch;
#   3. scripts/gpu-check.sh --variants: the default against no-shuffle / no-float4 / previous;
# each within what is left of --deadline seconds. Logs and JSON go to $OUT (or .gpu/session).
# --sweep (after `node dist/scripts/gpu-prepare.js --out DIR --variants K1,K2 --seed S` here and
# `--pack DIR`): instead of 1-3, the baseline sweep in one call (what took the H200 two): the
# variants of DIR (v0 AutoTVM's template at its defaults, v1 / v2 the defaults / AutoTVM's with every
# tiled kernel's launch_bounds knob at 1, the rest seeded random configs of each
# task's whole cuda space, both sketches), gpu-check --variants (per launch), gpu-tune-apply
# (per task the fastest correct config; the generated space's best against AutoTVM's template's),
# the artifacts compiled with that log measured against the defaults, onnxruntime and PyTorch, and
# compute-sanitizer on them.
# --tune: instead of 1-3, `tessera tune --target cuda` (xgb) on ResNet-18 and MobileNetV2 for the
# given seconds each, gpu-prepare --tuning-log on the log (each network compiled with the log's
# best records, its default beside it as a variant), gpu-check --variants (tuned against default,
# outputs against onnxruntime) and gpu-check (the tuned artifacts against PyTorch eager and
# torch.compile).
set -uo pipefail
root="$(pwd)"
carry="$root/.gpu-carry"
if [ "${1:-}" = "--pack" ]; then
  [ -f "$root/.gpu/tessera/gpu-prepare.js" ] || { echo "gpu-session: no .gpu/tessera/gpu-prepare.js (node scripts/gpu-node-bundle.mjs)" >&2; exit 1; }
  rm -rf "$carry" && mkdir -p "$carry/refs"
  xz -T0 -6 -c "$(command -v node)" >"$carry/node.xz"
  cp -r "$root/.gpu/tessera" "$carry/tessera"
  for m in $(python3 -c "import json; print(' '.join(e['model'] for e in json.load(open('$root/.gpu/models.json'))['models']))"); do
    mkdir -p "$carry/refs/$m" && cp -r "$root/.gpu/$m/reference" "$carry/refs/$m/"
  done
  # --pack SWEEP_DIR: also a `gpu-prepare --variants` folder written here, without the default
  # artifacts' weights (written again on the GPU machine: --sweep)
  if [ -n "${2:-}" ]; then
    cp -r "$2" "$carry/sweep" && find "$carry/sweep" -mindepth 2 -maxdepth 2 -name constants.bin.gz -delete
  fi
  du -sh "$carry"
  exit 0
fi
deadline=540
tune=""
sweep=""
while [ $# -gt 0 ]; do
  case "$1" in
    --deadline) deadline="$2"; shift 2 ;;
    --tune) tune="$2"; shift 2 ;;
    --sweep) sweep=1; shift ;;
    *) echo "gpu-session: unknown flag $1" >&2; exit 2 ;;
  esac
done
start=$SECONDS
left() { echo $((deadline - (SECONDS - start))); }
out="${OUT:-$root/.gpu/session}"
mkdir -p "$out"
if [ -n "${CUDA_HOME:-}" ]; then export PATH="$CUDA_HOME/bin:$PATH"; fi
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH="/usr/local/cuda/bin:$PATH"; fi
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader 2>&1 | head -1 | tee "$out/gpu.txt"
echo "== 0. prepare (node, the bundled gpu-prepare) =="
mkdir -p /tmp/node/bin && xz -dc "$carry/node.xz" >/tmp/node/bin/node && chmod +x /tmp/node/bin/node
if [ -n "$sweep" ]; then
  node=/tmp/node/bin/node; tools="$carry/tessera"; sw="$carry/sweep"
  # (more files than a device call brings back: everything in one archive, the two tables beside it)
  back="$out"; out=/tmp/gpu-session-sweep; mkdir -p "$out"
  trap 'tar czf "$back/sweep-session.tgz" -C "$out" . ; cp "$out/tune-apply.txt" "$out/check-tuned.log" "$back/" 2>/dev/null' EXIT
  # the default artifacts, whose weights the variants share, written here from the same flags (the
  # weights stayed behind); everything else of them must equal what was carried
  seed=$(python3 -c "import json; print(json.load(open('$sw/models.json'))['seed'])")
  models=$(python3 -c "import json; print(','.join(e['model'] for e in json.load(open('$sw/models.json'))['models']))")
  # (GPU_SESSION_EMULATE=1: the same steps on the CPU, gpu-check --emulate, to try the script without a GPU)
  emu=(); [ -n "${GPU_SESSION_EMULATE:-}" ] && emu=(--emulate)
  "$node" "$tools/gpu-prepare.js" --out /tmp/gpu-main --models "$models" --seed "$seed" --references "$sw" >"$out/prepare-sweep.log" 2>&1
  echo "prepare rc=$? [$(left) s left]"; grep -v '^ *$' "$out/prepare-sweep.log" | tail -3
  for m in ${models//,/ }; do
    cp /tmp/gpu-main/$m/constants.bin.gz "$sw/$m/" && diff -rq /tmp/gpu-main/$m "$sw/$m" && echo "$m: the default artifact written here equals the carried one"
  done
  echo "== sweep [$(left) s left] =="
  t=$(( $(left) - 200 )); [ $t -gt 300 ] && t=300
  timeout $t bash "$root/scripts/gpu-check.sh" "$sw" "${emu[@]}" --variants --sweep-runs 20 --sweep-budget $(( t - 60 )) >"$out/sweep.log" 2>&1
  echo "rc=$?" >>"$out/sweep.log"; tail -6 "$out/sweep.log"
  cp "$sw/sweep.json" "$out/" 2>/dev/null; for f in "$sw"/*-variants.json; do cp "$f" "$out/"; done
  "$node" "$tools/gpu-tune-apply.js" "$sw/sweep.json" --out "$out/sweep-tuning.jsonl" >"$out/tune-apply.txt" 2>&1
  echo "tune-apply rc=$?"; grep "both sketches\|sum to" "$out/tune-apply.txt"
  echo "== the artifacts of the sweep's best [$(left) s left] =="
  "$node" "$tools/gpu-prepare.js" --out "$root/.gpu-tuned" --models "$models" --seed "$seed" --tuning-log "$out/sweep-tuning.jsonl" --references "$sw" >"$out/prepare-tuned.log" 2>&1
  echo "prepare rc=$?"; grep -v '^ *$' "$out/prepare-tuned.log" | tail -2
  t=$(( $(left) - 150 )); [ $t -gt 120 ] && t=120
  timeout $t bash "$root/scripts/gpu-check.sh" "$root/.gpu-tuned" "${emu[@]}" --variants --sweep-runs 20 --sweep-budget $(( t - 40 )) >"$out/sweep-tuned.log" 2>&1
  echo "rc=$?" >>"$out/sweep-tuned.log"; tail -5 "$out/sweep-tuned.log"; cp "$root/.gpu-tuned/sweep.json" "$out/sweep-tuned.json" 2>/dev/null
  echo "== against onnxruntime and PyTorch, memcheck [$(left) s left] =="
  mc=(--memcheck); [ -n "${GPU_SESSION_EMULATE:-}" ] && mc=(--emulate)
  timeout $(( $(left) - 5 )) bash "$root/scripts/gpu-check.sh" "$root/.gpu-tuned" --runs 100 "${mc[@]}" >"$out/check-tuned.log" 2>&1
  echo "rc=$?" >>"$out/check-tuned.log"; tail -9 "$out/check-tuned.log"
  echo "done in $((SECONDS - start)) s"
  exit 0
fi
/tmp/node/bin/node "$carry/tessera/gpu-prepare.js" --out "$root/.gpu" --ablation --fp16 --references "$carry/refs" 2>&1 | tee "$out/prepare.log" | tail -2
mkdir -p "$root/.gpu/node/bin" "$out" && cp /tmp/node/bin/node "$root/.gpu/node/bin/node" && cp -r "$carry/tessera" "$root/.gpu/tessera"
if [ -n "$tune" ]; then
  node="$root/.gpu/node/bin/node"; cli="$root/.gpu/tessera/main.js"
  export TESSERA_CACHE_DIR=/tmp/tessera-cache && mkdir -p "$TESSERA_CACHE_DIR" && chmod 700 "$TESSERA_CACHE_DIR"
  i=0
  for m in resnet18 mobilenetv2; do
    i=$((i + 1)); secs=$(echo "$tune" | cut -d, -f$i)
    "$node" "$cli" zoo $m --out /tmp/$m.onnx >/dev/null 2>&1
    echo "== tune $m ${secs}s [$(left) s left] =="
    timeout $((secs + 60)) "$node" "$cli" tune /tmp/$m.onnx --target cuda --trials 64 --batch 8 --time-budget ${secs}s --log "$out/tune.jsonl" --seed 1 --no-network-check >"$out/tune-$m.log" 2>&1
    echo "tune rc=$?"; grep -c . "$out/tune.jsonl"; grep -v '^ *$' "$out/tune-$m.log" | tail -4
  done
  echo "== the tuned artifacts [$(left) s left] =="
  /tmp/node/bin/node "$carry/tessera/gpu-prepare.js" --out "$root/.gpu-tuned" --tuning-log "$out/tune.jsonl" --references "$carry/refs" 2>&1 | tee "$out/prepare-tuned.log" | grep -v '^ *$' | tail -4
  timeout $(( $(left) - 150 )) bash "$root/scripts/gpu-check.sh" "$root/.gpu-tuned" --variants --sweep-runs 20 --sweep-budget 60 >"$out/sweep-tuned.log" 2>&1
  echo "rc=$?" >>"$out/sweep-tuned.log"; tail -8 "$out/sweep-tuned.log"; cp "$root/.gpu-tuned/sweep.json" "$out/sweep-tuned.json" 2>/dev/null
  echo "== tuned against PyTorch [$(left) s left] =="
  timeout $(( $(left) - 5 )) bash "$root/scripts/gpu-check.sh" "$root/.gpu-tuned" --runs 100 >"$out/check-tuned.log" 2>&1
  echo "rc=$?" >>"$out/check-tuned.log"; tail -7 "$out/check-tuned.log"
  echo "done in $((SECONDS - start)) s"
  exit 0
fi
echo "== 1. Node: run, bench, tune --target cuda (ResNet-18) [$(left) s left] =="
timeout $(( $(left) < 220 ? $(left) : 220 )) bash "$root/scripts/gpu-node-check.sh" --trials 4 --budget 60s >"$out/node.log" 2>&1
tail -1 "$out/node.log" | tee "$out/node.json"
echo "== 2. fp16 and fp32 against onnxruntime and PyTorch [$(left) s left] =="
t=$(( $(left) - 90 )); [ $t -gt 300 ] && t=300
timeout $t bash "$root/scripts/gpu-fp16.sh" "$root/.gpu" --runs 100 >"$out/fp16.log" 2>&1
echo "rc=$?" >>"$out/fp16.log"; tail -25 "$out/fp16.log"
cp "$root/.gpu/fp16.json" "$out/" 2>/dev/null
echo "== 3. fetch-width ablation [$(left) s left] =="
t=$(( $(left) - 10 ))
if [ $t -gt 60 ]; then
  timeout $t bash "$root/scripts/gpu-check.sh" "$root/.gpu" --variants --sweep-runs 20 --sweep-budget $(( t - 40 )) >"$out/sweep.log" 2>&1
  echo "rc=$?" >>"$out/sweep.log"; tail -20 "$out/sweep.log"
  cp "$root/.gpu/sweep.json" "$out/" 2>/dev/null
else
  echo "skipped: $t s left"
fi
echo "done in $((SECONDS - start)) s"
