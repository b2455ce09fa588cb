#!/usr/bin/env bash
# The device check of the cuda target, run ON the GPU machine (nvcc, python3 with numpy, torch,
# torchvision; no Node), over a folder that scripts/gpu-prepare.ts wrote here:
#
#   bash scripts/gpu-check.sh [DIR] [--runs N] [--no-compile] [--emulate]
#
# For each model in DIR/models.json: `make` its artifact with nvcc for this GPU's architecture,
# run it on the carried seeded input (--runs timed runs after warm-up, CUDA events; the median),
# compare its outputs with the carried onnxruntime-CPU outputs (max abs and rel error, top-5
# agreement); then PyTorch eager and torch.compile on torchvision's network of the same name and
# input shape (batch 1, fp32, TF32 off, random weights: latency only), timed the same way; one
# table at the end. --emulate builds the artifacts with the host compiler instead and runs them on
# the CPU (no GPU, no torch: what can be checked before the machine is lent). Everything it writes
# goes under DIR/<model>/out and DIR/report.txt.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dir="${1:-.gpu}"
[ $# -gt 0 ] && shift
if [ -n "${CUDA_HOME:-}" ]; then export PATH="$CUDA_HOME/bin:$PATH"; fi
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH="/usr/local/cuda/bin:$PATH"; fi
exec python3 "$here/gpu-check.py" "$dir" "$@"
