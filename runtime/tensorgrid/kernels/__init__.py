"""Layer 2: kernels, written once against an array module, run by a backend.

A backend (numpy on CPU, cupy on GPU) is a small plugin chosen by device type; the
kernels in ``*_kernels`` modules use ``k.xp`` (the backend's array module) and a few
backend methods, so the same kernel code serves both. Only ``cupy_backend`` imports
cupy, and only when a GPU device is asked for. Every kernel is typed against the
contexts of ``context`` (TensorFlow's ``op_kernel.h``), which the execution layer
implements: no kernel imports it.
"""
