"""``tf.flags``, ``tf.app.flags`` and ``tf.app.run``, with TensorFlow 2.21 (absl's flags) as the
oracle: the same command lines parse into the same values, leave the same arguments, and fail
with the same error class; a TF1 program started with the same arguments prints the same and
exits with the same status on both.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any, Callable

import pytest

import tensorgrid


def outcome(fn: Callable[[], Any]) -> Any:
    """What a call gives: its value, or the name of the error it raises."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - the error is the result
        return type(e).__name__


def define_flags(flags: Any) -> Any:
    """A FlagValues of the library's with one flag of each kind, as TF1 programs define them."""
    values = flags.FlagValues()
    flags.DEFINE_string("job_name", "", "ps or worker", flag_values=values)
    flags.DEFINE_integer("task_index", 0, "index of the task", flag_values=values)
    flags.DEFINE_integer("steps", 10, "steps", lower_bound=1, flag_values=values)
    flags.DEFINE_float("learning_rate", 0.01, "learning rate", flag_values=values)
    flags.DEFINE_boolean("sync", False, "synchronous training", flag_values=values)
    flags.DEFINE_bool("verbose_log", True, "log more", flag_values=values)
    flags.DEFINE_list("ps_hosts", "localhost:2222", "PS hosts", flag_values=values)
    flags.DEFINE_enum("mode", "train", ["train", "eval"], "what to do", flag_values=values)
    return values


COMMAND_LINES = [
    [],
    ["--job_name=worker", "--task_index", "2", "--sync", "--ps_hosts=a:1,b:2", "--mode=eval"],
    ["-job_name", "ps", "--noverbose_log", "--learning_rate=1e-3", "positional", "--steps=0x10"],
    ["--sync=false", "--verbose_log=1", "--task_index=-3", "a", "--", "--job_name=after"],
    ["--ps_hosts=", "--task_index=3", "--task_index=4"],
    ["--unknown=3"],
    ["--task_index=abc"],
    ["--steps=0"],
    ["--mode=test"],
    ["--sync=maybe"],
    ["--job_name"],
    ["--nosync=true"],
    ["--nojob_name"],
]


@pytest.mark.parametrize("known_only", [False, True])
@pytest.mark.parametrize("args", COMMAND_LINES, ids=" ".join)
def test_a_command_line_parses_as_with_absl(tf1: Any, args: list[str], known_only: bool) -> None:
    def parse(flags: Any) -> Any:
        values = define_flags(flags)
        remaining = values(["prog"] + args, known_only=known_only)
        return remaining, {name: values[name].value for name in values}

    assert outcome(lambda: parse(tensorgrid.flags)) == outcome(lambda: parse(tf1.flags))


def test_flags_are_read_as_attributes_and_set(tf1: Any) -> None:
    def use(flags: Any) -> Any:
        values = define_flags(flags)
        before = outcome(lambda: values.job_name)
        values(["prog", "--job_name=ps"])
        values.task_index = 5
        return (before, values.job_name, values.task_index, values["task_index"].default, "sync" in values,
                outcome(lambda: values.no_such_flag), values.is_parsed())

    assert use(tensorgrid.flags) == use(tf1.flags)


def test_a_flag_defined_twice_or_required(tf1: Any) -> None:
    def define(flags: Any) -> Any:
        values = define_flags(flags)
        twice = outcome(lambda: flags.DEFINE_string("job_name", "x", "again", flag_values=values))
        flags.DEFINE_string("data_dir", None, "where the data is", flag_values=values)
        flags.mark_flag_as_required("data_dir", flag_values=values)
        missing = outcome(lambda: values(["prog"]))
        values.unparse_flags()
        return twice, missing, values(["prog", "--data_dir=/d"]), values.data_dir

    assert define(tensorgrid.flags) == define(tf1.flags)


def test_tf1_argument_names_of_define_functions(tf1: Any) -> None:
    def define(flags: Any) -> Any:
        values = flags.FlagValues()
        flags.DEFINE_integer(flag_name="batch", default_value=4, docstring="batch size", flag_values=values)
        values(["prog", "--batch=8"])
        return values.batch, values["batch"].help

    assert define(tensorgrid.flags) == define(tf1.flags)


def test_the_namespaces(tf1: Any) -> None:
    for lib in (tensorgrid, tf1):
        assert lib.app.flags.FLAGS is lib.flags.FLAGS
        assert callable(lib.app.run)


PROGRAM = '''
"""A TF1 trainer's opening, as published programs write it."""
import {module} as tf

flags = tf.app.flags
flags.DEFINE_string("job_name", "", "ps or worker")
flags.DEFINE_integer("task_index", 0, "index of the task")
flags.DEFINE_boolean("sync", False, "synchronous training")
FLAGS = flags.FLAGS


def main(argv):
    print(argv[1:], FLAGS.job_name, FLAGS.task_index, FLAGS.sync)
    return FLAGS.task_index


if __name__ == "__main__":
    {start}
'''

MODULES = {"tensorgrid": "tensorgrid.compat.v1", "tensorflow": "tensorflow.compat.v1"}


def run_program(tmp_path: Any, library: str, args: list[str], start: str = "tf.app.run()") -> tuple[int, str, str]:
    """Runs the program on a library; returns its status, its standard output, and the last
    line of its standard error (where an uncaught error names its class)."""
    path = tmp_path / f"{library}_trainer.py"
    path.write_text(textwrap.dedent(PROGRAM).format(module=MODULES[library], start=start))
    result = subprocess.run([sys.executable, str(path)] + args, capture_output=True, text=True, timeout=240)
    errors = [line for line in result.stderr.splitlines() if "Error" in line]
    last_error = errors[-1].rsplit(".", 1)[-1] if errors else ""
    return result.returncode, result.stdout, last_error


PROGRAM_RUNS = [
    (["--job_name=worker", "--task_index", "2", "--sync", "data.txt"], "tf.app.run()"),
    (["--unknown=1", "--nosync", "x", "--", "--task_index=3"], "tf.app.run()"),
    (["--task_index=abc"], "tf.app.run()"),
    (["ignored"], "tf.app.run(main=main, argv=['prog', '--job_name=ps', 'rest'])"),
    (["--job_name=ps", "--unknown"], "print(FLAGS.job_name)"),
    (["--job_name=ps"], "print(FLAGS.job_name, FLAGS.sync)"),
]


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("args", "start"), PROGRAM_RUNS, ids=lambda v: " ".join(v) if isinstance(v, list) else v)
def test_a_tf1_program_runs_as_on_tensorflow(tf1: Any, tmp_path: Any, args: list[str], start: str) -> None:
    assert run_program(tmp_path, "tensorgrid", args, start) == run_program(tmp_path, "tensorflow", args, start)


@pytest.mark.timeout(600)
def test_help_prints_the_flags_and_exits_1(tf1: Any, tmp_path: Any) -> None:
    for library in MODULES:
        status, output, _ = run_program(tmp_path, library, ["--help"])
        assert status == 1
        assert "A TF1 trainer's opening" in output and "--job_name: ps or worker" in output
