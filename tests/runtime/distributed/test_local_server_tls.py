"""``tf.train.Server.create_local_server()`` works as TensorFlow users call it: with no
certificates given, the single-process server makes a CA of its own, its in-process
sessions run, and another process cannot connect.

Each case runs in a fresh interpreter without ``TENSORGRID_TLS_DIR`` (the suite sets one).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import grpc
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def run_python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("TENSORGRID_TLS_DIR", "TENSORGRID_INSECURE")}
    environ.update(env)
    environ["PYTHONPATH"] = os.pathsep.join([os.path.join(ROOT, "runtime"), environ.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=environ, capture_output=True,
                          text=True, timeout=120)


LOCAL_SERVER = """
    import os, sys
    import tensorgrid as tf
    server = tf.train.Server.create_local_server()
    with tf.Graph().as_default():
        v = tf.Variable(2.0)
        with tf.Session(server.target) as sess:
            sess.run(tf.global_variables_initializer())
            print("value", sess.run(v * 3.0), flush=True)
    from tensorgrid.distributed.rpc.transport import tls
    print("directory", tls.process_directory(), flush=True)
    print("target", server.target, flush=True)
    sys.stdin.readline()  # the test connects from outside meanwhile
    server.stop()
"""


def test_a_local_server_without_certificates_runs_its_sessions_and_refuses_other_processes() -> None:
    environ = {k: v for k, v in os.environ.items() if k not in ("TENSORGRID_TLS_DIR", "TENSORGRID_INSECURE")}
    environ["PYTHONPATH"] = os.pathsep.join([os.path.join(ROOT, "runtime"), environ.get("PYTHONPATH", "")])
    server = subprocess.Popen([sys.executable, "-c", textwrap.dedent(LOCAL_SERVER)], env=environ, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert server.stdout is not None and server.stdin is not None
        lines = [server.stdout.readline().split() for _ in range(3)]
        assert lines[0] == ["value", "6.0"], (lines, server.stderr.read() if server.poll() is not None else "")
        directory, target = lines[1][1], lines[2][1]
        assert os.path.isfile(os.path.join(directory, "tls.key"))
        address = target.removeprefix("grpc://")
        for credentials in (None, grpc.ssl_channel_credentials()):  # plaintext; TLS without the process's CA
            channel = (grpc.insecure_channel(address) if credentials is None
                       else grpc.secure_channel(address, credentials))
            with pytest.raises(grpc.RpcError) as refused:
                channel.unary_unary("/tensorgrid.v1.Worker/GetStatus")(b"", timeout=5)
            channel.close()
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        server.stdin.write("\n")
        server.stdin.flush()
        assert server.wait(timeout=60) == 0
        assert not os.path.exists(os.path.dirname(directory))  # the CA's files go with the process
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


def test_insecure_still_means_no_tls() -> None:
    done = run_python("""
        import tensorgrid as tf
        from tensorgrid.distributed.rpc.transport import tls
        server = tf.train.Server.create_local_server()
        print("credentials", tls.from_env())
        server.stop()
        """, TENSORGRID_INSECURE="1")
    assert done.returncode == 0 and "credentials None" in done.stdout, done.stderr[-2000:]
