"""``tf.gfile`` and ``tf.io.gfile``: TensorFlow's file API, for local paths.

TF1 programs read data and write checkpoints and logs through ``tf.gfile`` (``GFile``,
``Exists``, ``MakeDirs``, ``Glob``...), and newer ones through ``tf.io.gfile`` (the same
functions under lower-case names). Both are here on Python's file functions, failing with
the error classes TensorFlow raises (a missing file is ``NotFoundError``, a directory where a
file is expected ``FailedPreconditionError``), so programs that catch them keep working.
Other file systems (``gs://``, ``hdfs://``) are not provided: their paths fail as local
paths that do not exist.
"""

from __future__ import annotations

import errno
import glob as glob_lib
import os
import shutil
import types
from typing import IO, Any, Iterator, NamedTuple, Optional, Sequence, Union

from tensorgrid.framework import errors

Path = Union[str, bytes, "os.PathLike[Any]"]

_MODES = ("r", "w", "a", "r+", "w+", "a+")


def _path(path: Path) -> str:
    return os.fsdecode(os.fspath(path))


def _as_bytes(data: Any) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else bytes(data)


def _error(e: OSError, path: str) -> errors.OpError:
    """TensorFlow's error for a failed file operation on ``path``, with its message."""
    message = f"{path}; {os.strerror(e.errno) if e.errno else e}"
    if e.errno == errno.ENOENT:
        return errors.NotFoundError(None, None, message)
    if e.errno == errno.EEXIST:
        return errors.AlreadyExistsError(None, None, message)
    if e.errno in (errno.EACCES, errno.EPERM):
        return errors.PermissionDeniedError(None, None, message)
    if e.errno in (errno.EISDIR, errno.ENOTDIR, errno.ENOTEMPTY):
        return errors.FailedPreconditionError(None, None, message)
    return errors.UnknownError(None, None, message)


class GFile:
    """A file opened lazily, as TensorFlow's: a missing file fails at the first read, not
    here. Mode ``r``/``w``/``a`` (with ``+``) reads and writes ``str``; with ``b``, bytes.
    Lines end at ``\\n`` only, and text is UTF-8, in both cases as in TensorFlow."""

    def __init__(self, name: Path, mode: str = "r") -> None:
        self.name = _path(name)
        self.mode = mode
        self._binary = "b" in mode
        if mode.replace("b", "") not in _MODES:
            raise errors.InvalidArgumentError(None, None, "mode is not 'r' or 'w' or 'a' or 'r+' or 'w+' or 'a+'")
        self._readable = "r" in mode or "+" in mode
        self._writable = "r" not in mode or "+" in mode
        self._file: Optional[IO[bytes]] = None

    def _open(self) -> IO[bytes]:
        if self._file is None:
            try:
                self._file = open(self.name, self.mode.replace("b", "") + "b")
            except OSError as e:
                raise _error(e, self.name) from None
        return self._file

    def _reader(self) -> IO[bytes]:
        if not self._readable:
            raise errors.PermissionDeniedError(None, None, "File isn't open for reading")
        return self._open()

    def _writer(self) -> IO[bytes]:
        if not self._writable:
            raise errors.PermissionDeniedError(None, None, "File isn't open for writing")
        return self._open()

    def _decoded(self, data: bytes) -> Union[str, bytes]:
        return data if self._binary else data.decode("utf-8")

    def read(self, n: int = -1) -> Union[str, bytes]:
        try:
            return self._decoded(self._reader().read(n))
        except IsADirectoryError as e:
            raise _error(e, self.name) from None

    def readline(self) -> Union[str, bytes]:
        return self._decoded(self._reader().readline())

    def readlines(self) -> list[Union[str, bytes]]:
        return [self._decoded(line) for line in self._reader().readlines()]

    def write(self, file_content: Any) -> None:
        self._writer().write(_as_bytes(file_content))

    def seek(self, offset: Optional[int] = None, whence: int = 0, position: Optional[int] = None) -> int:
        """Moves to ``offset`` (TF1's older argument name: ``position``), from where ``whence`` says."""
        target = position if offset is None else offset
        if target is None:
            raise TypeError("seek() needs an offset")
        return self._open().seek(target, whence)

    def tell(self) -> int:
        return self._open().tell()

    def size(self) -> int:
        return stat(self.name).length

    def flush(self) -> None:
        if self._file is not None:
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def readable(self) -> bool:
        return self._readable

    def writable(self) -> bool:
        return self._writable

    def seekable(self) -> bool:
        return True

    def __iter__(self) -> Iterator[Union[str, bytes]]:
        return self

    def __next__(self) -> Union[str, bytes]:
        line = self.readline()
        if not line:
            raise StopIteration
        return line

    def __enter__(self) -> GFile:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


FastGFile = GFile


def exists(path: Path) -> bool:
    return os.path.exists(_path(path))


def isdir(path: Path) -> bool:
    return os.path.isdir(_path(path))


def makedirs(path: Path) -> None:
    """Creates the directory and its missing parents; an existing directory is fine."""
    name = _path(path)
    try:
        os.makedirs(name, exist_ok=True)
    except FileExistsError:
        raise errors.FailedPreconditionError(None, None, f"{name} is not a directory") from None
    except OSError as e:
        if e.errno == errno.ENOTDIR:
            raise errors.FailedPreconditionError(None, None, f"{e.filename} is not a directory") from None
        raise _error(e, name) from None


def mkdir(path: Path) -> None:
    """Creates one directory, whose parent exists; an existing directory is fine, as in TensorFlow."""
    name = _path(path)
    try:
        os.mkdir(name)
    except FileExistsError:
        if not os.path.isdir(name):
            raise errors.AlreadyExistsError(None, None, f"{name}; File exists") from None
    except OSError as e:
        raise _error(e, name) from None


def glob(pattern: Union[Path, Sequence[Path]]) -> list[str]:
    """The paths matching the pattern (or any of a list of patterns); ``*`` stays in one directory."""
    patterns = [pattern] if isinstance(pattern, (str, bytes, os.PathLike)) else list(pattern)
    return [match for p in patterns for match in glob_lib.glob(_path(p))]


def listdir(path: Path) -> list[str]:
    """The names in a directory, without ``.`` and ``..``."""
    name = _path(path)
    if not os.path.isdir(name):
        raise errors.NotFoundError(None, None, f"Could not find directory {name}")
    try:
        return os.listdir(name)
    except OSError as e:
        raise _error(e, name) from None


def remove(path: Path) -> None:
    """Deletes a file; a directory fails with FailedPreconditionError."""
    name = _path(path)
    try:
        os.remove(name)
    except OSError as e:
        raise _error(e, name) from None


def rmtree(path: Path) -> None:
    """Deletes a directory and everything in it."""
    name = _path(path)
    if not os.path.exists(name):
        raise errors.NotFoundError(None, None, f"{name} not found")
    try:
        if os.path.isdir(name) and not os.path.islink(name):
            shutil.rmtree(name)
        else:
            os.remove(name)
    except OSError as e:
        raise _error(e, getattr(e, "filename", None) or name) from None


def copy(src: Path, dst: Path, overwrite: bool = False) -> None:
    source, destination = _path(src), _path(dst)
    if not overwrite and os.path.exists(destination):
        raise errors.AlreadyExistsError(None, None, "file already exists")
    try:
        shutil.copyfile(source, destination)
    except OSError as e:
        raise _error(e, e.filename or source) from None


def rename(src: Path, dst: Path, overwrite: bool = False) -> None:
    source, destination = _path(src), _path(dst)
    if not overwrite and os.path.exists(destination):
        raise errors.AlreadyExistsError(None, None, "file already exists")
    try:
        os.replace(source, destination)
    except OSError as e:
        raise _error(e, e.filename or source) from None


class FileStatistics(NamedTuple):
    """What ``stat`` tells of a path: its size in bytes, modification time in nanoseconds since
    the epoch, and whether it is a directory."""

    length: int
    mtime_nsec: int
    is_directory: bool


def stat(path: Path) -> FileStatistics:
    name = _path(path)
    try:
        result = os.stat(name)
    except OSError as e:
        raise _error(e, name) from None
    return FileStatistics(result.st_size, result.st_mtime_ns, os.path.isdir(name))


def walk(top: Path, topdown: bool = True, onerror: Any = None) -> Iterator[tuple[str, list[str], list[str]]]:
    """``(directory, subdirectories, files)`` for ``top`` and each directory below it, parents
    first unless ``topdown`` is False; a missing ``top`` yields nothing."""
    name = _path(top)
    try:
        entries = listdir(name)
    except errors.NotFoundError as e:
        if onerror is not None:
            onerror(e)
        return
    subdirectories: list[str] = []
    files: list[str] = []
    for entry in entries:
        (subdirectories if os.path.isdir(os.path.join(name, entry)) else files).append(entry)
    here = (name, subdirectories, files)
    if topdown:
        yield here
    for subdirectory in subdirectories:
        yield from walk(os.path.join(name, subdirectory), topdown, onerror)
    if not topdown:
        yield here


def _walk_v1(top: Path, in_order: bool = True) -> Iterator[tuple[str, list[str], list[str]]]:
    return walk(top, topdown=in_order)


io_gfile = types.SimpleNamespace(
    GFile=GFile, copy=copy, exists=exists, glob=glob, isdir=isdir, join=os.path.join, listdir=listdir,
    makedirs=makedirs, mkdir=mkdir, remove=remove, rename=rename, rmtree=rmtree, stat=stat, walk=walk)
"""``tf.io.gfile``: the file functions under TensorFlow 2's names."""

tf1_gfile = types.SimpleNamespace(
    GFile=GFile, Open=GFile, FastGFile=FastGFile, Copy=copy, DeleteRecursively=rmtree, Exists=exists, Glob=glob,
    IsDirectory=isdir, ListDirectory=listdir, MakeDirs=makedirs, MkDir=mkdir, Remove=remove, Rename=rename,
    Stat=stat, Walk=_walk_v1)
"""``tf.gfile``: the same functions under TF1's names."""
