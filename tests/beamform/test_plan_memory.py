"""The large blocks of CPU plans (csrc/common/plan_memory.c): a destroyed plan's receive table
and staging buffer are kept for the next plan (up to 256 MiB in all) and given back by
usbeam.release_memory().  A plan built in reused memory must compute exactly what a plan built
in fresh memory computes, whatever the previous owner left there, from one thread or several."""
import gc
import threading

import numpy as np
import pytest

import usbeam
from usbeam import _core

FS, FC, N_SAMPLES = 20e6, 5e6, 1024


def make_plan(n_x, f_number=1.0, n_frames=2):
    probe = usbeam.LinearArray(64, 3e-4)
    grid = usbeam.Grid(x=np.linspace(-8e-3, 8e-3, n_x), z=np.linspace(5e-3, 35e-3, 160))
    return usbeam.Beamformer(probe, usbeam.PlaneWave(0.0), grid, fs=FS, fc=FC, n_samples=N_SAMPLES,
                             f_number=f_number, n_frames=n_frames)


def iq_data(rng, n_frames=2):
    shape = (n_frames, 64, N_SAMPLES)
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)


def test_destroyed_plan_memory_is_kept_and_released():
    usbeam.release_memory()
    assert _core.cached_memory() == 0
    bf = make_plan(128)
    assert bf.table_bytes() > 2 << 20  # a block the cache keeps (1 MiB or more)
    del bf
    gc.collect()
    kept = _core.cached_memory()
    assert kept >= 2 << 20 and kept <= 256 << 20
    assert usbeam.release_memory() == kept
    assert _core.cached_memory() == 0 and usbeam.release_memory() == 0


def test_plan_in_reused_memory_computes_what_a_fresh_plan_computes(rng):
    data = iq_data(rng)
    usbeam.release_memory()
    want = make_plan(100)(data)  # fresh memory
    # other plans of other sizes and f-numbers fill blocks with their own tables, then let go
    for n_x, f_number in ((140, 0.8), (90, 2.0), (100, 1.4)):
        make_plan(n_x, f_number)(data)
    gc.collect()
    assert _core.cached_memory() > 0
    got = make_plan(100)(data)  # in the blocks they left
    np.testing.assert_array_equal(got, want)
    usbeam.release_memory()


def test_plans_built_and_destroyed_on_several_threads(rng):
    """Plans created and dropped at once on four threads (the GIL is released while a plan is
    built), reusing one another's blocks: each thread's images equal a single-threaded run."""
    data = iq_data(rng)
    sizes = (80, 100, 120, 140)
    want = {n_x: make_plan(n_x)(data) for n_x in sizes}
    errors = []

    def work(n_x):
        try:
            for _ in range(6):
                np.testing.assert_array_equal(make_plan(n_x)(data), want[n_x])
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n_x,)) for n_x in sizes]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    if errors:
        raise errors[0]
    usbeam.release_memory()


@pytest.mark.parametrize("bad", [None, 1.5])
def test_release_memory_takes_no_arguments(bad):
    with pytest.raises(TypeError):
        usbeam.release_memory(bad)
