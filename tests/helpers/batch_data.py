"""Small recordings and recipes for the usbeam.batch tests (tests/batch/): a 16-element linear
array imaging a few point targets, static tissue plus slowly moving blood for Doppler, and
an 8 x 8 row-column array.  Frames differ from each other (motion and noise), so a chunk
written in the wrong place shows."""
import numpy as np

import usbeam

FS, FC, C = 20e6, 5e6, 1540.0
N_SAMPLES = 256
PRF = 2000.0


def probe():
    return usbeam.LinearArray(16, 3e-4, fc=FC, bandwidth=0.6)


def grid(nx=12, nz=16):
    return usbeam.Grid(x=np.linspace(-2e-3, 2e-3, nx), z=np.linspace(4e-3, 9e-3, nz))


def linear_frames(n_frames, seed, *, blood=True):
    """int16 RF (n_frames, 1, 16, N_SAMPLES): static tissue scatterers, blood scatterers moving
    axially at 0.05 m/s (40 dB weaker), white noise."""
    rng = np.random.default_rng(seed)
    tissue = np.column_stack([rng.uniform(-2e-3, 2e-3, 12), np.zeros(12), rng.uniform(4.5e-3, 8.5e-3, 12)])
    n_blood = 12 if blood else 0
    blood0 = np.column_stack([rng.uniform(-1e-3, 1e-3, n_blood), np.zeros(n_blood),
                              rng.uniform(5e-3, 8e-3, n_blood)])
    t = np.arange(n_frames) / PRF
    positions = np.concatenate([np.broadcast_to(tissue, (n_frames, 12, 3)),
                                blood0[None] + t[:, None, None] * np.array([0.0, 0.0, 0.05])], axis=1)
    amplitudes = np.concatenate([np.ones(12), np.full(n_blood, 0.01)])
    rf = usbeam.simulate_rf(positions, amplitudes, probe(), usbeam.PlaneWave(0.0), fs=FS, fc=FC,
                            n_samples=N_SAMPLES, c=C, t0=0.0)
    rf = rf / np.abs(rf).max() * 12000 + rng.standard_normal(rf.shape) * 20
    return np.round(rf).astype(np.int16)


def bmode_recipe(frames_per_call=4, **options):
    from usbeam.batch import Recipe
    return Recipe.bmode(probe(), usbeam.PlaneWave(0.0), grid(), n_samples=N_SAMPLES, fs=FS, fc=FC, c=C,
                        frames_per_call=frames_per_call, output=options.pop("output", "db"),
                        dynamic_range=50.0, **options)


def bmode_pipeline(n_frames, **options):
    return usbeam.Pipeline(probe(), usbeam.PlaneWave(0.0), grid(), fs=FS, fc=FC, c=C, n_samples=N_SAMPLES,
                           n_frames=n_frames, bmode_output="db", normalize="frame", dynamic_range=50.0, **options)


def bmode_record(rf, frames_per_call=4):
    """The whole record through one Pipeline of bmode_recipe's frames per call, call after call, in
    memory: what a chunked run must equal bit for bit.  (One call over the whole record agrees
    to float32 rounding: on AVX-512 a plan of a few frames (IQ up to 5; RF up to 12) sums each
    frame as a 1-frame plan does, das_lanes.c, in another order than das.c's kernels for more
    frames; docs/batch.md.)"""
    pipe = bmode_pipeline(frames_per_call)
    return np.concatenate([pipe(rf[k:k + frames_per_call]) for k in range(0, rf.shape[0], frames_per_call)])


DOPPLER = dict(n_frames=8, n_samples=N_SAMPLES, fs=FS, fc=FC, prf=PRF, c=C)


def doppler_recipe(clutter="svd", clutter_options=None, nx=12, nz=16, **options):
    from usbeam.batch import Recipe
    return Recipe.doppler(probe(), usbeam.PlaneWave(0.0), grid(nx, nz), clutter=clutter,
                          clutter_options=clutter_options, **DOPPLER, **options)


def doppler_pipeline(clutter="svd", clutter_options=None, nx=12, nz=16, **options):
    options.pop("warmup", None)
    options.pop("iir_tolerance", None)
    return usbeam.DopplerPipeline(probe(), usbeam.PlaneWave(0.0), grid(nx, nz), clutter=clutter,
                                  clutter_options=clutter_options, **DOPPLER, **options)


def doppler_whole_record(rf, clutter="svd", clutter_options=None, **options):
    """The whole record through one DopplerPipeline, ensemble after ensemble, in memory."""
    pipe = doppler_pipeline(clutter, clutter_options, **options)
    n = DOPPLER["n_frames"]
    maps = [pipe(rf[k:k + n]) for k in range(0, rf.shape[0] // n * n, n)]
    return {name: np.stack([getattr(m, name) for m in maps]) for name in ("velocity", "variance", "power")
            if getattr(maps[0], name) is not None}


# ---- row-column array -------------------------------------------------------------------

RCA_SAMPLES = 192


def rca_array():
    return usbeam.RowColumnArray(8, 8, 3e-4, fc=FC, bandwidth=0.6)


def rca_grid():
    return usbeam.RCAGrid.volume(np.linspace(-1e-3, 1e-3, 5), np.linspace(-1e-3, 1e-3, 4),
                                 np.linspace(3e-3, 6e-3, 8))


def rca_frames(n_frames, seed):
    """float32 RF (n_frames, 8, 8, RCA_SAMPLES): FORCES acquisitions of point targets, each
    frame scaled and with its own noise."""
    rng = np.random.default_rng(seed)
    points = np.array([[0.0, 0.0, 4.5e-3], [5e-4, -5e-4, 5.2e-3]])
    base = usbeam.simulate_rca(points, np.ones(2), rca_array(), "forces", fs=FS, fc=FC, n_samples=RCA_SAMPLES, c=C)
    gains = rng.uniform(0.5, 1.5, n_frames)
    noise = rng.standard_normal((n_frames,) + base.shape) * 0.01 * np.abs(base).max()
    return (gains[:, None, None, None] * base[None] + noise).astype(np.float32)


def rca_recipe(frames_per_call=4):
    from usbeam.batch import Recipe
    return Recipe.rca(rca_array(), "forces", rca_grid(), n_samples=RCA_SAMPLES, fs=FS, c=C,
                      frames_per_call=frames_per_call)


def rca_beamformer(n_frames):
    return usbeam.RCABeamformer(rca_array(), "forces", rca_grid(), n_samples=RCA_SAMPLES, fs=FS, c=C,
                                n_frames=n_frames)

