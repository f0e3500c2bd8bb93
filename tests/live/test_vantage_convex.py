"""The Vantage reader's probe part for curved arrays: Trans.radiusMm / Trans.radius and the
element normals from Trans.ElementPos(:, 4) (the normal's angle), mapped to a usbeam probe
(VantageProbe.to_probe) whose positions are the recorded ones (Verasonics coordinates: the
centre element at z = 0, the others behind it)."""
import math

import numpy as np
import pytest

import usbeam
from test_live_vantage import _hand_workspace, _save
from usbeam.io import load_vantage


def convex_trans(radius_mm=40.0, n=4, pitch_mm=0.3, key="radiusMm"):
    step = 2 * math.asin(pitch_mm / (2 * radius_mm))
    theta = (np.arange(n) - (n - 1) / 2) * step
    pos = np.zeros((n, 5))
    pos[:, 0] = radius_mm * np.sin(theta)
    pos[:, 2] = radius_mm * np.cos(theta) - radius_mm
    pos[:, 3] = theta
    trans = dict(_hand_workspace()["Trans"], ElementPos=pos)
    trans[key] = radius_mm if key == "radiusMm" else radius_mm * 6.25e6 / 1540.0 / 1e3
    return trans, theta


@pytest.mark.parametrize("key", ["radiusMm", "radius"])
def test_convex_trans_maps_to_a_probe_with_normals(tmp_path, key):
    trans, theta = convex_trans(key=key)
    ws = load_vantage(_save(tmp_path / "convex.mat", dict(_hand_workspace(), Trans=trans)))
    assert ws.probe.radius == pytest.approx(0.04, rel=1e-12)
    np.testing.assert_allclose(ws.probe.normals, np.c_[np.sin(theta), np.zeros(4), np.cos(theta)], atol=1e-15)
    probe = ws.probe.to_probe()
    assert isinstance(probe, usbeam.ElementArray) and not probe.two_dimensional
    np.testing.assert_allclose(probe.positions, ws.probe.element_positions, rtol=0, atol=0)
    # the recorded arc: every element 40 mm from the centre of curvature (0, 0, -40 mm)
    np.testing.assert_allclose(np.linalg.norm(probe.positions - [0, 0, -0.04], axis=1), 0.04, rtol=1e-12)
    assert probe.width == pytest.approx(2.5e-4)


def test_flat_trans_stays_a_linear_array(tmp_path):
    trans = dict(_hand_workspace()["Trans"])
    trans["ElementPos"] = np.array([[-0.45, 0, 0, 0, 0], [-0.15, 0, 0, 0, 0], [0.15, 0, 0, 0, 0], [0.45, 0, 0, 0, 0]])
    ws = load_vantage(_save(tmp_path / "flat.mat", dict(_hand_workspace(), Trans=trans)))
    assert math.isinf(ws.probe.radius) and ws.probe.normals is None
    assert ws.probe.to_probe() == usbeam.LinearArray(4, 3e-4, width=2.5e-4, fc=6.25e6)


@pytest.mark.parametrize("radius", [0.0, -10.0])
def test_bad_radius_is_named(tmp_path, radius):
    trans, _ = convex_trans()
    trans["radiusMm"] = radius
    with pytest.raises(ValueError, match="Trans.radius"):
        load_vantage(_save(tmp_path / "bad.mat", dict(_hand_workspace(), Trans=trans)))
