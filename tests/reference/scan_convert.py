"""Scan conversion coordinates, float64 NumPy, written from the math: a Cartesian point (x, z)
maps to r = |(x, z) - apex|, theta = atan2(x - apex_x, z - apex_z), and to the fractional
indices u = (r - r0) / dr, v = (theta - theta0) / dtheta of a polar image (n_r, n_theta);
it is inside the sector when 0 <= u <= n_r - 1 and 0 <= v <= n_theta - 1.  The bilinear
value itself comes from the peer, scipy.ndimage.map_coordinates(order=1)."""
import numpy as np


def polar_indices(points_xz, r0, dr, theta0, dtheta, apex):
    dx = points_xz[:, 0] - apex[0]
    dz = points_xz[:, 1] - apex[1]
    u = (np.sqrt(dx * dx + dz * dz) - r0) / dr
    v = (np.arctan2(dx, dz) - theta0) / dtheta
    return u, v


def inside(u, v, n_r, n_theta):
    return (u >= 0) & (u <= n_r - 1) & (v >= 0) & (v <= n_theta - 1)
