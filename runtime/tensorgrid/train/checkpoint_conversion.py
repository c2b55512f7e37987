"""Converting a checkpoint between tensorgrid's format and TensorFlow's (``tf.train.convert_checkpoint``,
``tensorgrid checkpoint convert``).

tensorgrid reads TensorFlow's checkpoints directly (checkpoint_chain detects them), but saves in
its own format, whose crash safety and incremental deltas need it. To take a model trained with
tensorgrid back to TensorFlow (to export a SavedModel with TensorFlow, say), convert its
checkpoint: every tensor is written whole under its checkpoint key, a partitioned variable as its
logical tensor (TensorFlow's restore slices it into any number of parts), a delta as its chain
brought up to date. The reverse gives a TensorFlow checkpoint in tensorgrid's format. The
destination directory's ``checkpoint`` state file then names the new checkpoint, so
``tf.train.latest_checkpoint`` finds it with either library.
"""

from __future__ import annotations

import os
from typing import Any

from tensorgrid.train import checkpoint_chain
from tensorgrid.train import checkpoint_format
from tensorgrid.train import checkpoint_management
from tensorgrid.train import tensorflow_bundle

FORMATS = ("tensorflow", "tensorgrid")


def convert_checkpoint(source: Any, destination: Any, to: str = "tensorflow") -> str:
    """Writes checkpoint ``source`` (a prefix in either format, or a directory: its latest checkpoint)
    as checkpoint ``destination`` (a prefix: ``dir/model.ckpt-1000``) in format ``to``; returns
    ``destination``. ValueError when ``source`` is not a checkpoint, ``destination`` holds one already,
    or a tensor cannot be held by the format ``to``."""
    if to not in FORMATS:
        raise ValueError(f"to={to!r}: the format to write must be one of {', '.join(FORMATS)}")
    source, destination = str(os.fspath(source)), str(os.fspath(destination))
    if os.path.isdir(source):
        latest = checkpoint_management.latest_checkpoint(source)
        if latest is None:
            raise ValueError(f"{source} is a directory without a 'checkpoint' state file naming a checkpoint: "
                             "give a checkpoint's prefix (e.g. dir/model.ckpt-1000)")
        source = latest
    if not checkpoint_management.checkpoint_exists(source):
        raise ValueError(f"{source} is not a checkpoint: {checkpoint_format.index_path(source)} does not exist")
    if os.path.isdir(destination) or not os.path.basename(destination):
        raise ValueError(f"destination {destination!r} is a directory: give the new checkpoint's prefix, e.g. "
                         f"{os.path.join(destination, 'model.ckpt')}")
    taken = checkpoint_format.checkpoint_files(destination)
    if taken:
        raise ValueError(f"destination {destination} holds a checkpoint already ({', '.join(sorted(taken))}): "
                         "remove it or give another prefix")
    checkpoint = checkpoint_chain.LogicalCheckpoint(source)
    values = checkpoint.read(checkpoint.tensors)
    if to == "tensorflow":
        tensorflow_bundle.write_bundle(destination, values)
    else:
        strings = sorted(name for name, entry in checkpoint.tensors.items() if entry.dtype == "string")
        if strings:
            raise ValueError(f"tensorgrid's checkpoint format holds numbers and bools only; {source} has string "
                             f"tensors {', '.join(strings)} (tensorgrid reads the TensorFlow checkpoint directly: "
                             "restore from it without converting)")
        directory = os.path.dirname(destination)
        if directory:
            os.makedirs(directory, exist_ok=True)
        checkpoint_format.write_checkpoint(destination, values)
    directory = os.path.dirname(destination) or "."
    state = checkpoint_management.get_checkpoint_state(directory)
    kept = [p for p in (state.all_model_checkpoint_paths if state else []) if p != destination]
    checkpoint_management.update_checkpoint_state_internal(directory, destination, kept + [destination])
    return str(destination)
