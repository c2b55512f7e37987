"""A session whose creation fails while a peer is down (a PS restarting) is created again with backoff
that doubles from 0.1 s to at most 1 s, as the master's wait for a task: a worker is back training
within about a second of the peer's return."""

import pytest

import tensorgrid as tf
from tensorgrid.framework import errors
from tensorgrid.train import monitored_session


class FlakyCreator(monitored_session.SessionCreator):
    """Fails ``failures`` times with UnavailableError (the PS is down), then makes a session."""

    def __init__(self, failures):
        self.failures = failures
        self.attempts = 0

    def create_session(self):
        self.attempts += 1
        if self.attempts <= self.failures:
            raise errors.UnavailableError(None, None, "/job:ps/replica:0/task:0 is restarting")
        return tf.Session()


def test_session_creation_retries_back_off_to_at_most_one_second(monkeypatch: pytest.MonkeyPatch) -> None:
    waits = []
    monkeypatch.setattr(monitored_session.time, "sleep", waits.append)
    with tf.Graph().as_default():
        tf.constant(1.0)
        creator = FlakyCreator(failures=8)
        with tf.train.MonitoredSession(session_creator=creator) as session:
            assert session.run(tf.constant(2.0)) == 2.0
    assert creator.attempts == 9
    assert waits == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0, 1.0])
