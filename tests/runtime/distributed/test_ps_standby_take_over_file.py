"""``tensorgrid ps-standby --take-over-file``: the operator's way to tell a standby on Kubernetes to
take over its PS (the annotation ``tensorgrid.io/take-over`` in a downward API volume). The file
naming another task is refused (said once) and the standby stays one; naming its PS, it takes over
at the PS's address as on SIGUSR1, and stops as that PS on SIGTERM."""

import signal
import socket
import sys
import time

import pytest

from cluster_processes import TaskProcess
from tensorgrid.distributed.rpc import ports

pytestmark = [pytest.mark.timeout(120)]
PS0 = "/job:ps/replica:0/task:0"


def _listening(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, int(port))) == 0


def test_the_file_naming_its_ps_makes_the_standby_take_over(tmp_path):
    standby_address, ps_address = (f"localhost:{p}" for p in ports.free_ports(2))
    told = tmp_path / "take-over" / "task"  # the volume's file: not there until the kubelet writes it
    standby = TaskProcess("ps-standby", 0, standby_address, {"ps": [ps_address]}, str(tmp_path / "standby.log"),
                          {"TENSORGRID_PS_STANDBY_FOR": PS0})
    standby.start(wait=False, command=[sys.executable, "-m", "tensorgrid", "ps-standby", "--address",
                                       standby_address, "--take-over-file", str(told)])
    try:
        standby.wait_for_output(f"Standby for {PS0}", timeout=60)
        told.parent.mkdir()
        told.write_text("")  # the annotation absent: nothing happens
        told.write_text("/job:ps/replica:0/task:1")
        standby.wait_for_output("is told to take over '/job:ps/replica:0/task:1'", timeout=30)
        time.sleep(4 * 0.25)
        assert standby.process.poll() is None and not _listening(ps_address)
        assert standby.log().count("is told to take over") == 1, standby.log()  # said once, not at every read
        told.write_text(PS0 + "\n")
        standby.wait_for_output(f"a standby took over at {ps_address}", timeout=30)
        deadline = time.monotonic() + 30
        while not _listening(ps_address) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _listening(ps_address)
        standby.process.send_signal(signal.SIGTERM)
        assert standby.wait(timeout=30) == 128 + signal.SIGTERM
    finally:
        standby.kill()
