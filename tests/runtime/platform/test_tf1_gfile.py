"""``tf.gfile`` and ``tf.io.gfile`` on local paths, with TensorFlow 2.21's as the oracle: the
same steps on both give the same results, and fail with the same error class and code.
"""

from __future__ import annotations

import pathlib
from typing import Any, Callable

import tensorgrid


def outcome(fn: Callable[[], Any]) -> Any:
    """What a call gives: its value, or the class and code of the error it raises."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - the error is the result
        return type(e).__name__, getattr(e, "error_code", None)


def read(g: Any, path: str, mode: str = "r") -> Any:
    with g.GFile(path, mode) as f:
        return f.read()


def write(g: Any, path: str, content: Any, mode: str = "w") -> None:
    with g.GFile(path, mode) as f:
        f.write(content)


def file_steps(g: Any, d: str) -> list[Any]:
    """TF1's ``tf.gfile``: files, directories and their errors."""
    def seek_and_tell() -> Any:
        with g.GFile(d + "/a.txt") as f:
            f.seek(6)
            return f.tell(), f.read(), f.size()

    def reopened_after_close() -> Any:
        f = g.GFile(d + "/a.txt")
        f.close()
        return f.read()

    return [outcome(step) for step in [
        lambda: g.GFile(d + "/missing") is not None,
        lambda: read(g, d + "/missing"),
        lambda: write(g, d + "/no_dir/x", "a"),
        lambda: write(g, d + "/a.txt", "hello\nworld\n"),
        lambda: read(g, d + "/a.txt"),
        lambda: read(g, d + "/a.txt", "rb"),
        lambda: g.GFile(d + "/a.txt").readlines(),
        lambda: list(g.GFile(d + "/a.txt", "rb")),
        lambda: g.GFile(d + "/a.txt").read(3),
        seek_and_tell,
        reopened_after_close,
        lambda: g.GFile(d + "/a.txt", "x"),
        lambda: g.GFile(d + "/a.txt", "r").write("x"),
        lambda: g.GFile(d + "/b.txt", "w").read(),
        lambda: write(g, d + "/a.txt", b"more", "a"),
        lambda: write(g, d + "/bytes", "text into wb", "wb"),
        lambda: read(g, d + "/bytes", "rb"),
        lambda: g.FastGFile(d + "/a.txt", "rb").read(),
        lambda: g.Open(d + "/a.txt").read(),
        lambda: (g.Exists(d + "/a.txt"), g.Exists(d + "/nope"), g.Exists(pathlib.Path(d)), g.Exists(d.encode())),
        lambda: g.MakeDirs(d + "/x/y/z"),
        lambda: g.MakeDirs(d + "/x/y/z"),
        lambda: g.MakeDirs(d + "/a.txt/q"),
        lambda: g.MkDir(d + "/x"),
        lambda: g.MkDir(d + "/p/q"),
        lambda: g.MkDir(d + "/m"),
        lambda: sorted(p[len(d):] for p in g.Glob(d + "/*")),
        lambda: g.Glob(d + "/zz*"),
        lambda: sorted(g.ListDirectory(d)),
        lambda: g.ListDirectory(d + "/nope"),
        lambda: g.ListDirectory(d + "/a.txt"),
        lambda: (g.IsDirectory(d), g.IsDirectory(d + "/a.txt"), g.IsDirectory(d + "/nope")),
        lambda: g.Copy(d + "/a.txt", d + "/c.txt"),
        lambda: g.Copy(d + "/a.txt", d + "/c.txt"),
        lambda: g.Copy(d + "/a.txt", d + "/c.txt", overwrite=True),
        lambda: g.Copy(d + "/nope", d + "/c2.txt"),
        lambda: g.Rename(d + "/c.txt", d + "/a.txt"),
        lambda: g.Rename(d + "/c.txt", d + "/r.txt"),
        lambda: g.Rename(d + "/nope", d + "/r2.txt"),
        lambda: g.Rename(d + "/r.txt", d + "/a.txt", overwrite=True),
        lambda: read(g, d + "/a.txt"),
        lambda: g.Remove(d + "/a.txt"),
        lambda: g.Remove(d + "/a.txt"),
        lambda: g.Remove(d + "/m"),
        lambda: g.DeleteRecursively(d + "/x"),
        lambda: g.DeleteRecursively(d + "/x"),
        lambda: g.GFile(d + "/m").read(),
        lambda: (g.Stat(d + "/bytes").length, g.Stat(d + "/bytes").is_directory, g.Stat(d + "/m").is_directory),
        lambda: g.Stat(d + "/nope"),
    ]]


def walk_steps(g: Any, d: str) -> list[Any]:
    """Walking a tree, with TF1's and TensorFlow 2's names."""
    g.MakeDirs(d + "/w/a/b")
    write(g, d + "/w/f1", "1")
    write(g, d + "/w/a/f2", "22")

    def tree(walk: Any) -> Any:
        return [(top[len(d):], sorted(dirs), sorted(files)) for top, dirs, files in walk]

    return [outcome(step) for step in [
        lambda: tree(g.Walk(d + "/w")),
        lambda: tree(g.Walk(d + "/w", in_order=False)),
        lambda: tree(g.Walk(d + "/nope")),
        lambda: g.Remove(d + "/w"),
    ]]


def io_gfile_steps(g: Any, d: str) -> list[Any]:
    """TensorFlow 2's ``tf.io.gfile`` names."""
    g.makedirs(d + "/w/a")
    write(g, d + "/w/f1", "1")
    return [outcome(step) for step in [
        lambda: (g.exists(d + "/w"), g.isdir(d + "/w/f1"), sorted(g.listdir(d + "/w/"))),
        lambda: [(top[len(d):], dirs, files) for top, dirs, files in g.walk(d + "/w", topdown=False)],
        lambda: sorted(p[len(d):] for p in g.glob([d + "/w/f*", d + "/w/a*"])),
        lambda: g.copy(d + "/w/f1", d + "/w/f2"),
        lambda: g.rename(d + "/w/f2", d + "/w/f1"),
        lambda: g.mkdir(d + "/w/a/b"),
        lambda: g.join("a", "b", "c"),
        lambda: g.stat(d + "/w/f1").length,
        lambda: g.remove(d + "/w/f1"),
        lambda: g.rmtree(d + "/w"),
        lambda: g.exists(d + "/w"),
        lambda: g.GFile(d + "/w/f1").read(),
    ]]


def test_tf_gfile_as_tensorflow(tf1: Any, tmp_path: pathlib.Path) -> None:
    (tmp_path / "tensorgrid").mkdir()
    (tmp_path / "tensorflow").mkdir()
    ours = file_steps(tensorgrid.gfile, str(tmp_path / "tensorgrid"))
    theirs = file_steps(tf1.gfile, str(tmp_path / "tensorflow"))
    assert ours == theirs


def test_walk_as_tensorflow(tf1: Any, tmp_path: pathlib.Path) -> None:
    assert walk_steps(tensorgrid.gfile, str(tmp_path / "tensorgrid")) == walk_steps(tf1.gfile, str(tmp_path / "tf"))


def test_tf_io_gfile_as_tensorflow(tf1: Any, tmp_path: pathlib.Path) -> None:
    ours = io_gfile_steps(tensorgrid.io.gfile, str(tmp_path / "tensorgrid"))
    assert ours == io_gfile_steps(tf1.io.gfile, str(tmp_path / "tensorflow"))


def test_a_missing_file_is_not_found_with_the_path_in_the_message(tmp_path: pathlib.Path) -> None:
    path = str(tmp_path / "missing")
    try:
        tensorgrid.gfile.GFile(path).read()
    except tensorgrid.errors.NotFoundError as e:
        assert e.message == f"{path}; No such file or directory"
    else:
        raise AssertionError("reading a missing file did not fail")
