"""The checkpoint state file and the functions that find checkpoints in a directory.

The state file (``checkpoint`` by default) is TF's text-format ``CheckpointState``:
``model_checkpoint_path`` names the newest checkpoint and ``all_model_checkpoint_paths``
the ones still kept, oldest first. It is written atomically, and only after the
checkpoint it names is complete, so ``latest_checkpoint`` never returns a prefix
whose files are partial. Files written by TensorFlow parse here, and the reverse.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import re
from typing import Any, Optional, Sequence

import numpy as np

from tensorgrid.train import checkpoint_chain
from tensorgrid.train import checkpoint_format

_log = logging.getLogger(__name__)

DEFAULT_STATE_FILENAME = "checkpoint"


@dataclasses.dataclass
class CheckpointState:
    """The contents of a checkpoint state file (TF's ``CheckpointState`` proto)."""

    model_checkpoint_path: str = ""
    all_model_checkpoint_paths: list[str] = dataclasses.field(default_factory=list)
    all_model_checkpoint_timestamps: list[float] = dataclasses.field(default_factory=list)
    last_preserved_timestamp: float = 0.0

    def __str__(self) -> str:
        return _to_text(self)


# ---------------------------------------------------------------------- text format

_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t", '"': '\\"', "'": "\\'", "\\": "\\\\"}


def _quote(text: str) -> str:
    out = []
    for byte in text.encode("utf-8"):
        ch = chr(byte)
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif 0x20 <= byte < 0x7F:
            out.append(ch)
        else:
            out.append(f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


_UNESCAPE = re.compile(r"\\([0-7]{1,3}|x[0-9a-fA-F]{1,2}|.)")
_SIMPLE = {"n": b"\n", "r": b"\r", "t": b"\t", '"': b'"', "'": b"'", "\\": b"\\", "a": b"\a", "b": b"\b",
           "f": b"\f", "v": b"\v", "?": b"?"}


def _unquote(literal: str) -> str:
    body = literal[1:-1]
    out = bytearray()
    position = 0
    for match in _UNESCAPE.finditer(body):
        out += body[position:match.start()].encode("utf-8")
        code = match.group(1)
        if code[0] in "01234567":
            out.append(int(code, 8) & 0xFF)
        elif code[0] == "x":
            out.append(int(code[1:], 16))
        elif code in _SIMPLE:
            out += _SIMPLE[code]
        else:
            raise ValueError(f"Unknown escape \\{code} in {literal}")
        position = match.end()
    out += body[position:].encode("utf-8")
    return out.decode("utf-8")


def _to_text(state: CheckpointState) -> str:
    lines = [f"model_checkpoint_path: {_quote(state.model_checkpoint_path)}"]
    lines += [f"all_model_checkpoint_paths: {_quote(p)}" for p in state.all_model_checkpoint_paths]
    lines += [f"all_model_checkpoint_timestamps: {t!r}" for t in state.all_model_checkpoint_timestamps]
    if state.last_preserved_timestamp:
        lines.append(f"last_preserved_timestamp: {state.last_preserved_timestamp!r}")
    return "\n".join(lines) + "\n"


_LINE = re.compile(r'^\s*(\w+)\s*:\s*("(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|[-+0-9.eE]+|inf|nan)\s*$')


def parse_checkpoint_state(text: str) -> CheckpointState:
    """Parses a state file's text; ValueError on anything that is not a CheckpointState."""
    state = CheckpointState()
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _LINE.match(line)
        if match is None:
            raise ValueError(f"line {number} is not a 'field: value' pair: {line!r}")
        field, value = match.groups()
        if field in ("model_checkpoint_path", "all_model_checkpoint_paths"):
            if value[0] not in "\"'":
                raise ValueError(f"line {number}: {field} must be a string")
            text_value = _unquote(value)
            if field == "model_checkpoint_path":
                state.model_checkpoint_path = text_value
            else:
                state.all_model_checkpoint_paths.append(text_value)
        elif field == "all_model_checkpoint_timestamps":
            state.all_model_checkpoint_timestamps.append(float(value))
        elif field == "last_preserved_timestamp":
            state.last_preserved_timestamp = float(value)
        else:
            raise ValueError(f"line {number}: unknown field {field!r}")
    return state


# ---------------------------------------------------------------------- state file

def _state_path(save_dir: str, latest_filename: Optional[str]) -> str:
    return os.path.join(save_dir, latest_filename or DEFAULT_STATE_FILENAME)


def generate_checkpoint_state_proto(
    save_dir: str,
    model_checkpoint_path: str,
    all_model_checkpoint_paths: Optional[Sequence[str]] = None,
    all_model_checkpoint_timestamps: Optional[Sequence[float]] = None,
    last_preserved_timestamp: Optional[float] = None,
) -> CheckpointState:
    """The state naming ``model_checkpoint_path`` last; relative paths become relative to a relative ``save_dir``."""
    paths = list(all_model_checkpoint_paths or [])
    if not paths or paths[-1] != model_checkpoint_path:
        paths.append(model_checkpoint_path)
    timestamps = list(all_model_checkpoint_timestamps or [])
    if timestamps and len(timestamps) != len(paths):
        raise ValueError(
            f"Checkpoint timestamps, if provided, must match checkpoint paths ({len(timestamps)} vs {len(paths)})"
        )
    if not os.path.isabs(save_dir):
        if not os.path.isabs(model_checkpoint_path):
            model_checkpoint_path = os.path.relpath(model_checkpoint_path, save_dir or ".")
        paths = [p if os.path.isabs(p) else os.path.relpath(p, save_dir or ".") for p in paths]
    return CheckpointState(model_checkpoint_path, paths, timestamps, last_preserved_timestamp or 0.0)


def update_checkpoint_state_internal(
    save_dir: str,
    model_checkpoint_path: str,
    all_model_checkpoint_paths: Optional[Sequence[str]] = None,
    latest_filename: Optional[str] = None,
    save_relative_paths: bool = False,
    all_model_checkpoint_timestamps: Optional[Sequence[float]] = None,
    last_preserved_timestamp: Optional[float] = None,
) -> None:
    """Atomically rewrites the state file of ``save_dir``."""
    state_path = _state_path(save_dir, latest_filename)
    paths = list(all_model_checkpoint_paths or [])
    if save_relative_paths:
        if os.path.isabs(model_checkpoint_path):
            model_checkpoint_path = os.path.relpath(model_checkpoint_path, save_dir)
        paths = [os.path.relpath(p, save_dir) if os.path.isabs(p) else p for p in paths]
    state = generate_checkpoint_state_proto(save_dir, model_checkpoint_path, paths,
                                            all_model_checkpoint_timestamps, last_preserved_timestamp)
    if os.path.normpath(state_path) == os.path.normpath(os.path.join(save_dir, state.model_checkpoint_path)):
        raise RuntimeError(
            f"Save path '{model_checkpoint_path}' conflicts with path used for checkpoint state.  "
            "Please use a different save path."
        )
    checkpoint_format.atomic_write_bytes(state_path, _to_text(state).encode("utf-8"))
    checkpoint_format.fsync_directory(save_dir)


def update_checkpoint_state(
    save_dir: str,
    model_checkpoint_path: str,
    all_model_checkpoint_paths: Optional[Sequence[str]] = None,
    latest_filename: Optional[str] = None,
    all_model_checkpoint_timestamps: Optional[Sequence[float]] = None,
    last_preserved_timestamp: Optional[float] = None,
) -> None:
    """Writes the state file of ``save_dir`` (``tf.train.update_checkpoint_state``)."""
    update_checkpoint_state_internal(
        save_dir, model_checkpoint_path, all_model_checkpoint_paths, latest_filename,
        all_model_checkpoint_timestamps=all_model_checkpoint_timestamps,
        last_preserved_timestamp=last_preserved_timestamp,
    )


def get_checkpoint_state(checkpoint_dir: str, latest_filename: Optional[str] = None) -> Optional[CheckpointState]:
    """The state in ``checkpoint_dir`` with paths joined to the directory, or None if absent or unreadable."""
    checkpoint_dir = os.fspath(checkpoint_dir)
    path = _state_path(checkpoint_dir, latest_filename)
    try:
        with open(path, encoding="utf-8") as f:
            state = parse_checkpoint_state(f.read())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        _log.warning("%s: %s; checkpoint state ignored", path, e)
        return None
    if not state.model_checkpoint_path:
        raise ValueError("Invalid checkpoint state loaded from " + checkpoint_dir)
    if not os.path.isabs(state.model_checkpoint_path):
        state.model_checkpoint_path = os.path.join(checkpoint_dir, state.model_checkpoint_path)
    state.all_model_checkpoint_paths = [
        p if os.path.isabs(p) else os.path.join(checkpoint_dir, p) for p in state.all_model_checkpoint_paths
    ]
    return state


def checkpoint_exists(checkpoint_prefix: str) -> bool:
    """True when checkpoint ``checkpoint_prefix`` is committed (its index exists)."""
    checkpoint_prefix = os.fspath(checkpoint_prefix)
    return os.path.exists(checkpoint_format.index_path(checkpoint_prefix))


def latest_checkpoint(checkpoint_dir: str, latest_filename: Optional[str] = None) -> Optional[str]:
    """The prefix of the newest complete checkpoint in ``checkpoint_dir``, or None."""
    state = get_checkpoint_state(checkpoint_dir, latest_filename)
    if state is None or not state.model_checkpoint_path:
        return None
    if checkpoint_exists(state.model_checkpoint_path):
        return state.model_checkpoint_path
    _log.error("Couldn't match files for checkpoint %s", state.model_checkpoint_path)
    return None


def get_checkpoint_mtimes(checkpoint_prefixes: Sequence[str]) -> list[float]:
    """Modification times of the given checkpoints' indexes (missing ones are skipped)."""
    times = []
    for prefix in checkpoint_prefixes:
        try:
            times.append(os.stat(checkpoint_format.index_path(prefix)).st_mtime)
        except FileNotFoundError:
            continue
    return times


def remove_checkpoint(checkpoint_prefix: str, checkpoint_format_version: Any = None,
                      meta_graph_suffix: str = "meta") -> None:
    """Deletes the files of checkpoint ``checkpoint_prefix``."""
    checkpoint_format.remove_checkpoint(checkpoint_prefix)
    meta = f"{checkpoint_prefix}.{meta_graph_suffix}"
    if os.path.exists(meta):
        os.unlink(meta)


def leftovers_of_interrupted_saves(save_path: str, state: Optional[CheckpointState],
                                   latest_filename: Optional[str] = None) -> list[str]:
    """Files in the directory of ``save_path`` that a process killed while saving
    checkpoints ``<save_path>-<step>`` left behind: temporary files of unfinished
    writes, and checkpoints that ``state`` (the directory's state file) no longer lists
    but that were not deleted yet. Checkpoints up to ``state.last_preserved_timestamp``
    (kept for good by ``keep_checkpoint_every_n_hours``) are never among them; without a
    state file only temporary files are."""
    directory = os.path.dirname(save_path) or "."
    base = os.path.basename(save_path)
    state_file = os.path.basename(_state_path(directory, latest_filename))
    listed = {os.path.basename(p) for p in (state.all_model_checkpoint_paths if state else [])}
    if state is not None:
        listed.add(os.path.basename(state.model_checkpoint_path))
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    leftovers = []
    for name in names:
        path = os.path.join(os.path.dirname(save_path), name)
        if checkpoint_format.is_temporary(name):
            if name.startswith((base + "-", state_file)):
                leftovers.append(path)
            continue
        match = re.fullmatch(re.escape(base) + r"-(\d+)(\.index|\.data|\.data\.1|\.meta)", name)
        if state is None or match is None or base + "-" + match.group(1) in listed:
            continue
        try:
            modified = os.stat(checkpoint_format.index_path(path[:-len(match.group(2))])).st_mtime
        except FileNotFoundError:
            modified = math.inf  # data without its index: the index (the commit point) went first
        if modified > state.last_preserved_timestamp:
            leftovers.append(path)
    return sorted(leftovers)


# ---------------------------------------------------------------------- reading checkpoints

def _resolve(ckpt_dir_or_file: str) -> str:
    ckpt_dir_or_file = os.fspath(ckpt_dir_or_file)
    if os.path.isdir(ckpt_dir_or_file):
        prefix = latest_checkpoint(ckpt_dir_or_file)
        if prefix is None:
            raise ValueError(f"Couldn't find 'checkpoint' file or checkpoints in given directory {ckpt_dir_or_file}")
        return prefix
    return ckpt_dir_or_file


def load_checkpoint(ckpt_dir_or_file: str) -> checkpoint_chain.CheckpointReader:
    """A reader of the checkpoint (or of the latest one in a directory)."""
    return checkpoint_chain.CheckpointReader(_resolve(ckpt_dir_or_file))


def NewCheckpointReader(filepattern: str) -> checkpoint_chain.CheckpointReader:  # noqa: N802 - TF's name
    return checkpoint_chain.CheckpointReader(os.fspath(filepattern))


def list_variables(ckpt_dir_or_file: str) -> list[tuple[str, list[int]]]:
    """``[(name, shape)]`` of the tensors in a checkpoint, sorted by name."""
    shapes = load_checkpoint(ckpt_dir_or_file).get_variable_to_shape_map()
    return sorted(shapes.items())


def load_variable(ckpt_dir_or_file: str, name: str) -> np.ndarray:
    """The value of one tensor of a checkpoint."""
    if name.endswith(":0"):
        name = name[:-2]
    return load_checkpoint(ckpt_dir_or_file).get_tensor(name)

