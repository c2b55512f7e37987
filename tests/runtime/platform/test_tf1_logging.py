"""``tf.logging``, with TensorFlow 2.21's as the oracle: the same levels, the same verbosity
after ``set_verbosity``, and the same messages kept by each function, ``log_every_n`` and
``log_first_n`` counting per line of the program.
"""

from __future__ import annotations

import logging
from typing import Any, Iterator

import pytest

import tensorgrid


class Records(logging.Handler):
    """Keeps the (level, message) of every record that reaches it."""

    def __init__(self) -> None:
        super().__init__()
        self.kept: list[tuple[int, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.kept.append((record.levelno, record.getMessage()))


@pytest.fixture(params=["tensorgrid", pytest.param("tensorflow", marks=pytest.mark.oracle)])
def lib(request: pytest.FixtureRequest) -> Any:
    return tensorgrid if request.param == "tensorgrid" else request.getfixturevalue("tf1")


@pytest.fixture
def records(request: pytest.FixtureRequest) -> Iterator[Records]:
    """The records of the library's logger, its verbosity restored afterwards."""
    lib = request.getfixturevalue("lib") if "lib" in request.fixturenames else tensorgrid
    logger = logging.getLogger("tensorgrid" if lib is tensorgrid else "tensorflow")
    handler = Records()
    verbosity = lib.logging.get_verbosity()
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        lib.logging.set_verbosity(verbosity)


def test_levels_are_tensorflows(tf1: Any) -> None:
    for name in ("DEBUG", "INFO", "WARN", "ERROR", "FATAL"):
        assert getattr(tensorgrid.logging, name) == getattr(tf1.logging, name)


def test_each_function_logs_at_its_level_above_the_verbosity(lib: Any, records: Records) -> None:
    lib.logging.set_verbosity(lib.logging.INFO)
    assert lib.logging.get_verbosity() == lib.logging.INFO
    lib.logging.debug("dropped %d", 1)
    lib.logging.info("info %d", 2)
    lib.logging.warn("warn")
    lib.logging.warning("warning")
    lib.logging.error("error")
    lib.logging.fatal("fatal, and the program goes on")
    lib.logging.log(lib.logging.ERROR, "log %s", "x")
    lib.logging.set_verbosity(lib.logging.ERROR)
    lib.logging.info("dropped too")
    assert records.kept == [(20, "info 2"), (30, "warn"), (30, "warning"), (40, "error"),
                            (50, "fatal, and the program goes on"), (40, "log x")]


EVERY_N = """
for i in range(7):
    tf.logging.log_every_n(tf.logging.INFO, "every %d", 3, i)
"""
FIRST_N = """
for i in range(4):
    tf.logging.log_first_n(tf.logging.WARN, "first %d", 2, i)
"""


def test_every_n_and_first_n_as_tensorflow(lib: Any, records: Records) -> None:
    """Loops of a program, each compiled and run apart, as TensorFlow keys its counts on the
    first frame outside the caller's file (here: the line that runs the loop)."""
    lib.logging.set_verbosity(lib.logging.INFO)
    exec(compile(EVERY_N, "<a program's loop>", "exec"), {"tf": lib})
    exec(compile(FIRST_N, "<another loop>", "exec"), {"tf": lib})
    assert records.kept == [(20, "every 0"), (20, "every 3"), (20, "every 6"), (30, "first 0"), (30, "first 1")]


def test_every_n_and_first_n_count_per_line(records: Records) -> None:
    """Two such calls in one function count apart here. TensorFlow 2.21 counts them together
    (its count is per frame outside the caller's file, not per line): a deliberate difference."""
    tensorgrid.logging.set_verbosity(tensorgrid.logging.INFO)
    for i in range(7):
        tensorgrid.logging.log_every_n(tensorgrid.logging.INFO, "every %d", 3, i)
        tensorgrid.logging.log_first_n(tensorgrid.logging.WARN, "first %d", 2, i)
    assert records.kept == [(20, "every 0"), (30, "first 0"), (30, "first 1"), (20, "every 3"), (20, "every 6")]
