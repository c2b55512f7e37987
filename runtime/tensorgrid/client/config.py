"""Session configuration (``tf.ConfigProto``, ``tf.GPUOptions``, ``tf.RunOptions``).

Plain settings objects with TF1's field names; unknown fields are rejected so a typo
in a user's config is reported instead of silently ignored.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional


@dataclasses.dataclass
class GPUOptions:
    allow_growth: bool = False
    """Accepted for compatibility; cupy's memory pool always grows on demand."""
    per_process_gpu_memory_fraction: float = 0.0
    """When > 0, caps the cupy memory pool at this fraction of device memory."""
    visible_device_list: str = ""


@dataclasses.dataclass
class ConfigProto:
    allow_soft_placement: bool = False
    """Run ops pinned to an unavailable GPU on the CPU instead of failing."""
    log_device_placement: bool = False
    """Log the device chosen for each op when a graph is first run."""
    device_filters: list[str] = dataclasses.field(default_factory=list)
    """Tasks this session may use (e.g. ``["/job:ps", "/job:worker/task:1"]``); others are ignored."""
    inter_op_parallelism_threads: int = 0
    intra_op_parallelism_threads: int = 0
    operation_timeout_in_ms: int = 0
    """Deadline of each step on a remote master (0: none)."""
    gpu_options: Optional[GPUOptions] = None
    isolate_session_state: bool = False
    experimental: Any = None


@dataclasses.dataclass
class RunOptions:
    timeout_in_ms: int = 0
    trace_level: int = 0
    FULL_TRACE = 3
    NO_TRACE = 0


@dataclasses.dataclass
class RunMetadata:
    step_stats: Any = None
    partition_graphs: list[Any] = dataclasses.field(default_factory=list)
