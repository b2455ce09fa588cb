"""The device check of the cuda target (see gpu-check.sh, which runs this): build, run and compare
Tessera's artifacts, then time PyTorch eager and torch.compile on the same networks; one table."""
import argparse
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np

# fp32 peak without tensor cores (TFLOP/s) of the GPUs the check expects, from NVIDIA's datasheets
FP32_PEAK_TFLOPS = {"H100 80GB HBM3": 66.9, "H100 SXM": 66.9, "H200": 66.9, "H100 PCIe": 51.2, "A100": 19.5}


def sh(cmd, cwd=None, timeout=None):
    t0 = time.time()
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        sys.stderr.write(f"$ {' '.join(cmd)} (in {cwd})\n{r.stdout[-4000:]}{r.stderr[-4000:]}\n")
        raise SystemExit(f"gpu-check: `{' '.join(cmd)}` failed with exit {r.returncode}")
    return r.stdout, time.time() - t0


def gpu():
    """The GPU's name and its architecture (sm_90), or (None, None) without nvidia-smi."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,compute_cap", "--format=csv,noheader"], capture_output=True, text=True, timeout=30).stdout.strip().splitlines()
    except (OSError, subprocess.TimeoutExpired):
        return None, None
    if not out:
        return None, None
    name, cap = [x.strip() for x in out[0].split(",")]
    return name, "sm_" + cap.replace(".", "")


def compare(out, ref):
    """Max abs and rel error (rel: over |ref| + 1e-6... per element, max), and top-5 agreement of the last axis."""
    out = out.astype(np.float64)
    ref = ref.astype(np.float64)
    if out.shape != ref.shape:
        return {"error": f"shape {out.shape} vs reference {ref.shape}"}
    diff = np.abs(out - ref)
    rel = diff / np.maximum(np.abs(ref), 1e-6)
    row_out = out.reshape(-1, out.shape[-1])
    row_ref = ref.reshape(-1, ref.shape[-1])
    top = [set(np.argsort(-a)[:5]) == set(np.argsort(-b)[:5]) for a, b in zip(row_out, row_ref)]
    close = bool(np.all(diff <= 1e-3 * np.abs(ref) + 1e-4))
    return {"max_abs": float(diff.max()), "max_rel": float(rel.max()), "top5": f"{sum(top)}/{len(top)}", "close": close}


def unzip_weights(d):
    """The model's constants.bin from the constants.bin.gz gpu-prepare wrote (once); its path."""
    weights = os.path.join(d, "constants.bin")
    if not os.path.exists(weights):
        with gzip.open(weights + ".gz", "rb") as src, open(weights + ".tmp", "wb") as dst:
            shutil.copyfileobj(src, dst)
        os.replace(weights + ".tmp", weights)
    return weights


def run_tessera(root, m, runs, emulate, arch, profile=0):
    d = os.path.join(root, m["dir"])
    unzip_weights(d)
    try:
        if emulate:
            _, build_s = sh(["g++", "-O2", "-std=c++17", "-x", "c++", "-o", "model-emulated", "runner.cu", "tessera_launcher.cu"], cwd=d)
            exe, runs, warmup = "./model-emulated", 1, 0
        elif shutil.which("make"):
            _, build_s = sh(["make", "-s", "model", f"CUDA_ARCH={arch}"], cwd=d, timeout=600)
            exe, warmup = "./model", 10
        else:
            # the Makefile's rule, without make
            _, build_s = sh(["nvcc", "-O3", "-std=c++17", f"-arch={arch}", "-o", "model", "runner.cu", "tessera_launcher.cu"], cwd=d, timeout=600)
            exe, warmup = "./model", 10
        os.makedirs(os.path.join(d, "out"), exist_ok=True)
        cmd = [exe, "--out", "out", "--runs", str(runs), "--warmup", str(warmup)] + [a for i in m["inputs"] for a in ("--input", f"{i['name']}={i['file']}")]
        if profile:
            cmd += ["--profile", str(profile)]
        stdout, _ = sh(cmd, cwd=d, timeout=600)
        timing = json.loads(stdout.strip().splitlines()[-1])
        results = {o["name"]: compare(np.load(os.path.join(d, "out", o["file"])), np.load(os.path.join(d, o["reference"]))) for o in m["outputs"]}
        launches = json.load(open(os.path.join(d, "out", "profile.json")))["launches"] if profile else []
        return {"build_s": build_s, "median_ms": timing["median_ms"], "runs": timing["runs"], "outputs": results, "launches": launches}
    finally:
        if emulate:
            # leave the folder as gpu-prepare wrote it (it travels to the GPU machine: its size counts)
            for f in ["constants.bin", "model-emulated"]:
                if os.path.exists(os.path.join(d, f)):
                    os.remove(os.path.join(d, f))
            shutil.rmtree(os.path.join(d, "out"), ignore_errors=True)


def time_torch(m, runs, with_compile):
    """Median ms of torchvision's network (random weights) in eager mode and under torch.compile, CUDA events after warm-up."""
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

    def timed(f):
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

    out = {"torch": torch.__version__, "eager_ms": timed(net)}
    if with_compile:
        try:
            t0 = time.time()
            compiled = torch.compile(net)
            with torch.no_grad():
                compiled(x)
            out["compile_s"] = time.time() - t0
            out["compiled_ms"] = timed(compiled)
        except Exception as e:  # a torch.compile that fails here is reported, not the end of the check
            out["compile_error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return out


def build_cmd(emulate, arch):
    """The command that builds an artifact folder's runner, and the executable it makes."""
    if emulate:
        return ["g++", "-O2", "-std=c++17", "-x", "c++", "-o", "model-emulated", "runner.cu", "tessera_launcher.cu"], "./model-emulated"
    if shutil.which("make"):
        return ["make", "-s", "model", f"CUDA_ARCH={arch}"], "./model"
    return ["nvcc", "-O3", "-std=c++17", f"-arch={arch}", "-o", "model", "runner.cu", "tessera_launcher.cu"], "./model"


def sweep_variant(root, m, v, exe, runs, warmup, profile):
    """One variant run once on the model's input and weights: its outputs against the reference, its median and each launch's median (ms)."""
    root = os.path.abspath(root)  # the runner runs in the variant's folder: every path it gets is absolute
    d = os.path.join(root, v["dir"])
    main = os.path.join(root, m["dir"])
    shutil.rmtree(os.path.join(d, "out"), ignore_errors=True)
    os.makedirs(os.path.join(d, "out"))
    cmd = [exe, "--out", "out", "--runs", str(runs), "--warmup", str(warmup), "--weights", os.path.join(main, "constants.bin"), "--profile", str(profile)]
    cmd += [a for i in m["inputs"] for a in ("--input", f"{i['name']}={os.path.join(main, i['file'])}")]
    r = subprocess.run(cmd, cwd=d, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        return {"close": False, "error": f"exit {r.returncode}: {(r.stderr or r.stdout).strip()[-400:]}"}
    timing = json.loads(r.stdout.strip().splitlines()[-1])
    outs = [compare(np.load(os.path.join(d, "out", o["file"])), np.load(os.path.join(main, o["reference"]))) for o in m["outputs"]]
    bad = [o["error"] for o in outs if "error" in o]
    res = {
        "close": not bad and all(o["close"] for o in outs),
        "max_abs": max((o.get("max_abs", float("inf")) for o in outs), default=None),
        "max_rel": max((o.get("max_rel", float("inf")) for o in outs), default=None),
        "median_ms": timing["median_ms"],
        "launches": json.load(open(os.path.join(d, "out", "profile.json")))["launches"],
    }
    if bad:
        res["error"] = "; ".join(bad)
    return res


def sweep(a, spec, name, arch):
    """--variants: every model's variants (gpu-prepare --variants) built in parallel, each run once for its outputs and --profile times; DIR/sweep.json."""
    from concurrent.futures import ThreadPoolExecutor

    t0 = time.time()
    emulate = a.emulate
    runs, warmup, profile = (1, 0, 1) if emulate else (a.sweep_runs, 10, a.sweep_runs)
    todo = []
    for m in spec["models"]:
        if not m.get("variants"):
            continue
        unzip_weights(os.path.join(a.dir, m["dir"]))
        for v in m["variants"]:
            d = os.path.join(a.dir, v["dir"])
            for f in os.listdir(d):
                if f.endswith(".gz") and f != "constants.bin.gz" and not os.path.exists(os.path.join(d, f[:-3])):
                    with gzip.open(os.path.join(d, f), "rb") as src, open(os.path.join(d, f[:-3]), "wb") as dst:
                        shutil.copyfileobj(src, dst)
            todo.append((m, v))
    if not todo:
        raise SystemExit("gpu-check --variants: no model in models.json has variants (gpu-prepare --variants K)")
    cmd, exe = build_cmd(emulate, arch)
    workers = max(1, min(len(todo), os.cpu_count() or 1))
    # the estimate: one build's time (the first, alone) × the waves of the rest, and a run's time × the variants
    per_run = 50.0 if emulate else 2.5
    counts = ", ".join("%s %d" % (m["model"], len(m["variants"])) for m in spec["models"] if m.get("variants"))
    print(f"gpu-check --variants: {len(todo)} artifacts ({counts}); building on {workers} workers, then {len(todo)} runs of {runs} + {profile} profiled", flush=True)

    def build(mv):
        """One variant's build, its process group killed after --sweep-build-timeout (a build that long is reported, not waited for)."""
        d = os.path.join(a.dir, mv[1]["dir"])
        b0 = time.time()
        p = subprocess.Popen(cmd, cwd=d, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            text, _ = p.communicate(timeout=a.sweep_build_timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, 9)
            p.communicate()
            return f"build timed out after {a.sweep_build_timeout:.0f} s", time.time() - b0
        return (None if p.returncode == 0 else f"build exit {p.returncode}: {text.strip()[-400:]}"), time.time() - b0

    waves = -(-len(todo) // workers)
    print(f"gpu-check --variants: at most {waves * a.sweep_build_timeout:.0f} s of builds ({waves} waves of at most {a.sweep_build_timeout:.0f} s), then ~{per_run * len(todo):.0f} s of runs (~{per_run:.0f} s each, at most {a.sweep_budget:.0f} s)", flush=True)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        built = list(pool.map(build, todo))
    times = sorted(b for _, b in built)
    print(f"gpu-check --variants: built in {time.time() - t0:.1f} s (a build {times[0]:.1f}-{times[-1]:.1f} s, median {times[len(times) // 2]:.1f} s; {sum(1 for e, _ in built if e)} failed)", flush=True)
    t1 = time.time()
    out = {"gpu": name or "none (emulated on the CPU)", "arch": arch, "emulated": emulate, "runs": runs, "profile": profile, "models": {}}
    for (m, v), (err, build_s) in zip(todo, built):
        models = out["models"].setdefault(m["model"], {"variants": {}})
        if err:
            res = {"close": False, "error": err}
        elif time.time() - t1 > a.sweep_budget:
            res = {"close": False, "error": f"not run: the sweep's budget of {a.sweep_budget} s was spent"}
        else:
            try:
                res = sweep_variant(a.dir, m, v, exe, runs, warmup, profile)
            except Exception as e:  # a variant that fails is a finding, not the end of the sweep
                res = {"close": False, "error": f"{type(e).__name__}: {e}"}
        res["build_s"] = round(build_s, 2)
        models["variants"][v["name"]] = res
        ok = "ok" if res["close"] else ("WRONG" if "error" not in res else "FAILED")
        print(f"  {m['model']} {v['name']:>8} ({v['kind']}): {ok}" + (f" max abs err {res['max_abs']:.3g}, median {res['median_ms']:.3f} ms, launches {sum(l['median_ms'] for l in res['launches']):.3f} ms" if "median_ms" in res else f" {res.get('error', '')}"), flush=True)
    with open(os.path.join(a.dir, "sweep.json"), "w") as fh:
        json.dump(out, fh, indent=1)
    # the ablations (gpu-prepare --ablation): each against the default of the same call
    for model, mv in out["models"].items():
        kinds = {v["name"]: v for m in spec["models"] if m["model"] == model for v in m["variants"]}
        base = mv["variants"].get("default") or mv["variants"].get("tuned")
        abl = [(n, r) for n, r in mv["variants"].items() if kinds.get(n, {}).get("kind") in ("no-shuffle", "no-float4", "previous")]
        if not abl or not base or "median_ms" not in base:
            continue
        print(f"  ablation {model}: default {base['median_ms']:.3f} ms (warp shuffles and float4)", flush=True)
        for n, r in abl:
            if "median_ms" in r:
                print(f"    {n:>10}: {r['median_ms']:.3f} ms, default / this {base['median_ms'] / r['median_ms']:.3f}, outputs {'close' if r['close'] else 'WRONG'} (max abs err {r['max_abs']:.3g})", flush=True)
            else:
                print(f"    {n:>10}: {r.get('error', 'no time')}", flush=True)
    print(f"gpu-check --variants: {os.path.join(a.dir, 'sweep.json')} in {time.time() - t0:.1f} s", flush=True)
    if emulate:
        # leave the variant folders as gpu-prepare wrote them (they travel)
        for m, v in todo:
            d = os.path.join(a.dir, v["dir"])
            for f in os.listdir(d):
                p = os.path.join(d, f)
                if f == "out":
                    shutil.rmtree(p)
                elif not f.endswith(".gz") and v["dir"] != m["dir"]:
                    os.remove(p)
                elif v["dir"] == m["dir"] and f in ("model-emulated", "constants.bin"):
                    os.remove(p)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile (it compiles for a minute or more per network)")
    ap.add_argument("--emulate", action="store_true", help="build with the host compiler and run on the CPU (no GPU, no torch)")
    ap.add_argument("--profile", type=int, default=20, help="time each launch alone over this many runs (0: not); the slowest are listed, all go to DIR/<model>-profile.json")
    ap.add_argument("--memcheck", action="store_true", help="also run each network once under compute-sanitizer's memcheck (out-of-bounds and misaligned accesses)")
    ap.add_argument("--variants", action="store_true", help="instead: the sweep of gpu-prepare --variants (each model's default and variants built in parallel, run once each for outputs and per-launch times) into DIR/sweep.json")
    ap.add_argument("--sweep-runs", type=int, default=20, help="--variants: timed runs and profiled runs of each variant")
    ap.add_argument("--sweep-build-timeout", type=float, default=100, help="--variants: seconds a variant's build may take (longer: killed and reported)")
    ap.add_argument("--sweep-budget", type=float, default=90, help="--variants: seconds of runs after which the variants not yet run are left out (reported)")
    a = ap.parse_args()
    spec = json.load(open(os.path.join(a.dir, "models.json")))
    name, arch = gpu()
    if not a.emulate and name is None:
        raise SystemExit("gpu-check: no GPU (nvidia-smi found none); --emulate checks the artifacts on the CPU")
    arch = arch or spec["arch"]
    if a.variants:
        return sweep(a, spec, name, arch)
    lines = [f"gpu-check: {name or 'no GPU (emulated on the CPU)'}, {arch}; artifacts built for {spec['arch']} by gpu-prepare, seed {spec['seed']}"]
    print(lines[0], flush=True)
    rows = []
    for m in spec["models"]:
        try:
            t = run_tessera(a.dir, m, a.runs, a.emulate, arch, 0 if a.emulate else a.profile)
            print(f"{m['model']}: built in {t['build_s']:.1f} s, median {t['median_ms']:.3f} ms over {t['runs']} runs; {json.dumps(t['outputs'])}", flush=True)
            if t["launches"]:
                with open(os.path.join(a.dir, f"{m['model']}-profile.json"), "w") as fh:
                    json.dump(t["launches"], fh, indent=1)
                total = sum(l["median_ms"] for l in t["launches"])
                print(f"{m['model']}: {len(t['launches'])} launches, {total:.3f} ms timed alone; the slowest:", flush=True)
                for l in sorted(t["launches"], key=lambda l: -l["median_ms"])[:8]:
                    print(f"  {l['median_ms']:.4f} ms  {l['name']}", flush=True)
        except (Exception, SystemExit) as e:  # one network's failure is reported; the others and torch still run
            print(f"{m['model']}: FAILED: {e}", flush=True)
            t = {"median_ms": None, "outputs": {"-": {"error": f"failed: {e}"}}}
        if a.memcheck and not a.emulate and t["median_ms"] is not None:
            try:  # the sanitizer runs on some machines' runtimes only: its failure is reported, not the end of the check
                out, _ = sh(["compute-sanitizer", "--tool", "memcheck", "--error-exitcode", "3", "./model", "--runs", "1", "--warmup", "0"] + [x for i in m["inputs"] for x in ("--input", f"{i['name']}={i['file']}")], cwd=os.path.join(a.dir, m["dir"]), timeout=120)
                print(f"{m['model']}: compute-sanitizer memcheck: {out.strip().splitlines()[-1] if out.strip() else 'no output'}", flush=True)
            except (Exception, SystemExit) as e:
                print(f"{m['model']}: compute-sanitizer memcheck: {e}", flush=True)
        p = {} if a.emulate else time_torch(m, a.runs, not a.no_compile)
        if p:
            print(f"{m['model']}: torch {json.dumps(p)}", flush=True)
        rows.append((m, t, p))
    peak = next((v for k, v in FP32_PEAK_TFLOPS.items() if name and k in name), None)
    head = ["model", "max abs err", "max rel err", "top-5", "outputs close", "tessera ms", "eager ms", "compile ms", "tessera/eager", "tessera/compile", "tessera % fp32 peak"]
    table = []
    for m, t, p in rows:
        o = list(t["outputs"].values())[0]
        eager, comp = p.get("eager_ms"), p.get("compiled_ms")
        frac = f"{100 * m['flops'] / (t['median_ms'] * 1e-3) / (peak * 1e12):.2f}" if peak and not a.emulate and t['median_ms'] else "-"
        f = lambda x, d=3: "-" if x is None else f"{x:.{d}f}"
        ms = t["median_ms"]
        table.append([m["model"], f"{o.get('max_abs', float('nan')):.3g}", f"{o.get('max_rel', float('nan')):.3g}", o.get("top5", o.get("error", "?")), str(all(r.get("close", False) for r in t["outputs"].values())), f(ms), f(eager), f(comp), f(ms / eager if eager and ms else None, 2), f(ms / comp if comp and ms else None, 2), frac if ms else "-"])
    widths = [max(len(r[k]) for r in [head] + table) for k in range(len(head))]
    fmt = lambda r: " | ".join(x.ljust(w) for x, w in zip(r, widths))
    lines += ["", fmt(head), "-+-".join("-" * w for w in widths)] + [fmt(r) for r in table]
    if peak:
        lines.append(f"(fp32 peak {peak} TFLOP/s without tensor cores; median over {a.runs} runs after 10 warm-up runs, CUDA events, inputs on the device; torch: TF32 off)")
    print("\n".join(lines[1:]))
    with open(os.path.join(a.dir, "report.txt"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    bad = [m["model"] for m, t, _ in rows if not all(r.get("close", False) for r in t["outputs"].values())]
    if bad:
        raise SystemExit(f"gpu-check: outputs differ from onnxruntime's for {', '.join(bad)}")


if __name__ == "__main__":
    main()
