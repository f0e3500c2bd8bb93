"""Argument checks shared by the Python API.  Every message names the parameter."""
import math
import numbers

import numpy as np


def positive(name, value):
    """A finite real number > 0, returned as float."""
    value = real_scalar(name, value)
    if not value > 0:
        raise ValueError(f"{name} must be > 0 (got {value!r})")
    return value


def nonnegative(name, value):
    value = real_scalar(name, value)
    if value < 0:
        raise ValueError(f"{name} must be >= 0 (got {value!r})")
    return value


def real_scalar(name, value):
    """A finite real scalar, returned as float."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.floating, np.integer)):
        if isinstance(value, np.ndarray) and value.ndim == 0 and np.isrealobj(value):
            value = value.item()
        else:
            raise TypeError(f"{name} must be a real number (got {type(value).__name__})")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite (got {value!r})")
    return value


def integer(name, value, minimum=None, maximum=None):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Integral, np.integer)):
        raise TypeError(f"{name} must be an integer (got {type(value).__name__})")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum} (got {value})")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum} (got {value})")
    return value


def shape(name, value, minimum=0):
    """An array shape: a sequence of integers >= minimum (or one integer), as a tuple of int.
    TypeError naming `name` for anything else: a string, or a float entry, which int() would
    silently truncate (3.5 -> 3)."""
    if isinstance(value, (numbers.Integral, np.integer)) and not isinstance(value, (bool, np.bool_)):
        value = (value,)
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise TypeError(f"{name} must be a tuple of integers (got {type(value).__name__})")
    return tuple(integer(f"{name} entry", s, minimum=minimum) for s in value)


# The largest integer the C binding takes (Py_ssize_t): larger ones raise ValueError naming
# the parameter here instead of OverflowError("Python int too large to convert to C ssize_t").
SSIZE_MAX = np.iinfo(np.intp).max


def timeout(name, value):
    """None (wait forever) or a finite number of seconds >= 0, as float."""
    if value is None:
        return None
    return nonnegative(name, value)


def choice(name, value, options):
    """``value`` if it is one of ``options``; strings match case-insensitively ('Hann',
    'NCHW') and come back spelled as in ``options``.  ValueError listing them otherwise."""
    if isinstance(value, str):
        for o in options:
            if isinstance(o, str) and o.lower() == value.lower():
                return o
    elif value in options:
        return value
    raise ValueError(f"{name} must be one of {', '.join(repr(o) for o in options)} (got {value!r})")


def ndarray(name, value):
    """The argument as an ndarray without copying; TypeError for anything that is not array-like data."""
    if isinstance(value, np.ndarray):
        return value
    if hasattr(value, "__array__") or isinstance(value, (list, tuple)):
        return np.asarray(value)
    raise TypeError(f"{name} must be a numpy array (got {type(value).__name__})")


def finite_array(name, value):
    """A float64 array of finite values (for geometry such as positions and angles)."""
    if isinstance(value, (str, bytes)):
        raise TypeError(f"{name} must be numbers (got {type(value).__name__})")
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be real numbers ({exc})") from None
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must contain only finite values")
    return arr


def out_array(name, out, shape, dtype):
    """Check a caller-provided output buffer: ndarray, exact shape and dtype, C-contiguous, writable."""
    if not isinstance(out, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray (got {type(out).__name__})")
    if out.dtype != np.dtype(dtype):
        raise TypeError(f"{name} must have dtype {np.dtype(dtype)} (got {out.dtype})")
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)} (got {out.shape})")
    if not out.flags.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous")
    if not out.flags.writeable:
        raise ValueError(f"{name} is read-only")
    return out


# ---- slow-time ensembles (clutter filters, color and power Doppler) ------------------------

def ensemble(name, iq, min_frames=2):
    """A complex IQ ensemble ``(n_frames, *spatial)``, slow time on axis 0, of at least
    ``min_frames`` frames; the ndarray, not copied."""
    iq = ndarray(name, iq)
    if not np.iscomplexobj(iq):
        raise TypeError(f"{name} must be complex IQ (got dtype {iq.dtype})")
    if iq.ndim < 2:
        raise ValueError(f"{name} must be shaped (n_frames, *spatial) with at least 2 dimensions (got {iq.shape})")
    if iq.size == 0:
        raise ValueError(f"{name} is empty (shape {iq.shape})")
    if iq.shape[0] < min_frames:
        raise ValueError(f"{name}: the ensemble needs at least {min_frames} frames on axis 0 (got {iq.shape[0]})")
    return iq


def plan_shape(name, value, min_ndim):
    """A plan's array shape: at least ``min_ndim`` dimensions, all positive."""
    value = shape(name, value)
    if len(value) < min_ndim or any(s <= 0 for s in value):
        raise ValueError(f"{name} must have >= {min_ndim} positive dimensions (got {value})")
    return value


def complex64(name, iq, expected_shape):
    """Complex IQ of ``expected_shape`` as the kernels read it: C-contiguous, aligned complex64
    (converted only when it is not already)."""
    iq = ndarray(name, iq)
    if not np.iscomplexobj(iq):
        raise TypeError(f"{name} must be complex IQ (got dtype {iq.dtype})")
    if iq.shape != expected_shape:
        raise ValueError(f"{name} must have shape {expected_shape} (got {iq.shape})")
    if iq.dtype != np.complex64 or not iq.flags.c_contiguous or not iq.flags.aligned:
        iq = np.ascontiguousarray(iq, dtype=np.complex64)
    return iq


def _same_elements(a, b):
    """a and b view exactly the same elements, element for element (in place)."""
    return (a.__array_interface__["data"][0] == b.__array_interface__["data"][0] and a.shape == b.shape
            and a.strides == b.strides and a.dtype == b.dtype)


def no_overlap(out_name, out, name, *arrays, same_ok=False):
    """ValueError "<out_name> must not share memory with <name>" when the output buffer `out`
    overlaps any of `arrays` (the caller's input as given and as converted, or another
    output): a kernel would read what it already wrote, and the input would change.
    same_ok: exactly the same elements (in place) is allowed, for kernels that support it.
    None and non-ndarray arguments are skipped.  Exact (np.shares_memory), not a bounds test,
    so interleaved views that share no element (e.g. the real and imaginary parts of one
    complex array) pass; overlap too costly to decide counts as overlap."""
    if not isinstance(out, np.ndarray):
        return
    for arr in arrays:
        if not isinstance(arr, np.ndarray) or not np.may_share_memory(out, arr):
            continue
        if same_ok and _same_elements(out, arr):
            continue
        try:
            shared = np.shares_memory(out, arr, max_work=1 << 16)
        except np.exceptions.TooHardError:
            shared = True
        if shared:
            raise ValueError(f"{out_name} must not share memory with {name}"
                             + (" (only exactly the same array, in place, is allowed)" if same_ok else ""))


def check_allocation(name, shape, itemsize, limit_bytes=None):
    """Raise MemoryError naming `name` when an array of this shape cannot reasonably be allocated."""
    count = 1
    for dim in shape:
        count *= int(dim)
    nbytes = count * int(itemsize)
    if limit_bytes is None:
        limit_bytes = _memory_limit()
    if nbytes > limit_bytes:
        raise MemoryError(f"{name}: {tuple(int(d) for d in shape)} needs {nbytes / 2**30:.1f} GiB, "
                          f"more than the {limit_bytes / 2**30:.1f} GiB available")
    return nbytes


def _memory_limit():
    try:
        import os
        pages = os.sysconf("SC_PHYS_PAGES")
        page = os.sysconf("SC_PAGE_SIZE")
        return pages * page
    except (ValueError, OSError, AttributeError):
        return 1 << 40


# ---- plausibility: values that are valid numbers but almost certainly a mistake -------------
#
# These checks never pass a wrong image silently (README, "Errors"): each names the parameter,
# the value and the likely cause.  They reject only what no real acquisition produces:
# ultrasound is sampled and modulated in the kHz..GHz range (a frequency below 1 kHz is a
# value in MHz or kHz given for Hz), and no imaging grid or probe reaches 1 m from the array
# (a value beyond that is millimetres given for metres).

MIN_FREQUENCY_HZ = 1e3
MAX_DISTANCE_M = 1.0
# Doppler ensembles are fired at hundreds of Hz to tens of kHz; below 20 Hz the Nyquist velocity
# is under 1.6 mm/s at 5 MHz, where a PRF in kHz (prf=5) lands
MIN_PRF_HZ = 20.0
# an axial or lateral pixel of 1 cm is already far coarser than any ultrasound image; 0.1 (mm) is not m
MAX_PIXEL_SPACING_M = 1e-2
SOUND_SPEED_RANGE_M_S = (100.0, 20000.0)  # gases ~340 m/s to the stiffest solids (diamond ~18 km/s)


def _hz_at_least(name, value, floor, floor_text, what, given_unit, exponent):
    """> 0 and >= floor Hz, else ValueError naming the unit the value was likely given in."""
    value = positive(name, value)
    if value < floor:
        raise ValueError(f"{name} = {value:g} Hz is below {floor_text}: {what} in Hz (SI), not {given_unit} "
                         f"(for {value:g} {given_unit} pass {name}={value:g}{exponent})")
    return value


def frequency(name, value):
    """A sampling or centre frequency in Hz: > 0 and at least 1 kHz (ValueError naming
    MHz otherwise: fs=6.67 means 6.67 Hz, not 6.67 MHz)."""
    return _hz_at_least(name, value, MIN_FREQUENCY_HZ, "1 kHz", "frequencies are", "MHz", "e6")


def pulse_repetition_frequency(name, value):
    """A pulse (or frame) repetition frequency in Hz: > 0 and at least MIN_PRF_HZ (ValueError
    naming kHz otherwise: prf=5 means 5 Hz, a Nyquist velocity of 0.4 mm/s at 5 MHz, where 5 kHz
    was meant)."""
    return _hz_at_least(name, value, MIN_PRF_HZ, f"{MIN_PRF_HZ:g} Hz", f"{name} is", "kHz", "e3")


def pixel_spacing(name, value):
    """An image's pixel spacing in m: > 0 and at most MAX_PIXEL_SPACING_M (ValueError naming mm
    otherwise: dz=0.1 is 10 cm, where 0.1 mm was meant)."""
    value = positive(name, value)
    if value > MAX_PIXEL_SPACING_M:
        raise ValueError(f"{name} = {value:g} m is over {MAX_PIXEL_SPACING_M * 1e3:g} mm between pixels: {name} is in "
                         f"m (SI), not mm (for {value:g} mm pass {name}={value:g}e-3)")
    return value


def speed_of_sound(name, value):
    """A speed of sound in m/s: ValueError naming the unit when it is outside 100..20000 m/s
    (c=1.54 is mm/us given for m/s)."""
    value = positive(name, value)
    if not SOUND_SPEED_RANGE_M_S[0] <= value <= SOUND_SPEED_RANGE_M_S[1]:
        raise ValueError(f"{name} = {value:g} m/s is not a speed of sound: {name} is in m/s (SI), e.g. 1540 for "
                         f"soft tissue")
    return value


def distances(name, coordinates, what="coordinates"):
    """Positions in metres (an array, any shape): ValueError when one lies beyond 1 m of the
    origin along an axis, the sign of millimetres given for metres, or is NaN or infinite."""
    arr = np.asarray(coordinates, dtype=np.float64)
    if arr.size == 0:
        return arr
    reach = max(float(arr.max()), -float(arr.min()))  # no |arr| temporary: a grid's points are MBs
    if not math.isfinite(reach):  # a NaN anywhere makes max / min NaN, and NaN > 1 m is False
        raise ValueError(f"{name} holds NaN or infinite {what}")
    if reach > MAX_DISTANCE_M:
        raise ValueError(f"{name} reaches {reach:g} m from the array: {what} are in metres (SI), not mm "
                         f"(multiply millimetres by 1e-3)")
    return arr


def samples_vs_elements(name, n_samples, n_elements):
    """RF whose sample axis is shorter than its element axis: RF handed over in MATLAB /
    PyMUST layout ``(samples, elements, frames)`` instead of usbeam's ``(frames, elements,
    samples)``.  ValueError: RF is sampled at >= 2 fc over more than a few mm of depth (128
    samples at 20 MHz are 5 mm), so it always has more samples than a probe has elements.
    Not applied to IQ, which decimation can make that short for a shallow record; a plan's
    grid coverage check still refuses an image that would be mostly empty."""
    if n_samples >= n_elements:
        return
    raise ValueError(f"{name} has {n_samples} samples per channel, fewer than its {n_elements} elements: "
                     f"{name} looks like MATLAB layout (samples, elements, frames): pass {name}.T "
                     f"(usbeam takes (frames, elements, samples), samples last)")


def coverage_error(name, covered, n_checked, window, min_coverage):
    """The message for an image that would be mostly empty (see Beamformer's min_coverage)."""
    return (f"{name}: only {100 * covered / n_checked:.0f} % of the grid's pixels (of {n_checked} checked) "
            f"receive any recorded sample (records cover round-trip times {window[0] * 1e6:.3g} to "
            f"{window[1] * 1e6:.3g} us); the image would be mostly empty.  Likely causes: channel data in "
            f"MATLAB layout (samples, elements, frames): pass rf.T; a grid in mm instead of m; a wrong t0 "
            f"or n_samples.  (min_coverage={min_coverage:g}; pass min_coverage=0 to build it anyway)")



def leading_axes(name, shape, n_transmits, n_elements, n_samples):
    """Split channel data's shape by the one shape rule (README, "Shapes"): ``(*leading,
    n_transmits, n_elements, n_samples)``, where a one-transmit sequence may leave its
    transmit axis out: ``(n_elements, n_samples)`` and ``(n_frames, n_elements, n_samples)``
    (what ``load_must`` returns) are one-transmit data with leading axes () and (n_frames,),
    and with one transmit a 4-D or longer shape has its transmit axis (of 1) third from last.
    Returns (leading, has_transmit_axis); ValueError naming the axis that does not fit, and
    the likely cause when the shape is MATLAB's layout."""
    shape = tuple(int(s) for s in shape)
    ndim = len(shape)
    if n_transmits == 1 and ndim in (2, 3):
        leading, core, has_tx = shape[:-2], shape[-2:], False
    elif ndim >= 3:
        leading, core, has_tx = shape[:-3], shape[-3:], True
    else:
        raise ValueError(f"{name} must have shape (..., {n_transmits}, {n_elements}, {n_samples}) "
                         f"(n_transmits, n_elements, n_samples) (got {shape})")
    expected = ((n_transmits,) if has_tx else ()) + (n_elements, n_samples)
    if core != expected:
        if ndim >= 2 and shape[:2] == (n_samples, n_elements) and n_samples != n_elements:
            raise ValueError(f"{name} has shape {shape}: it looks like MATLAB layout (samples, elements, "
                             f"frames): pass {name}.T (usbeam takes (frames, elements, samples))")
        if has_tx and core[0] != n_transmits:
            hint = (" (with one transmit, data is (n_elements, n_samples), (n_frames, n_elements, n_samples) "
                    "or (..., 1, n_elements, n_samples))" if n_transmits == 1 else "")
            raise ValueError(f"{name} has {core[0]} transmits (axis -3) but the sequence has {n_transmits}{hint}")
        if core[-2] != n_elements:
            raise ValueError(f"{name} has {core[-2]} elements (axis -2) but the probe has {n_elements}")
        raise ValueError(f"{name} has {core[-1]} samples (axis -1) but the plan was built for n_samples={n_samples}")
    if any(s == 0 for s in leading):
        raise ValueError(f"{name} has no frames (shape {shape})")
    return leading, has_tx
