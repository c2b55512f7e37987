"""Static shapes with unknown dimensions (``TensorShape``, ``Dimension``).

Shapes are inferred while a graph is built, so that errors such as a matmul with
mismatched inner dimensions are reported at construction, naming both shapes.
"""

from __future__ import annotations

from typing import Any, Iterator, Optional, Sequence


class Dimension:
    """One dimension, possibly unknown (``value is None``), as in TF1."""

    __slots__ = ("_value",)

    def __init__(self, value: Any) -> None:
        if isinstance(value, Dimension):
            value = value.value
        if value is not None:
            try:
                value = int(value.__index__())
            except AttributeError:
                raise TypeError(f"Dimension value must be an integer or None, got {value!r}") from None
            if value < 0:
                raise ValueError(f"Dimension {value} must be >= 0")
        self._value: Optional[int] = value

    @property
    def value(self) -> Optional[int]:
        return self._value

    def __int__(self) -> int:
        if self._value is None:
            raise ValueError("Cannot convert an unknown Dimension to an int")
        return self._value

    __index__ = __int__

    def __repr__(self) -> str:
        return f"Dimension({self._value})"

    def __str__(self) -> str:
        return "?" if self._value is None else str(self._value)

    def __eq__(self, other: object) -> Any:
        other_value = other.value if isinstance(other, Dimension) else other
        if self._value is None or other_value is None:
            return None
        return self._value == other_value

    def __ne__(self, other: object) -> Any:
        eq = self.__eq__(other)
        return None if eq is None else not eq

    def __hash__(self) -> int:
        return hash(self._value)

    def is_compatible_with(self, other: Any) -> bool:
        other = as_dimension(other)
        return self._value is None or other.value is None or self._value == other.value

    def merge_with(self, other: Any) -> "Dimension":
        other = as_dimension(other)
        if not self.is_compatible_with(other):
            raise ValueError(f"Dimensions {self} and {other} are not compatible")
        return Dimension(self._value if self._value is not None else other.value)

    def _arith(self, other: Any, fn: Any) -> "Dimension":
        other = as_dimension(other)
        if self._value is None or other.value is None:
            return Dimension(None)
        return Dimension(fn(self._value, other.value))

    def __add__(self, other: Any) -> "Dimension":
        return self._arith(other, lambda a, b: a + b)

    def __mul__(self, other: Any) -> "Dimension":
        return self._arith(other, lambda a, b: a * b)

    def __floordiv__(self, other: Any) -> "Dimension":
        return self._arith(other, lambda a, b: a // b)

    __radd__ = __add__
    __rmul__ = __mul__


def as_dimension(value: Any) -> Dimension:
    return value if isinstance(value, Dimension) else Dimension(value)


class TensorShape:
    """A shape of known or unknown rank whose dimensions may be unknown."""

    __slots__ = ("_dims",)

    def __init__(self, dims: Any) -> None:
        if dims is None:
            self._dims: Optional[tuple[Dimension, ...]] = None
        elif isinstance(dims, TensorShape):
            self._dims = dims._dims
        else:
            try:
                iterator = iter(dims)
            except TypeError:
                iterator = iter([dims])
            self._dims = tuple(as_dimension(d) for d in iterator)

    @property
    def dims(self) -> Optional[list[Dimension]]:
        return None if self._dims is None else list(self._dims)

    @property
    def ndims(self) -> Optional[int]:
        return None if self._dims is None else len(self._dims)

    rank = ndims

    def __len__(self) -> int:
        if self._dims is None:
            raise ValueError("Cannot take the length of a shape with unknown rank")
        return len(self._dims)

    def __iter__(self) -> Iterator[Dimension]:
        if self._dims is None:
            raise ValueError("Cannot iterate over a shape with unknown rank")
        return iter(self._dims)

    def __getitem__(self, key: Any) -> Any:
        if self._dims is None:
            return TensorShape(None) if isinstance(key, slice) else Dimension(None)
        if isinstance(key, slice):
            return TensorShape(self._dims[key])
        return self._dims[key]

    def as_list(self) -> list[Optional[int]]:
        if self._dims is None:
            raise ValueError("as_list() is not defined on an unknown TensorShape")
        return [d.value for d in self._dims]

    def as_tuple_or_none(self) -> Optional[tuple[Optional[int], ...]]:
        return None if self._dims is None else tuple(d.value for d in self._dims)

    def is_fully_defined(self) -> bool:
        return self._dims is not None and all(d.value is not None for d in self._dims)

    def num_elements(self) -> Optional[int]:
        if not self.is_fully_defined():
            return None
        n = 1
        for d in self._dims or ():
            n *= d.value  # type: ignore[operator]
        return n

    def is_compatible_with(self, other: Any) -> bool:
        other = as_shape(other)
        if self._dims is None or other._dims is None:
            return True
        if len(self._dims) != len(other._dims):
            return False
        return all(a.is_compatible_with(b) for a, b in zip(self._dims, other._dims))

    def merge_with(self, other: Any) -> "TensorShape":
        other = as_shape(other)
        if self._dims is None:
            return as_shape(other)
        if other._dims is None:
            return self
        if not self.is_compatible_with(other):
            raise ValueError(f"Shapes {self} and {other} are not compatible")
        return TensorShape([a.merge_with(b) for a, b in zip(self._dims, other._dims)])

    def assert_is_compatible_with(self, other: Any) -> None:
        if not self.is_compatible_with(other):
            raise ValueError(f"Shapes {self} and {as_shape(other)} are incompatible")

    def concatenate(self, other: Any) -> "TensorShape":
        other = as_shape(other)
        if self._dims is None or other._dims is None:
            return TensorShape(None)
        return TensorShape(self._dims + other._dims)

    def with_rank(self, rank: int) -> "TensorShape":
        if self._dims is None:
            return TensorShape([None] * rank)
        if len(self._dims) != rank:
            raise ValueError(f"Shape {self} must have rank {rank}")
        return self

    def __eq__(self, other: object) -> bool:
        try:
            other_shape = as_shape(other)
        except (TypeError, ValueError):
            return NotImplemented
        return self.as_tuple_or_none() == other_shape.as_tuple_or_none()

    def __hash__(self) -> int:
        return hash(self.as_tuple_or_none())

    def __repr__(self) -> str:
        return "TensorShape(None)" if self._dims is None else f"TensorShape({[d.value for d in self._dims]})"

    def __str__(self) -> str:
        if self._dims is None:
            return "<unknown>"
        inner = ", ".join(str(d) for d in self._dims)
        return f"({inner},)" if len(self._dims) == 1 else f"({inner})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (TensorShape, (self.as_tuple_or_none(),))


def as_shape(shape: Any) -> TensorShape:
    return shape if isinstance(shape, TensorShape) else TensorShape(shape)


def unknown_shape(rank: Optional[int] = None) -> TensorShape:
    return TensorShape(None if rank is None else [None] * rank)


def broadcast_shapes(a: TensorShape, b: TensorShape, context: str) -> TensorShape:
    """Static numpy-style broadcasting; raises a ValueError naming both shapes."""
    if a.ndims is None or b.ndims is None:
        return TensorShape(None)
    da, db = a.as_list(), b.as_list()
    rank = max(len(da), len(db))
    ones: list[Optional[int]] = [1] * rank
    da = ones[: rank - len(da)] + da
    db = ones[: rank - len(db)] + db
    out: list[Optional[int]] = []
    for x, y in zip(da, db):
        if x == 1:
            out.append(y)
        elif y == 1:
            out.append(x)
        elif x is None or y is None:
            out.append(x if y is None else y)
        elif x == y:
            out.append(x)
        else:
            raise ValueError(f"{context}: shapes {a} and {b} cannot be broadcast together")
    return TensorShape(out)


def shape_from_sequence(values: Sequence[Any]) -> TensorShape:
    return TensorShape(list(values))
