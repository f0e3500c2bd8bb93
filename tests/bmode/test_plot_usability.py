"""usbeam.plot (issue 15): what is drawn, read back from the matplotlib artists (Agg backend):
the image extent in mm, the grey and Doppler colour maps and their limits, the Doppler mask,
the timing bars' count and values."""
import subprocess
import sys

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import usbeam  # noqa: E402
from usbeam import plot  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


GRID = usbeam.Grid(x=np.linspace(-12.5e-3, 12.5e-3, 251), z=np.linspace(10e-3, 35e-3, 126))


def test_extent_centres_pixels_on_grid_points():
    left, right, bottom, top = plot.extent(GRID)
    # 0.1 mm steps in x, 0.2 mm in z: half a pixel beyond the outer points, depth downwards
    assert left == pytest.approx(-12.55) and right == pytest.approx(12.55)
    assert top == pytest.approx(9.9) and bottom == pytest.approx(35.1)
    image = np.zeros(GRID.shape, np.uint8)
    image[63, 200] = 255                                           # one bright pixel
    fig, ax = plt.subplots()
    artist = plot.show_bmode(image, GRID, ax=ax)
    assert artist.get_extent() == pytest.approx([-12.55, 12.55, 35.1, 9.9])
    # the pixel's centre in data coordinates is the grid point (x[200], z[63]) in mm
    x0, x1, z1, z0 = artist.get_extent()
    col_centre = x0 + (200 + 0.5) * (x1 - x0) / GRID.shape[1]
    row_centre = z0 + (63 + 0.5) * (z1 - z0) / GRID.shape[0]
    assert col_centre == pytest.approx(GRID.x[200] * 1e3) and row_centre == pytest.approx(GRID.z[63] * 1e3)
    assert ax.get_xlabel() == "x (mm)" and ax.get_ylabel() == "z (mm)"
    with pytest.raises(ValueError, match="2-D"):
        plot.extent(usbeam.Grid.points([[0.0, 0.0, 1e-2]]))


def test_show_bmode_limits_per_input_kind():
    fig, ax = plt.subplots()
    grey = plot.show_bmode(np.full(GRID.shape, 7, np.uint8), GRID, ax=ax)
    assert grey.get_cmap().name == "gray" and grey.get_clim() == (0, 255)
    iq = np.ones(GRID.shape, np.complex64)
    iq[0, 0] = 10.0                                                 # 20 dB above the rest
    shown = plot.show_bmode(iq, GRID, ax=ax, dynamic_range=40)
    assert shown.get_clim() == (-40.0, 0.0)
    data = shown.get_array()
    assert data[0, 0] == pytest.approx(0.0) and data[1, 1] == pytest.approx(-20.0, abs=1e-4)
    with pytest.raises(ValueError, match="one image"):
        plot.show_bmode(np.zeros((2,) + GRID.shape, np.uint8), GRID)
    with pytest.raises(ValueError, match="grid is"):
        plot.show_bmode(np.zeros((5, 5), np.uint8), GRID)


def test_doppler_colour_map_endpoints():
    cmap = plot.DOPPLER_CMAP
    assert cmap.name == "usbeam_doppler"
    np.testing.assert_allclose(cmap(0.0)[:3], (0, 1, 1))           # -Nyquist: cyan (fast away)
    np.testing.assert_allclose(cmap(0.25)[:3], (0, 0, 1), atol=0.02)  # away: blue (256-entry table: 1/255 steps)
    np.testing.assert_allclose(cmap(0.5)[:3], (0, 0, 0), atol=0.02)   # zero: black
    np.testing.assert_allclose(cmap(0.75)[:3], (1, 0, 0), atol=0.02)  # toward the probe: red
    np.testing.assert_allclose(cmap(1.0)[:3], (1, 1, 0))           # +Nyquist: yellow


def test_show_doppler_masks_by_power_over_the_bmode():
    velocity = np.zeros(GRID.shape, np.float32)
    velocity[:, :125] = -0.3                                        # left half away, right toward
    velocity[:, 125:] = 0.2
    power = np.full(GRID.shape, -40.0, np.float32)
    power[40:80, 50:200] = -3.0                                     # flow only in this box
    bmode = np.full(GRID.shape, 100, np.uint8)
    fig, ax = plt.subplots()
    under, over = plot.show_doppler(velocity, power, bmode, GRID, ax=ax, v_nyquist=0.5)
    assert over.get_cmap().name == "usbeam_doppler" and over.get_clim() == (-0.5, 0.5)
    assert under.get_cmap().name == "gray" and over.get_extent() == under.get_extent()
    shown = over.get_array()
    assert np.array_equal(~np.ma.getmaskarray(shown), power >= -20)   # the box, and nothing else
    # red toward, blue away: the colours of the drawn values
    rgba = over.to_rgba(shown)
    assert rgba[60, 150, 0] > 0.5 and rgba[60, 150, 2] < 0.1        # +0.2 m/s: red
    assert rgba[60, 60, 2] > 0.5 and rgba[60, 60, 0] < 0.1          # -0.3 m/s: blue
    # linear power is converted to dB relative to its maximum
    _, over = plot.show_doppler(velocity, 10 ** (power / 10), bmode, GRID, ax=ax, v_nyquist=0.5)
    assert np.array_equal(~np.ma.getmaskarray(over.get_array()), power >= -20)
    assert len(fig.axes) == 3                                       # the axes and two colour bars


def test_show_timings_bars(rng):
    grid = usbeam.Grid(x=np.linspace(-5e-3, 5e-3, 21), z=np.linspace(5e-3, 15e-3, 21))
    probe = usbeam.LinearArray(32, 3e-4)
    pipeline = usbeam.Pipeline(probe, usbeam.PlaneWave(0.0), grid, fs=20e6, fc=5e6, n_samples=500, n_frames=2)
    with pytest.raises(ValueError, match="no timings yet|call it once"):
        plot.show_timings({})
    pipeline(rng.integers(-100, 100, (2, 32, 500)).astype(np.int16))
    timings = pipeline.timings
    fig, ax = plt.subplots()
    bars = plot.show_timings(pipeline, ax=ax)
    assert len(bars) == 3
    assert [t.get_text() for t in ax.get_yticklabels()] == ["rf2iq", "das", "bmode"]
    np.testing.assert_allclose([b.get_width() for b in bars], [1e3 * timings[s] for s in ("rf2iq", "das", "bmode")])
    assert ax.get_title().startswith("Pipeline:")
    bars = plot.show_timings({"a": 0.001, "b": 0.004}, ax=plt.subplots()[1])
    assert [b.get_width() for b in bars] == pytest.approx([1.0, 4.0])


def test_without_matplotlib_the_error_names_the_extra(tmp_path):
    # a fresh interpreter where matplotlib cannot be imported
    blocker = tmp_path / "matplotlib"
    blocker.mkdir()
    (blocker / "__init__.py").write_text("raise ImportError('no matplotlib here')\n")
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import usbeam\n"
            "try:\n    import usbeam.plot\nexcept ImportError as e:\n    print('ERR', e)\n")
    import os
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(__import__('pathlib').Path(
        usbeam.__file__).parent.parent)]))
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, env=env,
                          timeout=60)
    assert "ERR usbeam.plot needs matplotlib" in done.stdout and "usbeam[plot]" in done.stdout, done.stderr
