"""`make demo`: the main job end to end on the CPU with no outside data.

The project's own simulated phantom (speckle, an anechoic cyst and bright point targets)
is imaged by a 128-element 5 MHz linear array with three steered plane waves; the RF
(int16, as a scanner delivers it) goes RF -> IQ -> DAS (coherent compounding) -> B-mode
through a usbeam.Pipeline.  Writes a PNG of the image and prints the per-stage times.

    python -m usbeam.demo [--out demo_bmode.png] [--repeat 10]
"""
import argparse
import time

import numpy as np

import usbeam


def simulate_acquisition(seed=1):
    probe = usbeam.LinearArray(n_elements=128, pitch=0.3e-3, width=0.27e-3, bandwidth=0.6)
    sequence = usbeam.plane_wave_sequence(np.deg2rad([-8.0, 0.0, 8.0]))
    fs, fc, c, t0 = 20e6, 5e6, 1540.0, 0.0
    n_samples = 1024  # 1024 / 20 MHz = 51 us: echoes down to ~39 mm
    positions, amplitudes = usbeam.simulate.cyst_phantom(
        x_range=(-12e-3, 12e-3), z_range=(8e-3, 36e-3), n_scatterers=5000,
        cyst_center=(0.0, 22e-3), cyst_radius=4e-3,
        points=((-6e-3, 12e-3), (0.0, 12e-3), (6e-3, 12e-3), (-6e-3, 32e-3), (6e-3, 32e-3)),
        point_amplitude=30.0, seed=seed)
    rf = usbeam.simulate.simulate_rf(positions, amplitudes, probe, sequence, fs=fs, fc=fc, c=c, t0=t0,
                                     n_samples=n_samples, n_frames=1, noise=0.01, seed=seed)
    # Quantise to int16 as a scanner's ADC would, using most of its range.
    rf_int16 = np.round(rf * (20000.0 / np.abs(rf).max())).astype(np.int16)
    return probe, sequence, dict(fs=fs, fc=fc, c=c, t0=t0, n_samples=n_samples), rf_int16


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="demo_bmode.png", help="PNG file to write")
    parser.add_argument("--repeat", type=int, default=10, help="timed pipeline runs")
    args = parser.parse_args(argv)

    t = time.perf_counter()
    probe, sequence, acq, rf = simulate_acquisition()
    t_sim = time.perf_counter() - t
    grid = usbeam.Grid(x=np.linspace(-12e-3, 12e-3, 241), z=np.linspace(8e-3, 36e-3, 281))

    t = time.perf_counter()
    pipeline = usbeam.Pipeline(probe, sequence, grid, **acq, n_frames=1, rf_dtype=np.int16,
                               f_number=1.5, window="hann", interpolation="linear", dynamic_range=50.0)
    t_plan = time.perf_counter() - t

    image = pipeline(rf)  # warm-up
    per_stage = {stage: [] for stage in pipeline.STAGES}
    totals = []
    for _ in range(max(1, args.repeat)):
        t = time.perf_counter()
        image = pipeline(rf, out=image)
        totals.append(time.perf_counter() - t)
        for stage, seconds in pipeline.timings.items():
            per_stage[stage].append(seconds)

    _write_png(args.out, image[0], grid)

    n_points = grid.n_points
    print(f"usbeam demo: simulated cyst phantom, {probe.n_elements} elements, {len(sequence)} plane waves, "
          f"{acq['n_samples']} samples, int16 RF -> {grid.shape[0]}x{grid.shape[1]} B-mode")
    print(f"backend cpu, {usbeam.build_info()['cpu_threads']} OpenMP threads; "
          f"simulation {t_sim:.2f} s, plan creation {t_plan * 1e3:.1f} ms")
    print()
    print(f"{'stage':<10}{'median ms':>12}{'p95 ms':>10}")
    for stage, samples in per_stage.items():
        print(f"{stage:<10}{np.median(samples) * 1e3:>12.2f}{np.percentile(samples, 95) * 1e3:>10.2f}")
    print(f"{'total':<10}{np.median(totals) * 1e3:>12.2f}{np.percentile(totals, 95) * 1e3:>10.2f}")
    das_s = np.median(per_stage["das"])
    print(f"\nDAS: {n_points * probe.n_elements * len(sequence) / das_s:.3g} points/s "
          f"(pixels x elements x transmits per second)")
    print(f"wrote {args.out}")
    return 0


def _write_png(path, image, grid):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x_mm, z_mm = grid.x * 1e3, grid.z * 1e3
    fig, ax = plt.subplots(figsize=(5, 5.6), dpi=120)
    ax.imshow(image, cmap="gray", vmin=0, vmax=255, aspect="equal",
              extent=(x_mm[0], x_mm[-1], z_mm[-1], z_mm[0]))
    ax.set_xlabel("x (mm)")
    ax.set_ylabel("z (mm)")
    ax.set_title("usbeam: simulated cyst phantom, 3 plane waves")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
