"""TensorFlow-compatible error classes (``tf.errors``), shared by every layer.

Each error carries the name of the node it concerns (when there is one) so that a
user can find the op in their program; the gRPC layer maps them to status codes.
"""

from __future__ import annotations

from typing import Any

# The status codes (``tf.errors.OK`` ... ``tf.errors.DATA_LOSS``), TensorFlow's values (grpc's).
OK = 0
CANCELLED = 1
UNKNOWN = 2
INVALID_ARGUMENT = 3
DEADLINE_EXCEEDED = 4
NOT_FOUND = 5
ALREADY_EXISTS = 6
PERMISSION_DENIED = 7
RESOURCE_EXHAUSTED = 8
FAILED_PRECONDITION = 9
ABORTED = 10
OUT_OF_RANGE = 11
UNIMPLEMENTED = 12
INTERNAL = 13
UNAVAILABLE = 14
DATA_LOSS = 15
UNAUTHENTICATED = 16


class OpError(Exception):
    """Base of runtime errors raised while running a graph."""

    code = UNKNOWN

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
    code = CANCELLED


class UnknownError(OpError):
    code = UNKNOWN


class InvalidArgumentError(OpError):
    code = INVALID_ARGUMENT


class DeadlineExceededError(OpError):
    code = DEADLINE_EXCEEDED


class NotFoundError(OpError):
    code = NOT_FOUND


class AlreadyExistsError(OpError):
    code = ALREADY_EXISTS


class PermissionDeniedError(OpError):
    code = PERMISSION_DENIED


class ResourceExhaustedError(OpError):
    code = RESOURCE_EXHAUSTED


class FailedPreconditionError(OpError):
    code = FAILED_PRECONDITION


class AbortedError(OpError):
    code = ABORTED


class OutOfRangeError(OpError):
    code = OUT_OF_RANGE


class UnimplementedError(OpError):
    code = UNIMPLEMENTED


class InternalError(OpError):
    code = INTERNAL


class UnavailableError(OpError):
    code = UNAVAILABLE


class DataLossError(OpError):
    code = DATA_LOSS


class UnauthenticatedError(OpError):
    code = UNAUTHENTICATED


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


def exception_type_from_error_code(error_code: int) -> type[OpError]:
    """The OpError subclass of a status code (``tf.errors.exception_type_from_error_code``)."""
    try:
        return ERROR_CLASS_BY_CODE[error_code]
    except KeyError:
        raise KeyError(f"{error_code!r} is not an error status code; the codes are 1 (CANCELLED) .. "
                       "16 (UNAUTHENTICATED)") from None


def error_code_from_exception_type(cls: type[OpError]) -> int:
    """The status code of an OpError subclass (``tf.errors.error_code_from_exception_type``)."""
    if not (isinstance(cls, type) and issubclass(cls, OpError)):
        raise KeyError(f"{cls!r} is not an OpError subclass of tf.errors")
    return cls.code
