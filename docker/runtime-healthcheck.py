"""HEALTHCHECK of the runtime image: does this task's server accept connections?

Reads TF_CONFIG (the task and its cluster) and connects to the port of this task's
own address on the loopback interface. Healthy (exit 0) when it connects, or when
there is nothing to check: no TF_CONFIG (a program or `tensorgrid local`), or a task
that is not in the cluster (an evaluator). Standard library only: the image has no
curl or netcat.
"""

import json
import os
import socket
import sys


def own_port(tf_config: str) -> "int | None":
    config = json.loads(tf_config)
    task = config.get("task") or {}
    addresses = (config.get("cluster") or {}).get(task.get("type"), [])
    index = int(task.get("index", 0))
    if index >= len(addresses):
        return None
    return int(str(addresses[index]).rsplit(":", 1)[1])


def main() -> int:
    tf_config = os.environ.get("TF_CONFIG")
    if not tf_config:
        return 0
    try:
        port = own_port(tf_config)
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as e:
        print(f"TF_CONFIG is not usable: {e}", file=sys.stderr)
        return 1
    if port is None:
        return 0
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=3):
            return 0
    except OSError as e:
        print(f"nothing accepts connections on port {port}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
