"""Default logging: tensorgrid's INFO lines (servers starting, waiting for peers, recovery,
checkpoints, training progress) reach stderr unless the program configures logging itself.

A PS process that only calls ``server.join()`` should still say what it is doing, as
TensorFlow's do; ``TENSORGRID_LOG_LEVEL`` (DEBUG, INFO, WARNING, ERROR) sets the level.
"""

from __future__ import annotations

import logging
import os


def configure_default() -> None:
    logger = logging.getLogger("tensorgrid")
    if logger.handlers or logging.getLogger().handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname).1s %(name)s: %(message)s", "%H:%M:%S"))
    logger.addHandler(handler)
    logger.setLevel(os.environ.get("TENSORGRID_LOG_LEVEL", "INFO").upper())
    logger.propagate = False
