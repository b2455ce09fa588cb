"""The fp16 device check of the cuda target (see gpu-fp16.sh, which runs this): each model's fp32
and fp16 artifacts built, run and compared with onnxruntime's outputs and each other, PyTorch eager
timed in fp32 and in half, one table and DIR/fp16.json."""
import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("gpu_check", os.path.join(here, "gpu-check.py"))
gc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gc)


def fp16_verdict(d, m):
    """fp16's tolerance against onnxruntime: the same top-5, max abs error within 2% of the largest |reference|."""
    out = {}
    for o in m["outputs"]:
        got = np.load(os.path.join(d, "out", o["file"])).astype(np.float64)
        ref = np.load(os.path.join(d, o["reference"])).astype(np.float64)
        c = gc.compare(got, ref)
        c["within_fp16_tolerance"] = bool(np.abs(got - ref).max() <= 0.02 * np.abs(ref).max() and c["top5"].split("/")[0] == c["top5"].split("/")[1])
        out[o["name"]] = c
    return out


def against(d16, d32, m):
    """The fp16 artifact's outputs against the fp32 artifact's (both on this GPU)."""
    return {o["name"]: gc.compare(np.load(os.path.join(d16, "out", o["file"])), np.load(os.path.join(d32, "out", o["file"]))) for o in m["outputs"]}


def time_torch_half(m, runs):
    """Median ms of torchvision's network (random weights) in eager mode, fp32 (TF32 off) and .half(), CUDA events after warm-up."""
    try:
        import torch
        import torchvision
    except ImportError as e:
        return {"error": f"torch not importable ({e})"}
    if not torch.cuda.is_available():
        return {"error": "torch sees no GPU"}
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    net = getattr(torchvision.models, m["torchvision"])(weights=None).cuda().eval()
    x = torch.randn(*m["inputs"][0]["shape"], device="cuda")

    def timed(f, x):
        with torch.no_grad():
            for _ in range(10):
                f(x)
            torch.cuda.synchronize()
            ms = []
            for _ in range(runs):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                f(x)
                b.record()
                b.synchronize()
                ms.append(a.elapsed_time(b))
        return statistics.median(ms)

    fp32 = timed(net, x)
    half = net.half()
    return {"torch": torch.__version__, "eager_fp32_ms": fp32, "eager_half_ms": timed(half, x.half())}


def memcheck(d, m):
    if not shutil.which("compute-sanitizer"):
        return "compute-sanitizer not found"
    cmd = ["compute-sanitizer", "--tool", "memcheck", "./model", "--runs", "1", "--warmup", "0", "--out", "out"] + [a for i in m["inputs"] for a in ("--input", f"{i['name']}={i['file']}")]
    r = subprocess.run(cmd, cwd=d, capture_output=True, text=True, timeout=240)
    tail = (r.stdout + r.stderr).strip().splitlines()
    return next((line for line in reversed(tail) if "ERROR SUMMARY" in line), f"exit {r.returncode}: {tail[-1] if tail else ''}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--emulate", action="store_true", help="build with the host compiler and run on the CPU (no GPU, no torch)")
    ap.add_argument("--no-memcheck", action="store_true")
    a = ap.parse_args()
    root = os.path.abspath(a.dir)
    spec = json.load(open(os.path.join(root, "models.json")))
    name, arch = gc.gpu()
    if not a.emulate and not arch:
        raise SystemExit("gpu-fp16: nvidia-smi sees no GPU (--emulate runs the check on the CPU)")
    report = {"gpu": name, "arch": arch, "emulated": a.emulate, "models": []}
    rows = []
    for m in spec["models"]:
        if "fp16" not in m:
            print(f"gpu-fp16: {m['model']} has no fp16 artifact (gpu-prepare --fp16)", file=sys.stderr)
            continue
        d32, d16 = os.path.join(root, m["dir"]), os.path.join(root, m["fp16"])
        m16 = {**m, "dir": m["fp16"]}
        if a.emulate:
            # run_tessera cleans its folder after an emulated run: build and run both, keeping the outputs to compare
            r32 = gc.run_tessera(root, m, 1, True, None)
            r16 = gc.run_tessera(root, m16, 1, True, None)
            entry = {"model": m["model"], "fp32": r32, "fp16": r16}
        else:
            r32 = gc.run_tessera(root, m, a.runs, False, arch)
            r16 = gc.run_tessera(root, m16, a.runs, False, arch)
            r16["outputs"] = fp16_verdict(d16, m16)
            entry = {"model": m["model"], "fp32": r32, "fp16": r16, "fp16_vs_fp32": against(d16, d32, m), "torch": time_torch_half(m, a.runs)}
            if not a.no_memcheck:
                entry["fp16_memcheck"] = memcheck(d16, m16)
        report["models"].append(entry)
        o16 = next(iter(entry["fp16"]["outputs"].values()))
        t = entry.get("torch", {})
        rows.append((m["model"], entry["fp32"]["median_ms"], entry["fp16"]["median_ms"], o16.get("max_abs"), o16.get("top5"), o16.get("within_fp16_tolerance", "-"), t.get("eager_fp32_ms"), t.get("eager_half_ms"), entry.get("fp16_memcheck", "-")))
    json.dump(report, open(os.path.join(root, "fp16.json"), "w"), indent=1)
    fmt = lambda x: f"{x:.3f}" if isinstance(x, float) else str(x)
    print(f"GPU: {name} ({arch}){' — emulated on the CPU' if a.emulate else ''}")
    print("| network | fp32 ms | fp16 ms | fp16 / fp32 | fp16 max abs vs onnxruntime | top-5 | within tolerance | torch eager fp32 ms | torch eager half ms | memcheck |")
    print("|---|---:|---:|---:|---:|---|---|---:|---:|---|")
    for r in rows:
        ratio = r[2] / r[1] if isinstance(r[1], float) and r[1] > 0 else float("nan")
        print("| " + " | ".join([r[0], fmt(r[1]), fmt(r[2]), fmt(ratio), f"{r[3]:.2e}" if isinstance(r[3], float) else str(r[3]), str(r[4]), str(r[5]), fmt(r[6]), fmt(r[7]), str(r[8])]) + " |")
    print("wrote", os.path.join(root, "fp16.json"))


if __name__ == "__main__":
    main()
