"""Device names such as ``/job:ps/task:0/device:CPU:0`` (``DeviceSpec``).

Partial specs merge the way TF1's device scopes do: fields set in the more specific
spec win, unset fields are filled in from the enclosing one.
"""

from __future__ import annotations

import re
from typing import Any, Optional

_COMPONENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")


class DeviceSpec:
    """A (possibly partial) device name: job, replica, task, device type and index."""

    __slots__ = ("job", "replica", "task", "device_type", "device_index")

    def __init__(
        self,
        job: Optional[str] = None,
        replica: Optional[int] = None,
        task: Optional[int] = None,
        device_type: Optional[str] = None,
        device_index: Optional[int] = None,
    ) -> None:
        self.job = job
        self.replica = None if replica is None else int(replica)
        self.task = None if task is None else int(task)
        self.device_type = None if device_type is None else _canonical_type(device_type)
        self.device_index = device_index

    @classmethod
    def from_string(cls, spec: Optional[str]) -> "DeviceSpec":
        """Parses a device string; a malformed or self-contradicting one raises ValueError."""
        result = cls()
        if not spec:
            return result
        if not isinstance(spec, str):
            raise ValueError(f"A device must be a string such as '/job:ps/task:0', got {spec!r}")
        seen: dict[str, Any] = {}

        def set_field(field: str, value: Any) -> None:
            if field in seen and seen[field] != value:
                raise ValueError(
                    f"Conflicting {field} in device spec {spec!r}: {seen[field]!r} and {value!r}"
                )
            seen[field] = value
            setattr(result, field, value)

        for part in spec.split("/"):
            if not part:
                continue
            pieces = part.split(":")
            key = pieces[0].lower()
            try:
                if key == "job" and len(pieces) == 2 and _COMPONENT.match(pieces[1]):
                    set_field("job", pieces[1])
                elif key == "replica" and len(pieces) == 2:
                    set_field("replica", _parse_index(pieces[1]))
                elif key == "task" and len(pieces) == 2:
                    set_field("task", _parse_index(pieces[1]))
                elif key == "device" and len(pieces) == 3:
                    set_field("device_type", _canonical_type(pieces[1]))
                    set_field("device_index", None if pieces[2] == "*" else _parse_index(pieces[2]))
                elif key == "device" and len(pieces) == 2:
                    set_field("device_type", _canonical_type(pieces[1]))
                elif key in ("cpu", "gpu") and len(pieces) == 2:
                    set_field("device_type", key.upper())
                    set_field("device_index", None if pieces[1] == "*" else _parse_index(pieces[1]))
                else:
                    raise ValueError(part)
            except ValueError as e:
                if "Conflicting" in str(e):
                    raise
                raise ValueError(
                    f"Unknown component {part!r} in device spec {spec!r}; expected "
                    "'/job:NAME', '/replica:N', '/task:N', '/device:CPU:N', '/device:GPU:N', "
                    "'/cpu:N' or '/gpu:N'"
                ) from None
        return result

    def to_string(self) -> str:
        out = ""
        if self.job is not None:
            out += f"/job:{self.job}"
        if self.replica is not None:
            out += f"/replica:{self.replica}"
        if self.task is not None:
            out += f"/task:{self.task}"
        if self.device_type is not None:
            index = "*" if self.device_index is None else str(self.device_index)
            out += f"/device:{self.device_type}:{index}"
        return out

    def merge_from(self, other: "DeviceSpec") -> None:
        """Overwrites this spec's fields with the fields that ``other`` sets."""
        if other.job is not None:
            self.job = other.job
        if other.replica is not None:
            self.replica = other.replica
        if other.task is not None:
            self.task = other.task
        if other.device_type is not None:
            self.device_type = other.device_type
            self.device_index = other.device_index
        elif other.device_index is not None:
            self.device_index = other.device_index

    def make_merged_spec(self, other: "DeviceSpec") -> "DeviceSpec":
        result = self.copy()
        result.merge_from(other)
        return result

    def copy(self) -> "DeviceSpec":
        return DeviceSpec(self.job, self.replica, self.task, self.device_type, self.device_index)

    def is_compatible_with(self, other: "DeviceSpec") -> bool:
        """True when no field is set differently in the two specs."""
        for field in self.__slots__:
            a, b = getattr(self, field), getattr(other, field)
            if a is not None and b is not None and a != b:
                return False
        return True

    def task_name(self) -> str:
        """The task part only, e.g. ``/job:ps/replica:0/task:1``."""
        return f"/job:{self.job or 'localhost'}/replica:{self.replica or 0}/task:{self.task or 0}"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DeviceSpec) and self.to_string() == other.to_string()

    def __hash__(self) -> int:
        return hash(self.to_string())

    def __repr__(self) -> str:
        return f"DeviceSpec({self.to_string()!r})"


def _parse_index(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError(text)
    return value


def _canonical_type(text: str) -> str:
    upper = text.upper()
    if upper not in ("CPU", "GPU"):
        raise ValueError(text)
    return upper


def canonical_name(device: Any) -> str:
    """The canonical string of a device given as a string, DeviceSpec or None."""
    if device is None:
        return ""
    if isinstance(device, DeviceSpec):
        return device.to_string()
    return DeviceSpec.from_string(device).to_string()


def merge_device(spec: str) -> Any:
    """A device function that fills in an op's unset device fields from ``spec``."""
    parsed = DeviceSpec.from_string(spec)

    def _merge(op: Any) -> str:
        merged = parsed.copy()
        merged.merge_from(DeviceSpec.from_string(op.device))
        return merged.to_string()

    return _merge
