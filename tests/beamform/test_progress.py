"""Progress bars of long Python-level work (issue 15): usbeam.simulate's simulate_rf and
simulate_rca show a tqdm bar over their transmits when asked (progress=True) that reaches the
total, print nothing with progress=False, and without tqdm (the optional `progress` extra)
silently show none."""
import sys

import numpy as np
import pytest

import usbeam

pytest.importorskip("tqdm")


def small_linear_case(n_frames=None):
    probe = usbeam.LinearArray(16, 0.3e-3, bandwidth=0.6)
    sequence = usbeam.plane_wave_sequence(np.deg2rad([-5.0, 0.0, 5.0, 10.0]))
    positions = np.array([[0.0, 0.0, 10e-3], [2e-3, 0.0, 15e-3]])
    return dict(positions=positions, amplitudes=np.ones(2), probe=probe, sequence=sequence, fs=20e6, fc=5e6,
                n_samples=600, n_frames=n_frames)


def test_simulate_rf_bar_reaches_the_total(capsys):
    case = small_linear_case(n_frames=2)
    quiet = usbeam.simulate_rf(**case, progress=False)
    assert capsys.readouterr().err == ""
    shown = usbeam.simulate_rf(**case, progress=True)
    err = capsys.readouterr().err
    assert "simulate_rf" in err and "4/4" in err and "100%" in err  # static scatterers: one frame's transmits
    np.testing.assert_array_equal(shown, quiet)  # the bar changes nothing


def test_simulate_rf_moving_scatterers_count_every_frame(capsys):
    case = small_linear_case()
    case["positions"] = np.stack([case["positions"] + [0, 0, 1e-4 * f] for f in range(3)])
    usbeam.simulate_rf(**case, progress=True)
    assert "12/12" in capsys.readouterr().err


def test_simulate_rca_bar_reaches_the_total(capsys):
    array = usbeam.RowColumnArray(8, 8, 0.3e-3, 0.3e-3)
    kwargs = dict(positions=np.array([[0.0, 0.0, 5e-3]]), amplitudes=np.ones(1), array=array, method="forces",
                  fs=20e6, fc=5e6, n_samples=400)
    quiet = usbeam.simulate_rca(**kwargs, progress=False)
    assert capsys.readouterr().err == ""
    shown = usbeam.simulate_rca(**kwargs, progress=True)
    err = capsys.readouterr().err
    assert "simulate_rca" in err and "8/8" in err and "100%" in err
    np.testing.assert_array_equal(shown, quiet)


def test_default_prints_nothing_when_stderr_is_not_a_terminal(capsys):
    usbeam.simulate_rf(**small_linear_case())  # pytest's captured stderr is no terminal
    assert capsys.readouterr().err == ""


def test_without_tqdm_there_is_no_bar(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)  # import tqdm now raises ImportError
    usbeam.simulate_rf(**small_linear_case(), progress=True)
    assert capsys.readouterr().err == ""


def test_progress_must_be_a_bool_or_none():
    with pytest.raises(TypeError, match="progress"):
        usbeam.simulate_rf(**small_linear_case(), progress="yes")
