"""What a user looks at while a job trains: its loss curve in TensorBoard, opened in a real browser.

A short training run writes ``tf.summary.scalar("loss", ...)`` with the runtime's FileWriter;
TensorBoard (the ``tensorboard`` package, run as the runtime image runs it: without TensorFlow)
serves that directory on a free port; its HTTP API must give back the values the run logged,
and its Time Series page, rendered by headless Chromium (Debian's ``chromium``), must draw the
``loss`` card with one point per step at the place its own axes give to the logged value.
TensorBoard draws its charts on a WebGL canvas unless asked for SVG (``?forceSVG=true``, one
of its feature flags), which puts the line into the DOM that ``--dump-dom`` prints.

On failure the page's DOM and a screenshot are kept in ``$TENSORGRID_TEST_ARTIFACTS`` (default
``.cache/test-artifacts/``) and named in the message. Without chromium or tensorboard the test
is skipped, except in CI (``make tools`` installs chromium; the ``[oracle]`` extra tensorboard).
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from typing import Iterator

import numpy as np
import pytest

import tensorgrid as tf

ROOT = pathlib.Path(__file__).resolve().parents[3]
STEPS = 12
RUN = "job"
TAG = "loss"
# TensorBoard picks TensorFlow up when it is importable (it is, here: the oracle); the runtime image
# has none. This module name is TensorBoard's own switch to its TensorFlow-free build (tensorboard/compat).
TENSORBOARD_WITHOUT_TENSORFLOW = (
    "import sys, types; sys.modules['tensorboard.compat.notf'] = types.ModuleType('tensorboard.compat.notf'); "
    "from tensorboard import main; sys.argv[0] = 'tensorboard'; main.run_main()")
NUMBER = r"-?\d+(?:\.\d+)?(?:e-?\d+)?"


def _needed(what: str, found: object, install: str) -> None:
    if found:
        return
    message = f"{what} is not installed ({install})"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must run the TensorBoard browser test: {message}")
    pytest.skip(message)


def train_and_log(logdir: pathlib.Path) -> list[float]:
    """A linear regression trained for STEPS steps, its loss written each step; returns the losses."""
    with tf.Graph().as_default():
        x = tf.constant(np.linspace(-1, 1, 16, dtype=np.float32).reshape(-1, 1))
        w, b = tf.Variable(0.0), tf.Variable(0.0)
        loss = tf.reduce_mean(tf.square(w * x + b - (3.0 * x + 1.0)))
        train_op = tf.train.GradientDescentOptimizer(0.3).minimize(loss)
        tf.summary.scalar(TAG, loss)
        summaries = tf.summary.merge_all()
        losses = []
        with tf.Session() as session:
            session.run(tf.global_variables_initializer())
            writer = tf.summary.FileWriter(str(logdir), session.graph)
            for step in range(STEPS):
                summary, value, _ = session.run([summaries, loss, train_op])
                writer.add_summary(summary, step)
                losses.append(float(value))
            writer.close()
    return losses


@pytest.fixture
def tensorboard_url(tmp_path: pathlib.Path) -> Iterator[tuple[str, pathlib.Path]]:
    """TensorBoard over ``tmp_path/logs`` on a port the system picks; yields (its URL, the log directory)."""
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        _needed("tensorboard", False, "pip install 'tensorgrid[oracle]' or 'tensorgrid[tensorboard]'")
    logs = tmp_path / "logs"
    (logs / RUN).mkdir(parents=True)
    log = open(tmp_path / "tensorboard.log", "w+b")
    process = subprocess.Popen([sys.executable, "-c", TENSORBOARD_WITHOUT_TENSORFLOW, "--logdir", str(logs),
                                "--host", "127.0.0.1", "--port", "0", "--reload_interval", "1"],
                               stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        url = None
        while url is None:
            log.seek(0)
            found = re.search(rb"TensorBoard \S+ at (http://127\.0\.0\.1:\d+/)", log.read())
            url = found.group(1).decode() if found else None
            if url is None and (process.poll() is not None or time.monotonic() > deadline):
                log.seek(0)
                pytest.fail(f"TensorBoard did not start: {log.read().decode(errors='replace')[-2000:]}")
            time.sleep(0.2)
        yield url, logs / RUN
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


def _get_json(url: str) -> object:
    with urllib.request.urlopen(url, timeout=30) as answer:
        return json.load(answer)


def _scalars_when_loaded(url: str, count: int) -> list[list[float]]:
    """The run's points from /data/plugin/scalars/scalars once TensorBoard has read ``count`` of them."""
    query = f"{url}data/plugin/scalars/scalars?run={RUN}&tag={TAG}"
    deadline = time.monotonic() + 60
    while True:
        try:
            points = _get_json(query)
        except urllib.error.HTTPError:  # 400 until the run and tag are loaded
            points = []
        assert isinstance(points, list)
        if len(points) >= count or time.monotonic() > deadline:
            return points
        time.sleep(0.5)


def _chromium(*arguments: str, profile: pathlib.Path) -> subprocess.CompletedProcess[str]:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    assert browser is not None
    return subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                           f"--user-data-dir={profile}", "--window-size=1400,1000", "--virtual-time-budget=15000",
                           *arguments], capture_output=True, text=True, timeout=240)


def _axis_scale(dom: str, axis: str, coordinate: str) -> tuple[float, float]:
    """(offset, pixels per unit) of a chart axis, from the positions of its tick labels."""
    start = dom.index(f'class="axis {axis}"')
    block = dom[start:dom.index("</line-chart-axis>", start)]
    ticks = [(float(value), float(position)) for position, value in re.findall(
        rf'<text[^>]*?\b{coordinate}="({NUMBER})"[^>]*>\s*({NUMBER})\s*</text>', block)]
    assert len(ticks) >= 2, f"the {axis} has fewer than two numeric tick labels: {block[:500]}"
    (v0, p0), (v1, p1) = ticks[0], ticks[-1]
    return p0 - v0 * (p1 - p0) / (v1 - v0), (p1 - p0) / (v1 - v0)


def drawn_lines(dom: str) -> list[list[tuple[float, float]]]:
    """The polylines of the chart's SVG series view (``M x,y L x,y ...``; icons' paths have other commands)."""
    return [[(float(x), float(y)) for x, y in re.findall(rf"({NUMBER}),({NUMBER})", d)]
            for d in re.findall(rf'<path[^>]*\bd="(M{NUMBER},{NUMBER}(?:L{NUMBER},{NUMBER})+)"', dom)]


def test_the_jobs_loss_curve_is_drawn_in_headless_chromium(tensorboard_url: tuple[str, pathlib.Path],
                                                           tmp_path: pathlib.Path) -> None:
    _needed("chromium", shutil.which("chromium") or shutil.which("chromium-browser"),
            "apt-get install chromium; `make tools` installs it")
    url, run_dir = tensorboard_url
    losses = train_and_log(run_dir)
    assert losses[-1] < losses[0] / 10, losses

    points = _scalars_when_loaded(url, STEPS)
    assert [int(step) for _, step, _ in points] == list(range(STEPS))
    assert [value for _, _, value in points] == pytest.approx(losses, rel=1e-6)

    page = f"{url}?forceSVG=true#timeseries"
    result = _chromium("--dump-dom", page, profile=tmp_path / "chromium")
    dom = result.stdout
    try:
        assert result.returncode == 0, result.stderr[-2000:]
        assert f'title="{TAG}"' in dom, "no card for the tag"
        x0, x_scale = _axis_scale(dom, "x-axis", "x")
        y0, y_scale = _axis_scale(dom, "y-axis", "y")
        expected = [(x0 + step * x_scale, y0 + loss * y_scale) for step, loss in enumerate(losses)]
        lines = drawn_lines(dom)
        assert any(len(line) == STEPS and all(abs(a - c) < 0.5 and abs(b - d) < 0.5
                                              for (a, b), (c, d) in zip(line, expected)) for line in lines), \
            f"no line through the logged losses at {expected}; lines drawn: {lines}"
    except AssertionError as failure:
        artifacts = pathlib.Path(os.environ.get("TENSORGRID_TEST_ARTIFACTS", ROOT / ".cache" / "test-artifacts"))
        artifacts.mkdir(parents=True, exist_ok=True)
        (artifacts / "tensorboard-scalars.html").write_text(dom)
        shot = artifacts / "tensorboard-scalars.png"
        _chromium(f"--screenshot={shot}", page, profile=tmp_path / "chromium")
        raise AssertionError(f"{failure}\nthe page's DOM and a screenshot: {artifacts}") from None
