"""Layer 1: graphs, operations, tensors, dtypes, shapes, devices and the op registry.

Nothing here executes anything; every other layer builds on these types.
"""
