"""Layer 3: the public op constructors and their gradient rules, side by side.

Each module registers its op types with the framework's registry, builds the ops
with their static shapes, and declares each op's gradient next to its constructor.
"""
