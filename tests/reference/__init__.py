"""Independent float64 NumPy references, written from the math.

Nothing in this package imports usbeam or its extension: each function is a direct,
readable transcription of the published algorithm, used to check the C and CUDA kernels.
"""
