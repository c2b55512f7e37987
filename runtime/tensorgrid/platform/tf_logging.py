"""``tf.logging``: TF1's logging functions, on Python's ``logging`` and tensorgrid's logger.

TensorFlow logs through the ``tensorflow`` logger; a TF1 program's ``tf.logging.info`` here
goes to the ``tensorgrid`` logger, so the program's lines and the runtime's come out together
and ``set_verbosity`` sets the level of both, as it does in TensorFlow. The levels are
Python's (``tf.logging.INFO == logging.INFO``). One difference: the default verbosity is
INFO (``log_setup``: a PS process says what it is doing), TensorFlow's is WARN.
"""

from __future__ import annotations

import logging
import sys
import threading
from typing import Any

DEBUG = logging.DEBUG
INFO = logging.INFO
WARN = logging.WARN
ERROR = logging.ERROR
FATAL = logging.FATAL

_LOGGER = logging.getLogger("tensorgrid")
_counts_lock = threading.Lock()
# How often each call site of log_every_n / log_first_n has been reached, by (file, line).
_call_counts: dict[tuple[str, int], int] = {}


def get_verbosity() -> int:
    """The level below which messages are dropped (the logger's effective level)."""
    return _LOGGER.getEffectiveLevel()


def set_verbosity(v: int) -> None:
    _LOGGER.setLevel(v)


def log(level: int, msg: Any, *args: Any, **kwargs: Any) -> None:
    _LOGGER.log(level, msg, *args, stacklevel=2, **kwargs)


def debug(msg: Any, *args: Any, **kwargs: Any) -> None:
    _LOGGER.debug(msg, *args, stacklevel=2, **kwargs)


def info(msg: Any, *args: Any, **kwargs: Any) -> None:
    _LOGGER.info(msg, *args, stacklevel=2, **kwargs)


def warning(msg: Any, *args: Any, **kwargs: Any) -> None:
    _LOGGER.warning(msg, *args, stacklevel=2, **kwargs)


warn = warning


def error(msg: Any, *args: Any, **kwargs: Any) -> None:
    _LOGGER.error(msg, *args, stacklevel=2, **kwargs)


def fatal(msg: Any, *args: Any, **kwargs: Any) -> None:
    """Logs at FATAL; as in TensorFlow, the program goes on."""
    _LOGGER.critical(msg, *args, stacklevel=2, **kwargs)


def vlog(level: int, msg: Any, *args: Any, **kwargs: Any) -> None:
    _LOGGER.log(level, msg, *args, stacklevel=2, **kwargs)


def log_if(level: int, msg: Any, condition: bool, *args: Any) -> None:
    if condition:
        _LOGGER.log(level, msg, *args, stacklevel=2)


def _next_count_at_caller() -> int:
    caller = sys._getframe(2)
    site = (caller.f_code.co_filename, caller.f_lineno)
    with _counts_lock:
        count = _call_counts.get(site, 0)
        _call_counts[site] = count + 1
    return count


def log_every_n(level: int, msg: Any, n: int, *args: Any) -> None:
    """Logs the 1st, (n+1)th, (2n+1)th... time this line of the program is reached."""
    if _next_count_at_caller() % n == 0:
        _LOGGER.log(level, msg, *args, stacklevel=2)


def log_first_n(level: int, msg: Any, n: int, *args: Any) -> None:
    """Logs the first n times this line of the program is reached."""
    if _next_count_at_caller() < n:
        _LOGGER.log(level, msg, *args, stacklevel=2)


def flush() -> None:
    for handler in _LOGGER.handlers:
        handler.flush()
