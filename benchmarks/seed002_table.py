"""The seed-002 study's table: pipeline x formulation x engine, on this machine, in one run.

Pipelines (one RF ensemble per forward pass: PWI_disk, 32 frames x 1 plane wave x 128
elements x 334 int16 samples = 2.7 MB; grid 251 x 251 at 0.1 mm, F/# auto, linear
interpolation):
  RF2IQ_DAS_BMODE         rf2iq -> DAS -> B-mode uint8 (40 dB) of the 32 frames
  RF2IQ_DAS_DOPPLER       rf2iq -> DAS -> clutter 'poly' (order 2) -> lag-1 Kasai velocity and
                          variance with 5 x 5 Hamming spatial smoothing of the autocorrelations
  RF2IQ_DAS_POWERDOPPLER  rf2iq -> DAS -> clutter 'poly' -> power Doppler (dB)
Engines x formulations (CPU):
  usbeam C gather         usbeam.Pipeline / DopplerPipeline (csrc/beamform/das.c)
  usbeam C sparse         the same with Beamformer(formulation='sparse') (das_sparse.c, CSR x dense)
  ORT gather / cnn / sparse-dense
                          usbeam.onnx.export of the same pipeline, run by ONNX Runtime's CPU
                          execution provider (graph optimisations on, as many intra-op threads
                          as usbeam's OpenMP threads)
  PyMUST sparse           pymust.rf2iq, the dasmtx sparse matrix (built once) @ IQ, pymust.bmode /
                          slow-time mean subtraction (PyMUST has no clutter filter) +
                          pymust.iq2doppler (no smoothing); power Doppler: PyMUST has none, so
                          mean |IQ|^2 in NumPy after its beamforming (noted in the row)
GPU rows (usbeam CUDA gather and sparse/cuSPARSE with host RF in and maps out, ORT CUDA /
TensorRT providers per formulation, J/run from NVML through pynvml): run when usbeam's CUDA
backend or those providers are available, else printed as n/a.  They have never run (no GPU
on the machine this was written on).
Reported: forward-pass median and p95 (ms), FPS (images per second: 32 B-mode frames, or one
Doppler map, per pass / median), sustained input MB/s (RF bytes per pass / median), J/run
(incremental energy from NVML, where NVML and a GPU exist: n/a here), peak memory (peak RSS of
a fresh child process that builds the plan or graph and runs the passes, MiB).
Each engine is validated before it is timed (against usbeam C gather with the bounds of
tests/pipelines/test_onnx_export.py; PyMUST B-mode against usbeam's with rho >= 0.99), and the
engines are timed interleaved (round 1: every engine, round 2: every engine, ...), each timing
in its own child process; the medians and p95 are over all rounds' passes.

Usage: python benchmarks/seed002_table.py [--rounds 2] [--repeat 3] [--record] [--plot docs/seed002_table.png]
"""
import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

PIPELINES = ("RF2IQ_DAS_BMODE", "RF2IQ_DAS_DOPPLER", "RF2IQ_DAS_POWERDOPPLER")
ENGINES = ("usbeam C gather", "usbeam C sparse", "ORT gather", "ORT cnn", "ORT sparse-dense", "PyMUST sparse")
GPU_ENGINES = ("usbeam CUDA gather", "usbeam CUDA sparse (cuSPARSE)", "ORT CUDA gather", "ORT CUDA cnn",
               "ORT CUDA sparse-dense", "ORT TensorRT gather", "ORT TensorRT cnn")


def gpu_engines():
    """The GPU rows this machine can run (usbeam's CUDA backend, ORT's GPU providers)."""
    import onnxruntime as ort

    import usbeam

    found = []
    if usbeam.cuda_available():
        found += ["usbeam CUDA gather", "usbeam CUDA sparse (cuSPARSE)"]
    providers = ort.get_available_providers()
    if "CUDAExecutionProvider" in providers:
        found += ["ORT CUDA gather", "ORT CUDA cnn", "ORT CUDA sparse-dense"]
    if "TensorrtExecutionProvider" in providers:
        found += ["ORT TensorRT gather", "ORT TensorRT cnn"]
    return found


def build_usbeam(pipeline, cfg, formulation="gather", backend="cpu"):
    import usbeam

    rf = cfg["rf"]
    common = dict(fs=cfg["fs"], fc=cfg["fc"], c=cfg["c"], t0=cfg["t0"], n_samples=rf.shape[-1], backend=backend,
                  bandwidth=cfg["bandwidth"], f_number=cfg["f_number"], interpolation="linear",
                  das_options={"formulation": formulation})
    if pipeline == "RF2IQ_DAS_BMODE":
        return usbeam.Pipeline(cfg["probe"], cfg["sequence"], cfg["grid"], n_frames=rf.shape[0], dynamic_range=40.0,
                               **common)
    outputs = ("color",) if pipeline == "RF2IQ_DAS_DOPPLER" else ("power",)
    return usbeam.DopplerPipeline(cfg["probe"], cfg["sequence"], cfg["grid"], n_frames=rf.shape[0], prf=cfg["prf"],
                                  clutter="poly", average=(5, 5), outputs=outputs, **common)


def engine_runner(pipeline, engine, cfg):
    """run(rf) -> outputs (a tuple of arrays), images per pass, note."""
    rf = cfg["rf"]
    n_images = rf.shape[0] if pipeline == "RF2IQ_DAS_BMODE" else 1
    if engine.startswith("usbeam CUDA"):  # host RF in, host maps out: each pass ends synchronised
        pipe = build_usbeam(pipeline, cfg, "sparse" if "sparse" in engine else "gather", backend="cuda")
        if pipeline == "RF2IQ_DAS_BMODE":
            return (lambda data: (pipe(data),)), n_images, "host RF in, host B-mode out"

        def run_cuda(data):
            maps = pipe(data)
            return tuple(m.to_numpy() for m in (maps[:2] if pipeline == "RF2IQ_DAS_DOPPLER" else (maps.power,)))
        return run_cuda, n_images, "host RF in, maps copied out"
    if engine.startswith("usbeam C"):
        pipe = build_usbeam(pipeline, cfg, "sparse" if engine.endswith("sparse") else "gather")
        if pipeline == "RF2IQ_DAS_BMODE":
            out = np.empty(pipe.output_shape, pipe.output_dtype)
            return (lambda data: (pipe(data, out=out),)), n_images, ""
        if pipeline == "RF2IQ_DAS_DOPPLER":
            return (lambda data: tuple(pipe(data)[:2])), n_images, ""
        return (lambda data: (pipe(data).power,)), n_images, ""
    if engine.startswith("ORT"):
        import onnxruntime as ort

        import usbeam
        import usbeam.onnx

        provider = {"ORT CUDA": "CUDAExecutionProvider", "ORT TensorRT": "TensorrtExecutionProvider"}.get(
            " ".join(engine.split()[:2]), "CPUExecutionProvider")
        formulation = engine.split()[-1] if provider == "CPUExecutionProvider" else engine.split()[2]
        model = usbeam.onnx.export(build_usbeam(pipeline, cfg), formulation=formulation)
        options = ort.SessionOptions()
        options.intra_op_num_threads = usbeam.build_info()["cpu_threads"]
        session = ort.InferenceSession(model.SerializeToString(), options,
                                       providers=[provider] + (["CPUExecutionProvider"] if provider != "CPUExecutionProvider"
                                                               else []))
        del model
        return (lambda data: tuple(session.run(None, {"rf": data}))), n_images, f"onnxruntime {ort.__version__}"
    from bench_pipelines import pymust_pipeline

    run, _, _ = pymust_pipeline("RF2IQ_DAS_DOPPLER" if pipeline != "RF2IQ_DAS_BMODE" else pipeline, cfg)
    if pipeline == "RF2IQ_DAS_BMODE":
        return (lambda data: (np.ascontiguousarray(np.moveaxis(run(data), 2, 0)),)), n_images, ""
    if pipeline == "RF2IQ_DAS_DOPPLER":
        return (lambda data: tuple(run(data))), n_images, "mean subtraction, no smoothing"
    # power: PyMUST's beamforming (inside run's closure is not reachable): beamform again here
    import pymust  # noqa: F401
    from bench_pipelines import pymust_param

    xi, zi = np.meshgrid(cfg["grid"].x, cfg["grid"].z)
    param = pymust_param(cfg, cfg["sequence"][0])
    param.t0 = np.array(param.t0)
    matrix = pymust.dasmtx(1j * np.array((rf.shape[-1], rf.shape[2])), xi, zi, param, "linear")
    param.t0 = float(param.t0)

    def power(data):
        sig = np.transpose(data[:, 0], (2, 1, 0)).astype(np.float64)
        iq = pymust.rf2iq(sig, param)
        image = (matrix @ iq.reshape(-1, data.shape[0], order="F")).reshape(xi.shape + (data.shape[0],), order="F")
        image = image - image.mean(axis=2, keepdims=True)
        p = np.mean(np.abs(image) ** 2, axis=2)
        return (10 * np.log10(p / p.max()),)
    return power, n_images, "mean subtraction; power in NumPy (PyMUST has none)"


def validate(pipeline, engine, got, want, nyquist):
    """Raise AssertionError on a wrong answer (bounds of tests/pipelines/test_onnx_export.py)."""
    if pipeline == "RF2IQ_DAS_BMODE":
        g, w = got[0].astype(np.float64), want[0].astype(np.float64)
        rho = np.corrcoef(g.ravel(), w.ravel())[0, 1]
        if engine == "PyMUST sparse":
            assert rho >= 0.99, f"PyMUST B-mode vs usbeam: rho {rho}"
        else:
            assert np.abs(g - w).max() <= 1, f"{engine}: B-mode differs by more than 1 grey level"
        return f"rho {rho:.5f}"
    if pipeline == "RF2IQ_DAS_DOPPLER":
        dv = (got[0] - want[0] + nyquist) % (2 * nyquist) - nyquist
        strong = np.abs(want[0]) > 0.1 * nyquist
        med = float(np.median(np.abs(dv[strong]))) / nyquist
        limit = 0.05 if engine == "PyMUST sparse" else 0.01  # PyMUST: another clutter filter, no smoothing
        assert med <= limit, f"{engine}: velocity median diff {med} of Nyquist"
        return f"velocity median diff {med:.1e} VN"
    if engine == "PyMUST sparse":
        return "not compared (another clutter filter)"
    signal = want[0] > -30
    worst = float(np.abs(got[0] - want[0])[signal].max())
    assert worst <= 0.1, f"{engine}: power differs by {worst} dB"
    return f"power max diff {worst:.1e} dB"


def child(pipeline, engine, repeat, validate_it):
    import harness
    from bench_pipelines import pwi_disk_config

    cfg = pwi_disk_config()
    cfg["bandwidth"] = float(cfg["bandwidth"])
    rf = cfg["rf"]
    run, images, note = engine_runner(pipeline, engine, cfg)
    result = {"note": note}
    if validate_it:
        got = run(rf)
        ref_run, _, _ = engine_runner(pipeline, "usbeam C gather", cfg)
        want = ref_run(rf)
        nyquist = cfg["c"] * cfg["prf"] / (4 * cfg["fc"])
        result["check"] = validate(pipeline, engine, got, want, nyquist)
        print(json.dumps(result))
        return
    energy = None
    try:  # incremental energy of the GPU over the timed passes, where NVML and a GPU exist
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        energy = pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)  # mJ
    except Exception:  # no pynvml, no NVML, no GPU: J/run is n/a
        handle = None
    timing = harness.measure(lambda: run(rf), warmup=1, repeat=repeat, max_seconds=120.0)
    joules = None
    if handle is not None and energy is not None:
        joules = (pynvml.nvmlDeviceGetTotalEnergyConsumption(handle) - energy) / 1e3 / len(timing.samples)
    result.update(samples=timing.samples, images=images, input_bytes=int(rf.nbytes),
                  peak_rss_mib=harness.peak_rss_mib(), joules=joules)
    print(json.dumps(result))


def run_child(pipeline, engine, repeat, validate_it=False):
    cmd = [sys.executable, __file__, "--child", pipeline, engine, "--repeat", str(repeat)] + (
        ["--validate"] if validate_it else [])
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"{pipeline} / {engine} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4.5))
    engines = sorted({e for _, e in rows}, key=lambda e: (ENGINES + GPU_ENGINES).index(e))
    width = 0.8 / len(engines)
    for k, engine in enumerate(engines):
        values = [rows[(p, engine)]["median_ms"] for p in PIPELINES]
        bars = ax.bar(np.arange(len(PIPELINES)) + (k - (len(engines) - 1) / 2) * width, values, width, label=engine)
        ax.bar_label(bars, labels=[f"{v:.0f}" for v in values], fontsize=7, rotation=90, padding=2)
    ax.set_yscale("log")
    top = max(r["median_ms"] for r in rows.values())
    ax.set_ylim(top=top * 6)  # room for the labels and the legend
    ax.set_xticks(np.arange(len(PIPELINES)), PIPELINES)
    ax.set_ylabel("forward pass, median (ms, log scale)")
    ax.set_title("seed-002 table, PWI_disk (one 32-frame ensemble per pass), CPU (shared machine)")
    ax.legend(fontsize=8, ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--record", action="store_true")
    parser.add_argument("--plot", default=None)
    parser.add_argument("--engines", nargs="*", default=None,
                        help="default: the CPU engines, and the GPU ones this machine has")
    parser.add_argument("--pipelines", nargs="*", default=list(PIPELINES))
    parser.add_argument("--child", nargs=2, metavar=("PIPELINE", "ENGINE"))
    parser.add_argument("--validate", action="store_true")
    args = parser.parse_args()
    args.engines_given = args.engines is not None
    args.engines = list(ENGINES) if args.engines is None else args.engines
    if args.child:
        child(*args.child, args.repeat, args.validate)
        return
    import harness

    if not args.engines_given:
        args.engines += gpu_engines()
    checks = {}
    for pipeline in args.pipelines:
        for engine in args.engines:
            checks[(pipeline, engine)] = run_child(pipeline, engine, args.repeat, validate_it=True)
            print(f"validated {pipeline} / {engine}: {checks[(pipeline, engine)]['check']}", flush=True)
    samples = {key: [] for key in checks}
    info = {}
    for r in range(args.rounds):  # interleaved: every engine once per round
        for pipeline in args.pipelines:
            for engine in args.engines:
                res = run_child(pipeline, engine, args.repeat)
                samples[(pipeline, engine)] += res["samples"]
                peak = max(info.get((pipeline, engine), {}).get("peak_rss_mib", 0), res["peak_rss_mib"])
                info[(pipeline, engine)] = dict(res, peak_rss_mib=peak)
                print(f"round {r + 1}: {pipeline} / {engine}: {np.median(res['samples']) * 1e3:.1f} ms", flush=True)
    rows, table = {}, []
    for pipeline in args.pipelines:
        for engine in args.engines:
            s = np.array(samples[(pipeline, engine)])
            res = info[(pipeline, engine)]
            med, p95 = float(np.median(s)), float(np.percentile(s, 95))
            rows[(pipeline, engine)] = dict(median_ms=med * 1e3)
            note = "; ".join(x for x in (checks[(pipeline, engine)]["check"], res["note"]) if x)
            joules = "n/a (no NVML)" if res.get("joules") is None else f"{res['joules']:.3f}"
            table.append([pipeline, engine, f"{med * 1e3:.1f}", f"{p95 * 1e3:.1f}", f"{res['images'] / med:.1f}",
                          f"{res['input_bytes'] / med / 1e6:.1f}", joules, f"{res['peak_rss_mib']:.0f}",
                          f"{len(s)}", note])
        for engine in GPU_ENGINES:
            if engine not in args.engines:
                table.append([pipeline, engine, "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "0",
                              "no GPU / provider on this machine"])
    header = ["pipeline", "engine / formulation", "median ms", "p95 ms", "FPS", "input MB/s", "J/run",
              "peak RSS MiB", "passes", "check / note"]
    print(harness.markdown_table(header, table))
    if args.plot and set(args.pipelines) == set(PIPELINES):
        plot(rows, ROOT / args.plot)
    ran_gpu = [e for e in args.engines if e in GPU_ENGINES]
    gpu_note = ("ran: " + ", ".join(ran_gpu) + " (the others n/a: no such provider here)") if ran_gpu else \
        "no GPU or GPU provider on this machine"
    if args.record:
        notes = (f"Input: PWI_disk, one RF ensemble per forward pass: (32, 1, 128, 334) int16, 2.74 MB; grid 251 x 251 "
                 f"(0.1 mm), F/# auto (1.12), linear interpolation; Doppler: clutter 'poly' (order 2), lag 1, 5 x 5 "
                 f"Hamming smoothing; B-mode uint8 40 dB.  Threads: usbeam OpenMP and ORT intra-op = "
                 f"{os.environ.get('OMP_NUM_THREADS', 'all')}.  The machine was shared with other jobs while this ran: "
                 f"timings are noisy; engines were timed interleaved over {args.rounds} rounds, each in a fresh child "
                 f"process (peak RSS: that process, building included).  GPU rows: {gpu_note}.  Chart: "
                 f"{args.plot or 'not drawn'}.")
        harness.record(f"seed-002 table: pipeline x formulation x engine ({'CPU and GPU' if ran_gpu else 'CPU'})",
                       header, table, notes=notes)


if __name__ == "__main__":
    main()
