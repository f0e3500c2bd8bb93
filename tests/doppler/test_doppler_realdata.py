"""Color Doppler on real data: PWI_disk.mat (rotating disk, 32 plane-wave frames, PRF 10 kHz).

PyMUST's beamformed IQ is built as datasets/README.md describes (rf2iq, then dasmtx with
'nearest' and the automatic f-number), on a 0.2 mm grid (z 10-35 mm, x -12.5-12.5 mm; half
the README's resolution to keep the test short).  usbeam's color Doppler of that IQ must agree
with PyMUST iq2doppler, and the velocity field must show the disk's rotation: point-antisymmetric
about the disk centre, with magnitudes below the Nyquist velocity.
"""
import numpy as np
import pytest
import scipy.io

import usbeam
from conftest import shared_dataset
from tolerances import TOLERANCES

pymust = pytest.importorskip("pymust")


@pytest.fixture(scope="module")
def disk():
    path = shared_dataset("PWI_disk.mat")
    mat = scipy.io.loadmat(path)
    fields = mat["param"]
    param = pymust.utils.Param()
    for name in fields.dtype.names:
        value = np.asarray(fields[name][0, 0])
        setattr(param, name, value.item() if value.size == 1 else value.ravel())
    rf = mat["RF"].astype(np.float64)                       # (samples, elements, frames)
    iq = pymust.rf2iq(rf, param)
    x = np.arange(-12.5e-3, 12.5e-3 + 1e-9, 2e-4)
    z = np.arange(10e-3, 35e-3 + 1e-9, 2e-4)
    xi, zi = np.meshgrid(x, z)
    param.fnumber = None
    param.t0 = np.array(param.t0)
    das = pymust.dasmtx(1j * np.array(iq.shape), xi, zi, param, "nearest")
    iq_b = (das @ iq.reshape(-1, iq.shape[2], order="F")).reshape(xi.shape + (iq.shape[2],), order="F")
    ensemble = np.ascontiguousarray(np.moveaxis(iq_b, -1, 0)).astype(np.complex64)  # (32, nz, nx)
    return dict(param=param, iq_b=iq_b, ensemble=ensemble, x=x, z=z,
                fc=float(param.fc), prf=float(param.PRF), c=float(param.c))


def signal_mask(ensemble):
    """Pixels with signal: mean power within 15 dB of the brightest (the disk)."""
    return usbeam.power_doppler(ensemble, db=True) > -15.0


@pytest.mark.parametrize("average, lag", [(1, 1), (5, 1), ((3, 7), 1), (1, 2)])
def test_disk_velocity_matches_pymust(disk, average, lag):
    p = disk["param"]
    m = np.array(average if np.ndim(average) else (average, average))
    pv, _ = pymust.iq2doppler(disk["iq_b"], p, m, lag)
    v, _ = usbeam.color_doppler(disk["ensemble"], fc=disk["fc"], prf=disk["prf"], c=disk["c"], lag=lag,
                                average=average)
    vn = disk["c"] * disk["prf"] / (4 * disk["fc"] * lag)
    sig = signal_mask(disk["ensemble"])
    assert sig.mean() > 0.3  # the disk fills a good part of the image
    diff = (v - pv + vn) % (2 * vn) - vn
    assert np.median(np.abs(diff[sig])) <= TOLERANCES["doppler_pymust_median_vn"] * vn


def test_disk_rotation_is_antisymmetric_below_nyquist(disk):
    ens = disk["ensemble"]
    v, _ = usbeam.color_doppler(ens, fc=disk["fc"], prf=disk["prf"], c=disk["c"], average=5)
    vn = usbeam.nyquist_velocity(fc=disk["fc"], prf=disk["prf"], c=disk["c"])
    sig = signal_mask(ens)
    x, z = disk["x"], disk["z"]
    xx, zz = np.meshgrid(x, z)
    xc, zc = xx[sig].mean(), zz[sig].mean()                    # disk centre: centroid of the signal
    iz, ix = np.nonzero(sig)
    jz = np.rint(2 * (zc - z[0]) / (z[1] - z[0]) - iz).astype(int)   # point reflection about the centre
    jx = np.rint(2 * (xc - x[0]) / (x[1] - x[0]) - ix).astype(int)
    inside = (jz >= 0) & (jz < len(z)) & (jx >= 0) & (jx < len(x))
    inside[inside] &= sig[jz[inside], jx[inside]]
    assert inside.sum() > 1000
    here, mirrored = v[iz[inside], ix[inside]], v[jz[inside], jx[inside]]
    # rotation: v(centre + r) = -v(centre - r)
    assert np.corrcoef(here, -mirrored)[0, 1] > 0.95
    assert np.median(np.abs(here + mirrored)) < 0.1 * vn
    # both senses of rotation are present and strong, and nothing reaches the aliasing limit
    assert np.percentile(v[sig], 95) > 0.3 * vn and np.percentile(v[sig], 5) < -0.3 * vn
    assert np.abs(v[sig]).max() < 0.95 * vn


def test_disk_clutter_filter_keeps_rotation(disk):
    # The disk has no stationary tissue: a mild SVD filter (drop the first component) must leave
    # the rotation pattern in place (same sign on each side of the centre).
    ens = disk["ensemble"]
    filtered = usbeam.clutter_filter(ens, "svd", low=1)
    v0, _ = usbeam.color_doppler(ens, fc=disk["fc"], prf=disk["prf"], c=disk["c"], average=5)
    v1, _ = usbeam.color_doppler(filtered, fc=disk["fc"], prf=disk["prf"], c=disk["c"], average=5)
    sig = signal_mask(ens) & (np.abs(v0) > 0.2 * usbeam.nyquist_velocity(fc=disk["fc"], prf=disk["prf"],
                                                                          c=disk["c"]))
    assert np.mean(np.sign(v0[sig]) == np.sign(v1[sig])) > 0.95
