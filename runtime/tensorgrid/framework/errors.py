"""TensorFlow-compatible error classes (``tf.errors``), shared by every layer.

Each error carries the name of the node it concerns (when there is one) so that a
user can find the op in their program; the gRPC layer maps them to status codes.
"""

from __future__ import annotations

from typing import Any


class OpError(Exception):
    """Base of runtime errors raised while running a graph."""

    code = 2  # UNKNOWN, as in grpc.StatusCode

    def __init__(self, node_def: Any, op: Any, message: str, *args: Any) -> None:
        super().__init__(message)
        self.node_def = node_def
        self.op = op
        self.message = message

    def __str__(self) -> str:
        return self.message

    @property
    def error_code(self) -> int:
        """The status code (``tf.errors.OpError.error_code``): 1 CANCELLED ... 16 UNAUTHENTICATED."""
        return self.code

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (None, None, self.message))


class CancelledError(OpError):
    code = 1


class UnknownError(OpError):
    code = 2


class InvalidArgumentError(OpError):
    code = 3


class DeadlineExceededError(OpError):
    code = 4


class NotFoundError(OpError):
    code = 5


class AlreadyExistsError(OpError):
    code = 6


class PermissionDeniedError(OpError):
    code = 7


class ResourceExhaustedError(OpError):
    code = 8


class FailedPreconditionError(OpError):
    code = 9


class AbortedError(OpError):
    code = 10


class OutOfRangeError(OpError):
    code = 11


class UnimplementedError(OpError):
    code = 12


class InternalError(OpError):
    code = 13


class UnavailableError(OpError):
    code = 14


class DataLossError(OpError):
    code = 15


class UnauthenticatedError(OpError):
    code = 16


ERROR_CLASS_BY_CODE: dict[int, type[OpError]] = {
    cls.code: cls
    for cls in (
        CancelledError, UnknownError, InvalidArgumentError, DeadlineExceededError,
        NotFoundError, AlreadyExistsError, PermissionDeniedError, ResourceExhaustedError,
        FailedPreconditionError, AbortedError, OutOfRangeError, UnimplementedError,
        InternalError, UnavailableError, DataLossError, UnauthenticatedError,
    )
}


def error_for_code(code: int, message: str) -> OpError:
    """Rebuilds an error raised on another task from its status code and message."""
    return ERROR_CLASS_BY_CODE.get(code, UnknownError)(None, None, message)
