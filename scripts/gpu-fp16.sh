#!/usr/bin/env bash
# One short run on a lent GPU (about 3 minutes, under 6) that measures the cuda target's
# `--precision fp16` (issue 22): the artifact's tensors and weights as __half, float32 arithmetic
# and accumulation, float32 inputs and outputs. With .gpu prepared HERE (no GPU needed):
#
#   npm run build && node dist/scripts/gpu-prepare.js --fp16
#   bash scripts/gpu-fp16.sh .gpu --emulate     # the whole check on the CPU first (no GPU, no torch)
#
# then, on the GPU machine (carry .gpu; nvcc, python3 with numpy, torch and torchvision):
#
#   bash scripts/gpu-fp16.sh [.gpu] [--runs 100]
#
# For ResNet-18 and MobileNetV2 (batch 1), in one call: `make` the fp32 artifact and the fp16 one
# for this GPU's architecture, run each on the same seeded input (median of --runs after 10 warm-up
# runs, CUDA events, inputs on the device), compare both with onnxruntime's CPU outputs (max abs
# and rel error, top-5) and the fp16 outputs with the fp32 artifact's; time PyTorch eager in fp32
# (TF32 off) and in `.half()` on torchvision's network of the same shape (random weights); run the
# fp16 artifact once under compute-sanitizer's memcheck (misaligned half2 / 8-byte loads would show
# there). Prints one table and writes .gpu/fp16.json. fp16's tolerance against onnxruntime: the
# same top-5, and max abs error within 2% of the outputs' largest magnitude (half storage of every
# intermediate, 2^-11 relative a rounding, through some 20 to 60 kernels).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ -n "${CUDA_HOME:-}" ]; then export PATH="$CUDA_HOME/bin:$PATH"; fi
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH="/usr/local/cuda/bin:$PATH"; fi
dir="${1:-.gpu}"
[ $# -gt 0 ] && shift
[ -f "$dir/models.json" ] || { echo "gpu-fp16: no $dir/models.json (node dist/scripts/gpu-prepare.js --fp16, here)" >&2; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 || true
# (on the GPU a time limit of its own; emulated, ResNet-18 takes minutes of one CPU)
case " $* " in *" --emulate "*) exec python3 "$here/gpu-fp16.py" "$dir" "$@" ;; esac
exec timeout 360 python3 "$here/gpu-fp16.py" "$dir" "$@"
