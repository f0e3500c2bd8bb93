"""Benchmark of RF -> IQ demodulation (usbeam.rf2iq, CPU backend) against PyMUST rf2iq.

Cases: PWI_disk (32 frames x 128 elements x 334 int16 samples, undersampled band-pass RF,
the MUST pipeline) and a larger synthetic acquisition (16 x 128 x 2048 int16) with each
filter kind and with decimation.  Every case is validated against PyMUST or the float64
reference before it is timed.  Run: .venv/bin/python benchmarks/bench_demod.py [--no-record]
"""
import argparse
import os
import sys
from pathlib import Path

import numpy as np
import scipy.signal

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [os.environ.get("USBEAM_IMPORT_ROOT", str(ROOT)), str(ROOT / "tests"), str(ROOT / "benchmarks")]

import usbeam  # noqa: E402
from harness import machine, measure, record, validated  # noqa: E402
from reference import rf2iq as ref  # noqa: E402


def relative_error(got, want):
    return float(np.max(np.abs(got - want)) / np.max(np.abs(want)))


def pwi_disk():
    import scipy.io

    for folder in (ROOT.parent / "shared" / "datasets", Path("/work/shared/datasets")):
        path = folder / "PWI_disk.mat"
        if path.exists():
            data = scipy.io.loadmat(path)
            param = data["param"][0, 0]
            prm = {k: float(np.asarray(param[k]).ravel()[0].ravel()[0]) for k in ("fs", "fc", "t0", "bandwidth")}
            return data["RF"], prm
    return None, None


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--no-record", action="store_true", help="print only, do not append to RESULTS.md")
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    rows = []
    rng = np.random.default_rng()

    rf_matlab, prm = pwi_disk()
    if rf_matlab is not None:
        import pymust

        param = pymust.utils.Param()
        for key, value in prm.items():
            setattr(param, key, value)
        rf_float = rf_matlab.astype(np.float64)
        want = pymust.rf2iq(rf_float, param).T
        rf = rf_matlab.T
        plan = usbeam.RF2IQPlan(rf.shape, rf.dtype, fs=prm["fs"], fc=prm["fc"], t0=prm["t0"],
                                bandwidth=prm["bandwidth"] / 100)
        out = np.empty(plan.out_shape, np.complex64)
        validated("PWI_disk", plan(rf, out=out), lambda got: relative_error(got, want) < 1e-6)
        t_usbeam = measure(lambda: plan(rf, out=out), repeat=args.repeat)
        t_pymust = measure(lambda: pymust.rf2iq(rf_float, param), repeat=max(3, args.repeat // 4), warmup=1)
        samples = rf.size
        rows.append(["PWI_disk 32x128x334 int16, butter 5 (MUST)", f"{t_usbeam.median * 1e3:.2f}",
                     f"{t_usbeam.p95 * 1e3:.2f}", f"{samples / t_usbeam.median / 1e6:.0f}",
                     f"{t_pymust.median * 1e3:.1f} (PyMUST)", f"{t_pymust.median / t_usbeam.median:.1f}x"])

    shape, fs, fc = (16, 128, 2048), 20e6, 5e6
    rf = rng.integers(-8000, 8000, shape).astype(np.int16)
    cases = [("butter 5, bandwidth 0.6", dict(bandwidth=0.6)),
             ("butter 5, bandwidth 0.6, decimation 4", dict(bandwidth=0.6, decimation=4)),
             ("kaiser 60 dB (31 taps)", dict(filter="kaiser")),
             ("kaiser 60 dB (31 taps), decimation 4", dict(filter="kaiser", decimation=4)),
             ("complex taps (64, chirp)", dict(filter=np.exp(1j * np.linspace(0, 40, 64)) / 64))]
    check_lines = rf[:1, :4]  # the float64 reference is slow: validate a few lines
    for name, kwargs in cases:
        plan = usbeam.RF2IQPlan(shape, rf.dtype, fs=fs, fc=fc, **kwargs)
        out = np.empty(plan.out_shape, np.complex64)
        plan(rf, out=out)
        D = plan.decimation
        if plan.filter == "butter":
            want = ref.rf2iq_butter(check_lines, fs, fc, 0.0, plan.wn, 5, D)
        else:
            want = ref.rf2iq_fir(check_lines, fs, fc, plan.taps, 0.0, D)
        validated(name, out[:1, :4], lambda got: relative_error(got, want) < 1e-6)
        timing = measure(lambda: plan(rf, out=out), repeat=args.repeat)
        if plan.filter == "butter":  # what PyMUST does: scipy filtfilt in float64
            base = measure(lambda: ref.rf2iq_butter(rf, fs, fc, 0.0, plan.wn, 5, D), repeat=3, warmup=1)
            name_base = "scipy filtfilt"
        else:  # scipy overlap-add convolution of the float64 baseband, then the kept samples
            taps = plan.taps
            base = measure(lambda: scipy.signal.oaconvolve(ref.mix(rf, fs, fc, 0.0), taps[None, None, :],
                                                           axes=-1)[..., (len(taps) - 1) // 2::D],
                           repeat=3, warmup=1)
            name_base = "scipy oaconvolve"
        baseline = f"{base.median * 1e3:.1f} ({name_base})"
        speedup = f"{base.median / timing.median:.1f}x"
        rows.append([f"16x128x2048 int16, {name}", f"{timing.median * 1e3:.2f}", f"{timing.p95 * 1e3:.2f}",
                     f"{rf.size / timing.median / 1e6:.0f}", baseline, speedup])

    header = ["case", "median ms", "p95 ms", "Msamples/s (input)", "baseline ms", "speed-up"]
    if args.no_record:
        print(f"Machine: {machine()}")
        for row in rows:
            print(" | ".join(row))
    else:
        record("rf2iq (CPU)", header, rows,
               notes="usbeam.RF2IQPlan call with a preallocated out; PyMUST = pymust.rf2iq on float64 RF.")


if __name__ == "__main__":
    main()
