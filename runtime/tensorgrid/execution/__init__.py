"""Layer 4: running a graph partition on one task.

The executor runs the ops a step needs in dataflow order with the kernels of each
op's device; the resource manager keeps variables, queues and accumulators in named
containers shared by every session on the task; the rendezvous hands tensors from
Send ops to Recv ops.
"""
