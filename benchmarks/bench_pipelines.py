"""End-to-end pipelines RF2IQ_DAS_BMODE, RF2IQ_DAS_DOPPLER and RF2IQ_DAS_POWERDOPPLER.

The three pipelines of the end-to-end methodology for CNN-expressed ultrasound signal
processing: one forward pass takes one ensemble of raw RF channel data (int16, as a scanner
delivers it) and returns images:
  RF2IQ_DAS_BMODE         rf2iq -> DAS (transmits compounded) -> B-mode uint8 of every frame
  RF2IQ_DAS_DOPPLER       rf2iq -> DAS -> SVD clutter filter -> Kasai velocity (+ variance)
  RF2IQ_DAS_POWERDOPPLER  rf2iq -> DAS -> SVD clutter filter -> power Doppler (dB)
Reported per pipeline: forward-pass time (median and p95, ms), FPS (output images per
second: n_frames B-mode images or one Doppler map per forward pass), sustained input MB/s
(RF bytes per forward pass / median time), and peak memory (peak RSS of a fresh process that
builds the plans and runs the passes, MiB).  Plans are built once, outside the timing.

Configurations:
  pwi_disk  the real recording PWI_disk.mat: 128 elements, 334 samples, 1 plane wave,
            32-frame ensemble, PRF 10 kHz; grid 10-35 mm x +-12.5 mm at 0.1 mm (251 x 251).
  large     the standard larger configuration: 128 elements (pitch 0.3 mm), 1024 samples at
            fs = 20 MHz (fc 5 MHz), 3 plane waves (-5, 0, +5 degrees), 64-frame ensemble,
            256 x 256 grid (x +-19 mm, z 5-38 mm); RF from the project's simulator (moving
            scatterers), so the Doppler maps are meaningful.
PyMUST's Doppler path runs in the same process kind for comparison: pymust.rf2iq, the
dasmtx matrix (built once, like a plan) applied per transmit and summed, slow-time mean
subtraction in NumPy (pymust.wfilt.wfilt in 0.1.9 raises AttributeError on any ndarray:
it reads SIG.ndims), pymust.iq2doppler; and
its B-mode path (pymust.bmode).  PyMUST has no power Doppler.

Each measurement runs in a child process (for its own peak RSS); results are validated before
timing (usbeam's Doppler maps against the float64 reference kernels applied to usbeam's own
beamformed IQ; usbeam against PyMUST on PWI_disk).

Usage: python benchmarks/bench_pipelines.py [--config pwi_disk large] [--repeat N]
           [--no-pymust] [--record]
       python benchmarks/bench_pipelines.py --kernels [--record]
           the Doppler kernels alone on beamformed-size ensembles (32 x 251 x 251 and
           64 x 256 x 256 complex64), with PyMUST iq2doppler on the same data
"""
import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

PIPELINES = ("RF2IQ_DAS_BMODE", "RF2IQ_DAS_DOPPLER", "RF2IQ_DAS_POWERDOPPLER")


# ---- configurations --------------------------------------------------------------------------

def pwi_disk_config():
    import usbeam

    rec = usbeam.load_must(usbeam.datasets.locate("PWI_disk.mat"))
    rf = np.ascontiguousarray(rec.data[:, None])              # (32, 1, 128, 334) int16
    grid = usbeam.Grid(x=np.arange(-12.5e-3, 12.5e-3 + 1e-9, 1e-4), z=np.arange(10e-3, 35e-3 + 1e-9, 1e-4))
    return dict(name="pwi_disk", rf=rf, probe=rec.probe, sequence=rec.sequence, grid=grid, fs=rec.fs, fc=rec.fc,
                c=rec.c, t0=rec.t0, prf=rec.prf, bandwidth=rec.bandwidth, f_number="auto", recording=rec)


def large_config(seed=0):
    import tempfile

    import usbeam

    n_frames, n_samples, fs, fc, c = 64, 1024, 20e6, 5e6, 1540.0
    probe = usbeam.LinearArray(n_elements=128, pitch=3e-4, width=2.7e-4, fc=fc, bandwidth=0.6)
    sequence = usbeam.plane_wave_sequence(np.deg2rad([-5.0, 0.0, 5.0]))
    prf = 3000.0  # compounded-frame rate (9 kHz pulse rate / 3 angles)
    rng = np.random.default_rng(seed)
    # a vessel of scatterers moving axially at 0.4 VN through static tissue 20 dB brighter
    vn = c * prf / (4 * fc)
    n_blood, n_tissue = 150, 150
    blood = np.column_stack([rng.uniform(-15e-3, 15e-3, n_blood), np.zeros(n_blood), rng.uniform(18e-3, 24e-3, n_blood)])
    tissue = np.column_stack([rng.uniform(-19e-3, 19e-3, n_tissue), np.zeros(n_tissue), rng.uniform(5e-3, 38e-3, n_tissue)])
    frames = np.arange(n_frames)[:, None, None]
    moving = blood[None] + frames * np.array([0.0, 0.0, -0.4 * vn / prf])   # toward the probe
    positions = np.concatenate([moving, np.broadcast_to(tissue, (n_frames,) + tissue.shape)], axis=1)
    amplitudes = np.concatenate([rng.standard_normal(n_blood), 10 * rng.standard_normal(n_tissue)])
    cache = Path(tempfile.gettempdir()) / f"usbeam_bench_large_rf_{seed}.npy"  # the simulation takes a while
    if cache.exists():
        rf = np.load(cache)
    else:
        rf = usbeam.simulate_rf(positions, amplitudes, probe, sequence, fs=fs, fc=fc, c=c, n_samples=n_samples,
                                noise=0.01, seed=seed)
        rf = np.round(rf * (20000.0 / np.abs(rf).max())).astype(np.int16)   # (64, 3, 128, 1024) int16
        np.save(cache, rf)
    grid = usbeam.Grid(x=np.linspace(-19e-3, 19e-3, 256), z=np.linspace(5e-3, 38e-3, 256))
    return dict(name="large", rf=rf, probe=probe, sequence=sequence, grid=grid, fs=fs, fc=fc, c=c, t0=0.0,
                prf=prf, bandwidth=0.6, f_number=1.5, true_velocity=0.4 * vn)


CONFIGS = {"pwi_disk": pwi_disk_config, "large": large_config}


# ---- usbeam pipelines ---------------------------------------------------------------------------

def usbeam_pipeline(pipeline, cfg):
    import usbeam

    rf = cfg["rf"]
    n_frames = rf.shape[0]
    common = dict(fs=cfg["fs"], fc=cfg["fc"], c=cfg["c"], t0=cfg["t0"])
    bandwidth = cfg["bandwidth"] if np.isfinite(cfg["bandwidth"]) else None
    if pipeline == "RF2IQ_DAS_BMODE":
        from usbeam import Pipeline

        pipe = Pipeline(cfg["probe"], cfg["sequence"], cfg["grid"], n_samples=rf.shape[-1], n_frames=n_frames,
                               rf_dtype=rf.dtype, bandwidth=bandwidth, f_number=cfg["f_number"],
                               interpolation="linear", dynamic_range=40.0, **common)
        out = np.empty(pipe.output_shape, pipe.output_dtype)

        def run(data):
            return pipe(data, out=out)
        return run, n_frames, dict(pipeline=pipe)
    outputs = ("color",) if pipeline == "RF2IQ_DAS_DOPPLER" else ("power",)
    pipe = usbeam.DopplerPipeline(cfg["probe"], cfg["sequence"], cfg["grid"], n_frames=n_frames,
                                  n_samples=rf.shape[-1], prf=cfg["prf"], rf_dtype=rf.dtype, bandwidth=bandwidth,
                                  f_number=cfg["f_number"], clutter=cfg.get("clutter", "svd"),
                                  clutter_options=cfg.get("clutter_options", {"low": 1}), outputs=outputs,
                                  **common)

    def run_doppler(data):
        return pipe(data)
    return run_doppler, 1, dict(pipeline=pipe)


def validate_usbeam(pipeline, cfg, result, extra):
    """Raise AssertionError when a pipeline's output is wrong (checked before timing)."""
    from reference import doppler as ref

    if pipeline == "RF2IQ_DAS_BMODE":
        assert result.dtype == np.uint8 and result.max() == 255
        return "uint8 range"
    pipe = extra["pipeline"]
    beamformed = pipe._beamformed
    filtered = ref.svd_filter(beamformed, 1)
    if pipeline == "RF2IQ_DAS_DOPPLER":
        want, _ = ref.kasai(filtered, cfg["fc"], cfg["prf"], cfg["c"])
        vn = pipe.nyquist_velocity
        diff = (result.velocity - want + vn) % (2 * vn) - vn
        assert np.median(np.abs(diff)) < 1e-3 * vn, "velocity differs from the float64 reference"
        note = f"velocity vs float64 reference: median abs diff {np.median(np.abs(diff)) / vn:.1e} VN"
        if "true_velocity" in cfg:
            power = ref.power(filtered)
            vessel = power > np.percentile(power, 97)
            est = float(np.median(result.velocity[vessel]))
            note += f"; vessel velocity {est:.4f} m/s (true {cfg['true_velocity']:.4f})"
        return note
    want = ref.power(filtered, db=True)
    assert np.abs(result.power - want).max() < 1e-3, "power differs from the float64 reference"
    return "power vs float64 reference"


# ---- PyMUST paths -----------------------------------------------------------------------------

def pymust_param(cfg, tx):
    import pymust

    probe = cfg["probe"]
    param = pymust.utils.Param()
    param.fs, param.fc, param.c = cfg["fs"], cfg["fc"], cfg["c"]
    param.t0 = float(cfg["t0"])   # rf2iq wants a scalar; dasmtx an array (see pymust_pipeline)
    param.pitch, param.width, param.Nelements = probe.pitch, probe.width, probe.n_elements
    param.PRF = cfg["prf"]
    if np.isfinite(cfg["bandwidth"]):
        param.bandwidth = cfg["bandwidth"] * 100
    if cfg["name"] == "pwi_disk":
        param.TXdelay = np.asarray(cfg["recording"].param["TXdelay"], dtype=np.float64).ravel()
        param.fnumber = None
    else:
        param.TXdelay = pymust.txdelay(param, tx.angle)
        param.fnumber = cfg["f_number"]
    return param


def pymust_pipeline(pipeline, cfg):
    import pymust

    rf = cfg["rf"]
    n_frames, n_tx = rf.shape[:2]
    xi, zi = np.meshgrid(cfg["grid"].x, cfg["grid"].z)
    params = [pymust_param(cfg, tx) for tx in cfg["sequence"]]
    n_samples = rf.shape[-1]
    matrices = []
    for p in params:
        p.t0 = np.array(p.t0)
        matrices.append(pymust.dasmtx(1j * np.array((n_samples, rf.shape[2])), xi, zi, p, "linear"))
        p.t0 = float(p.t0)

    def beamform(data):
        image = 0
        for k in range(n_tx):
            sig = np.transpose(data[:, k], (2, 1, 0)).astype(np.float64)       # (samples, elements, frames)
            iq = pymust.rf2iq(sig, params[k])
            image = image + (matrices[k] @ iq.reshape(-1, n_frames, order="F")).reshape(
                xi.shape + (n_frames,), order="F")
        return image

    if pipeline == "RF2IQ_DAS_BMODE":
        def run(data):
            return pymust.bmode(beamform(data), 40)
        return run, n_frames, {}

    def run_doppler(data):
        image = beamform(data)
        image = image - image.mean(axis=2, keepdims=True)
        return pymust.iq2doppler(image, params[0])
    return run_doppler, 1, {}


# ---- measurement in a child process -------------------------------------------------------------

def child(mode, pipeline, config, impl, repeat):
    """mode 'validate': run once and check the answer (prints a note); mode 'time': build the
    plans, time the passes and report the peak RSS of this process (validation is kept out of
    it so that the reference computations do not count)."""
    import harness

    cfg = CONFIGS[config]()
    rf = cfg["rf"]
    build = pymust_pipeline if impl == "pymust" else usbeam_pipeline
    run, images, extra = build(pipeline, cfg)
    if mode == "validate":
        result = run(rf)
        if impl == "pymust":
            note = "no clutter filter in PyMUST: slow-time mean subtraction" if pipeline != "RF2IQ_DAS_BMODE" else ""
        else:
            note = validate_usbeam(pipeline, cfg, result, extra)
            if config == "pwi_disk" and pipeline == "RF2IQ_DAS_DOPPLER":
                note += "; " + compare_disk_with_pymust(cfg, result)
        print(json.dumps(dict(note=note)))
        return
    timing = harness.measure(lambda: run(rf), warmup=2, repeat=repeat, max_seconds=60.0)
    stages = dict(extra["pipeline"].timings) if "pipeline" in extra else {}
    print(json.dumps(dict(median=timing.median, p95=timing.p95, n=len(timing.samples), images=images,
                          input_bytes=int(rf.nbytes), peak_rss_mib=harness.peak_rss_mib(), stages=stages)))


def compare_disk_with_pymust(cfg, result):
    """usbeam's whole chain vs PyMUST's whole chain on PWI_disk: velocity agreement over the disk."""
    run, _, _ = pymust_pipeline("RF2IQ_DAS_DOPPLER", cfg)
    pv, _ = run(cfg["rf"])
    vn = cfg["c"] * cfg["prf"] / (4 * cfg["fc"])
    v = result.velocity
    strong = np.abs(pv) > 0.1 * vn
    diff = (v - pv + vn) % (2 * vn) - vn
    return f"vs PyMUST chain: median abs diff {np.median(np.abs(diff[strong])) / vn:.3f} VN over abs(v) > 0.1 VN"


def kernels(repeat, record):
    """Time each Doppler kernel on the two ensemble sizes (validated against the reference)."""
    import harness
    import pymust
    import usbeam
    from reference import doppler as ref

    fc, prf, c = 5e6, 4e3, 1540.0
    rows = []
    for shape in ((32, 251, 251), (64, 256, 256)):
        rng = np.random.default_rng(0)
        x = ((rng.standard_normal(shape) + 1j * rng.standard_normal(shape)) / np.sqrt(2)).astype(np.complex64)
        x += np.exp(1j * 0.6 * np.arange(shape[0]))[:, None, None].astype(np.complex64)
        mb = x.nbytes / 1e6
        small = x[:, :32, :32]
        cases = [
            ("clutter mean", usbeam.ClutterFilter(shape, "mean"), lambda y: ref.mean_filter(y)),
            ("clutter poly order 2", usbeam.ClutterFilter(shape, "poly", order=2), lambda y: ref.poly_filter(y, 2)),
            ("clutter SVD low=2", usbeam.ClutterFilter(shape, "svd", low=2), lambda y: ref.svd_filter(y, 2)),
            ("clutter SVD auto", usbeam.ClutterFilter(shape, "svd"),
             lambda y: ref.svd_filter(y, ref.svd_auto_low(y, 0.05))),
            ("clutter IIR order 4", usbeam.ClutterFilter(shape, "iir", order=4, cutoff=0.05),
             lambda y: ref.iir_filter(y, 4, 0.05, "projection")),
        ]
        for name, plan, check in cases:
            out = np.empty_like(x)
            # validate a plan of the same settings on a 32 x 32 corner against the float64 reference
            part = plan.__class__(small.shape, plan.method, **_clutter_kwargs(plan))(small)
            assert np.abs(part - check(small)).max() < 1e-5 * np.abs(small).max(), name
            if hasattr(plan, "reset"):
                plan.reset()
            t = harness.measure(lambda: plan(x, out=out), warmup=1, repeat=repeat)
            rows.append([name, "x".join(map(str, shape)), "usbeam", f"{t.median * 1e3:.1f}", f"{t.p95 * 1e3:.1f}",
                         f"{mb / t.median:.0f}"])
            print(rows[-1], flush=True)
        color = usbeam.ColorDopplerPlan(shape, fc=fc, prf=prf, c=c, average=5)
        v, var = color(x)
        rv, _ = ref.kasai(x, fc, prf, c, 1, 5, 5, "hamming")
        assert np.abs((v - rv + color.nyquist_velocity) % (2 * color.nyquist_velocity)
                      - color.nyquist_velocity).max() < 1e-5
        t = harness.measure(lambda: color(x), warmup=1, repeat=repeat)
        rows.append(["color Doppler (Kasai, 5x5 Hamming)", "x".join(map(str, shape)), "usbeam",
                     f"{t.median * 1e3:.1f}", f"{t.p95 * 1e3:.1f}", f"{mb / t.median:.0f}"])
        power = usbeam.PowerDopplerPlan(shape, db=True)
        t = harness.measure(lambda: power(x), warmup=1, repeat=repeat)
        rows.append(["power Doppler (dB)", "x".join(map(str, shape)), "usbeam", f"{t.median * 1e3:.1f}",
                     f"{t.p95 * 1e3:.1f}", f"{mb / t.median:.0f}"])
        param = pymust.utils.Param()
        param.fc, param.PRF, param.c = fc, prf, c
        pm_in = np.moveaxis(x, 0, -1)  # PyMUST layout (nz, nx, n_frames), a view
        t = harness.measure(lambda: pymust.iq2doppler(pm_in, param, 5), warmup=1, repeat=max(3, repeat // 3))
        rows.append(["color Doppler (iq2doppler, M=5)", "x".join(map(str, shape)), "PyMUST 0.1.9",
                     f"{t.median * 1e3:.1f}", f"{t.p95 * 1e3:.1f}", f"{mb / t.median:.0f}"])
        for r in rows[-3:]:
            print(r, flush=True)
    header = ["kernel", "ensemble (frames x nz x nx)", "impl", "median ms", "p95 ms", "input MB/s"]
    if record:
        harness.record("Doppler kernels, CPU", header, rows,
                       notes="complex64 ensembles (slow time first); PyMUST iq2doppler on the same data "
                             "(a view in its (nz, nx, n_frames) layout).")
    else:
        print(harness.markdown_table(header, rows))


def _clutter_kwargs(plan):
    if plan.method == "poly":
        return {"order": plan.order}
    if plan.method == "iir":
        return {"order": plan.order, "cutoff": plan.cutoff, "init": plan.init}
    if plan.method == "svd":
        return {"low": plan.low, "high": plan.high}
    return {}


def run_child(mode, pipeline, config, impl, repeat):
    cmd = [sys.executable, __file__, "--child", mode, pipeline, config, impl, "--repeat", str(repeat)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"{impl} {pipeline} {config} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", nargs="+", default=["pwi_disk", "large"], choices=list(CONFIGS))
    parser.add_argument("--pipeline", nargs="+", default=list(PIPELINES), choices=PIPELINES)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--no-pymust", action="store_true")
    parser.add_argument("--record", action="store_true", help="append the table to benchmarks/RESULTS.md")
    parser.add_argument("--child", nargs=4, metavar=("MODE", "PIPELINE", "CONFIG", "IMPL"))
    parser.add_argument("--kernels", action="store_true", help="time the Doppler kernels alone")
    args = parser.parse_args()
    if args.kernels:
        kernels(args.repeat, args.record)
        return
    if args.child:
        child(*args.child, args.repeat)
        return
    rows = []
    for config in args.config:
        for pipeline in args.pipeline:
            impls = ["usbeam"] + ([] if args.no_pymust or pipeline == "RF2IQ_DAS_POWERDOPPLER" else ["pymust"])
            for impl in impls:
                note = run_child("validate", pipeline, config, impl, args.repeat)["note"]
                r = run_child("time", pipeline, config, impl, args.repeat)
                if r["stages"]:
                    note += "; last pass: " + ", ".join(f"{k} {v * 1e3:.0f} ms" for k, v in r["stages"].items())
                ms = r["median"] * 1e3
                row = [pipeline, config, impl, f"{ms:.1f}", f"{r['p95'] * 1e3:.1f}",
                       f"{r['images'] / r['median']:.1f}", f"{r['input_bytes'] / r['median'] / 1e6:.1f}",
                       f"{r['peak_rss_mib']:.0f}", note]
                print(" | ".join(row), flush=True)
                rows.append(row)
    header = ["pipeline", "config", "impl", "median ms", "p95 ms", "FPS", "input MB/s", "peak RSS MiB",
              "validation / note"]
    if args.record:
        import harness

        harness.record("Doppler pipelines (RF2IQ_DAS_BMODE / DOPPLER / POWERDOPPLER), CPU", header, rows,
                       notes="One forward pass = one RF ensemble (int16) -> images; FPS = output images/s "
                             "(B-mode: every frame; Doppler: one map per ensemble). Peak RSS of a fresh "
                             "process per row. usbeam Doppler uses the SVD clutter filter (low=1); PyMUST "
                             "has no working clutter filter (mean subtraction instead) and no power Doppler.")


if __name__ == "__main__":
    main()
