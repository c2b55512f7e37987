"""``tf.summary.image``, ``audio`` and ``text`` against TensorFlow's ``tf.compat.v1``.

Text and audio summaries must be TensorFlow's bytes. Image summaries hold the same
fields and tags, and PNGs that decode (with TensorFlow's own decoder) to TensorFlow's
pixels: the compressed stream itself is libpng's in TensorFlow and zlib's here.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorgrid
from tensorgrid.framework import errors

RNG = np.random.default_rng(7)
IMAGES = {
    "uint8_rgb": RNG.integers(0, 256, (3, 5, 4, 3), dtype=np.uint8),
    "uint8_gray": RNG.integers(0, 256, (2, 3, 6, 1), dtype=np.uint8),
    "float_positive_rgba": RNG.random((2, 4, 4, 4), dtype=np.float32) * 3,
    "float_signed_gray": RNG.standard_normal((4, 2, 3, 1)).astype(np.float32),
    "float_zero": np.zeros((1, 2, 2, 3), np.float32),
    "float_with_nan": np.array([[[[0.5, np.nan, 0.2]], [[-1.0, 0.25, 1.0]]]], np.float32),
}
AUDIO = {
    "stereo": (np.linspace(-1.2, 1.2, 2 * 7 * 2, dtype=np.float32).reshape(2, 7, 2), 8000.0),
    "mono_2d": (RNG.uniform(-1, 1, (4, 9)).astype(np.float32), 22050.0),
    "halves": (np.array([[0.5 / 32768, -0.5 / 32768, 1.5 / 32768, -2.5 / 32768]], np.float32), 16000.0),
}
TEXTS = [np.array("one line"), np.array(["hello", "wörld"]), np.array([["a", "b"], ["c", ""]]),
         np.array([], dtype=object).reshape(0, 2)]


def image_summaries(tf: Any, images: np.ndarray, max_outputs: int) -> bytes:
    with tf.Graph().as_default():
        x = tf.placeholder(tf.uint8 if images.dtype == np.uint8 else tf.float32, [None] * 4)
        with tf.name_scope("vis"):
            summary = tf.summary.image("picture", x, max_outputs=max_outputs)
        with tf.Session() as sess:
            return sess.run(summary, {x: images})


def decoded(tf1: Any, serialized: bytes) -> list[tuple[str, int, int, int, np.ndarray]]:
    """Each image value of a Summary: tag, height, width, colorspace, pixels (TF's PNG decoder)."""
    out = []
    for value in tf1.Summary.FromString(serialized).value:
        image = value.image
        pixels = tf1.image.decode_png(image.encoded_image_string, channels=image.colorspace)
        with tf1.Session() as sess:
            out.append((value.tag, image.height, image.width, image.colorspace, sess.run(pixels)))
    return out


@pytest.mark.parametrize("max_outputs", [1, 2, 3])
@pytest.mark.parametrize("kind", sorted(IMAGES))
def test_image_summary_decodes_to_tensorflows_pixels(tf1: Any, kind: str, max_outputs: int) -> None:
    ours = decoded(tf1, image_summaries(tensorgrid, IMAGES[kind], max_outputs))
    theirs = decoded(tf1, image_summaries(tf1, IMAGES[kind], max_outputs))
    assert [value[:4] for value in ours] == [value[:4] for value in theirs]
    for (tag, *_, pixels), (_, *_, expected) in zip(ours, theirs):
        np.testing.assert_array_equal(pixels, expected, err_msg=tag)


def audio_summary(tf: Any, samples: np.ndarray, rate: float, max_outputs: int) -> bytes:
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None] * samples.ndim)
        summary = tf.summary.audio("sound", x, rate, max_outputs=max_outputs)
        with tf.Session() as sess:
            return sess.run(summary, {x: samples})


@pytest.mark.parametrize("max_outputs", [1, 3])
@pytest.mark.parametrize("kind", sorted(AUDIO))
def test_audio_summary_gives_tensorflows_bytes(tf1: Any, kind: str, max_outputs: int) -> None:
    samples, rate = AUDIO[kind]
    assert audio_summary(tensorgrid, samples, rate, max_outputs) == audio_summary(tf1, samples, rate, max_outputs)


def text_summaries(tf: Any) -> list[bytes]:
    with tf.Graph().as_default():
        x = tf.placeholder(tf.string)
        with tf.name_scope("notes"):
            summary = tf.summary.text("log", x)
        merged = tf.summary.merge([summary, tf.summary.text("fixed", tf.constant("constant text"))])
        with tf.Session() as sess:
            return [sess.run(merged, {x: text}) for text in TEXTS]


def test_text_summary_gives_tensorflows_bytes(tf1: Any) -> None:
    assert text_summaries(tensorgrid) == text_summaries(tf1)


def test_media_summaries_join_merge_all_and_read_back_from_an_event_file(tf1: Any, tmp_path: Any) -> None:
    tf = tensorgrid
    with tf.Graph().as_default():
        tf.summary.image("img", tf.constant(IMAGES["uint8_rgb"]))
        tf.summary.audio("snd", tf.constant(AUDIO["stereo"][0]), 8000)
        tf.summary.text("txt", tf.constant(["x"]))
        merged = tf.summary.merge_all()
        with tf.Session() as sess, tf.summary.FileWriter(str(tmp_path)) as writer:
            writer.add_summary(sess.run(merged), global_step=3)
            path = writer.event_file_path
    events = [e for e in tf1.train.summary_iterator(path) if e.HasField("summary")]
    assert [(e.step, [v.tag for v in e.summary.value]) for e in events] == [
        (3, ["img/image/0", "img/image/1", "img/image/2", "snd/audio/0", "snd/audio/1", "txt"])]


def run_one(summary: Any, feed: Any = None) -> bytes:
    with tensorgrid.Session() as sess:
        return sess.run(summary, feed)


def test_bad_summary_inputs_name_the_value_and_what_is_valid() -> None:
    tf = tensorgrid
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match=r"4-D .* 1, 3 or 4 channels, got .* shape \(2, 3, 3, 2\)"):
            tf.summary.image("bad", tf.zeros([2, 3, 3, 2]))
        with pytest.raises(ValueError, match="max_outputs must be a positive integer, got 0"):
            tf.summary.image("bad", tf.zeros([1, 2, 2, 1]), max_outputs=0)
        with pytest.raises(ValueError, match="string tensor, got .* float32"):
            tf.summary.text("bad", tf.zeros([2]))
        with pytest.raises(ValueError, match=r"\[batch, frames\] tensor, got .* shape \(4,\)"):
            tf.summary.audio("bad", tf.zeros([4]), 8000)
        fed = tf.placeholder(tf.float32)
        with pytest.raises(errors.InvalidArgumentError, match=r"1, 3 or 4 channels, got shape \[1, 2, 2, 5\]"):
            run_one(tf.summary.image("fed", fed), {fed: np.zeros((1, 2, 2, 5), np.float32)})
        with pytest.raises(errors.InvalidArgumentError, match="sample_rate must be > 0, got -1.0"):
            run_one(tf.summary.audio("rate", tf.zeros([1, 4]), fed), {fed: -1.0})
