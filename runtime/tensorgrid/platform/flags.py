"""``tf.flags`` and ``tf.app.flags``: TF1's command-line flags (absl's, as TensorFlow wraps them).

TF1 programs define their flags at import time (``flags.DEFINE_string("job_name", "", ...)``)
and read them from ``FLAGS`` after ``tf.app.run()`` has parsed ``sys.argv``. absl is not a
dependency of tensorgrid, so this module is a small re-implementation of the part programs
use, with absl's parsing rules: ``--name=value``, ``--name value`` and one dash alike,
``--flag``/``--noflag`` for booleans, ``--`` ends the flags, other words are positional and
parsing goes on after them. An unknown flag raises ``UnrecognizedFlagError`` unless
``known_only`` is set (what ``tf.app.run`` does: it hands unknown flags to ``main``). As with
TensorFlow's ``FLAGS``, reading a flag before anything parsed the command line parses
``sys.argv`` first.

Left out: flag files (``--flagfile``), ``--undefok``, multi-valued and enum-class flags,
validators other than ``mark_flag_as_required``, and absl's logging flags (``--verbosity``).
"""

from __future__ import annotations

import csv
import logging
import sys
from typing import Any, Callable, Iterator, Optional, Sequence


class Error(Exception):
    """The base class of flag errors (absl's ``flags.Error``)."""


class UnrecognizedFlagError(Error):
    """A command line names a flag that no one defined."""

    def __init__(self, flagname: str, flagvalue: str = "") -> None:
        self.flagname = flagname
        self.flagvalue = flagvalue
        super().__init__(f"Unknown command line flag '{flagname}'")


class IllegalFlagValueError(Error):
    """A flag's value does not parse as the flag's type, or is out of its bounds or choices."""


class DuplicateFlagError(Error):
    """A flag of this name is already defined."""


class UnparsedFlagAccessError(Error):
    """A flag was read from a FlagValues that never parsed a command line."""


class Flag:
    """One defined flag: its name, default, help, and the value parsed into it."""

    def __init__(self, name: str, default: Any, help: str, parse: Callable[[Any], Any], type_name: str,
                 boolean: bool = False) -> None:
        self.name = name
        self.help = help
        self.boolean = boolean
        self.type_name = type_name
        self.parser = parse
        self.default = None if default is None else self._parse(default)
        self.value = self.default
        self.present = 0
        self.using_default_value = True

    def _parse(self, argument: Any) -> Any:
        try:
            return self.parser(argument)
        except (TypeError, ValueError, OverflowError) as e:
            raise IllegalFlagValueError(f"flag --{self.name}={argument}: {e}") from None

    def parse(self, argument: Any) -> None:
        self.value = self._parse(argument)
        self.present += 1
        self.using_default_value = False

    def unparse(self) -> None:
        self.value = self.default
        self.present = 0
        self.using_default_value = True


class FlagValues:
    """A registry of flags and their values; ``FLAGS`` is the process's own.

    ``flag_values(argv)`` parses a command line (``argv[0]`` is the program) and returns the
    program name followed by what it did not consume; ``flag_values.name`` is a flag's value.
    """

    def __init__(self, parse_argv_on_read: bool = False) -> None:
        self.__dict__["_flags"] = {}
        self.__dict__["_parsed"] = False
        self.__dict__["_required"] = []
        # TensorFlow's FLAGS parses sys.argv when a flag is read first; absl's raise instead.
        self.__dict__["_parse_argv_on_read"] = parse_argv_on_read

    def __call__(self, argv: Sequence[str], known_only: bool = False) -> list[str]:
        if isinstance(argv, (str, bytes)):
            raise TypeError("argv should be a tuple/list of strings, not bytes or string.")
        if not argv:
            raise ValueError("argv cannot be an empty list, and must contain the program name as the first element.")
        remaining = self._parse_args(list(argv[1:]), known_only)
        self.mark_as_parsed()
        for name in self._required:
            if self._flags[name].value is None:
                raise IllegalFlagValueError(f"flag --{name}=None: Flag --{name} must have a value other than None.")
        return [argv[0]] + remaining

    def _parse_args(self, args: list[str], known_only: bool) -> list[str]:
        remaining: list[str] = []
        position = 0
        while position < len(args):
            arg = args[position]
            position += 1
            if arg == "--":
                if known_only:
                    remaining.append(arg)
                break
            if not arg.startswith("-") or not arg.lstrip("-"):
                remaining.append(arg)
                continue
            name, equals, value = arg[2:].partition("=") if arg.startswith("--") else arg[1:].partition("=")
            flag = self._flags.get(name)
            if flag is None and name.startswith("no") and len(name) > 2:
                negated = self._flags.get(name[2:])
                if negated is not None and negated.boolean:
                    if equals:
                        raise ValueError(arg + " does not take an argument")
                    negated.parse("false")
                    continue
            if flag is None:
                if not known_only:
                    raise UnrecognizedFlagError(name, arg)
                remaining.append(arg)
                continue
            if not equals:
                if flag.boolean:
                    value = "true"
                elif position < len(args):
                    value = args[position]
                    position += 1
                else:
                    raise Error("Missing value for flag " + arg)
            flag.parse(value)
        return remaining + args[position:]

    def is_parsed(self) -> bool:
        return bool(self._parsed)

    def mark_as_parsed(self) -> None:
        self.__dict__["_parsed"] = True

    def unparse_flags(self) -> None:
        for flag in self._flags.values():
            flag.unparse()
        self.__dict__["_parsed"] = False

    def define(self, flag: Flag) -> None:
        if flag.name in self._flags:
            raise DuplicateFlagError(f"The flag '{flag.name}' is defined twice.")
        self._flags[flag.name] = flag

    def mark_required(self, name: str) -> None:
        if name not in self._flags:
            raise KeyError(f"flag --{name} is not defined")
        self._required.append(name)

    def flag_values_dict(self) -> dict[str, Any]:
        return {name: flag.value for name, flag in self._flags.items()}

    def get_flag_value(self, name: str, default: Any) -> Any:
        flag = self._flags.get(name)
        return default if flag is None else flag.value

    def __getattr__(self, name: str) -> Any:
        flags = self.__dict__["_flags"]
        if name not in flags:
            raise AttributeError(name)
        if not self._parsed:
            if not self._parse_argv_on_read:
                raise UnparsedFlagAccessError(
                    f"Trying to access flag --{name} before flags were parsed.")
            self(sys.argv)
        return flags[name].value

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in self._flags:
            raise AttributeError(name)
        self._flags[name].value = value
        self._flags[name].using_default_value = False

    def __getitem__(self, name: str) -> Flag:
        return self._flags[name]  # type: ignore[no-any-return]

    def __contains__(self, name: object) -> bool:
        return name in self._flags

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._flags))

    def __len__(self) -> int:
        return len(self._flags)

    def help_text(self) -> str:
        lines = []
        for name, flag in sorted(self._flags.items()):
            lines.append(f"  --{'[no]' if flag.boolean else ''}{name}: {flag.help}")
            lines.append(f"    (default: {flag.default!r})" + (f"\n    ({flag.type_name})" if flag.type_name else ""))
        return "\n".join(lines)


FLAGS = FlagValues(parse_argv_on_read=True)
"""The flags of this process; ``tf.app.run`` parses ``sys.argv`` into them."""

# TF1 programs written before TensorFlow 1.5 name the define functions' arguments so.
_RENAMED_ARGUMENTS = {"flag_name": "name", "default_value": "default", "docstring": "help"}


def _renamed(kwargs: dict[str, Any]) -> dict[str, Any]:
    old = [key for key in kwargs if key in _RENAMED_ARGUMENTS]
    if old:
        logging.getLogger("tensorgrid").warning(
            "Use of the keyword argument names (flag_name, default_value, docstring) is deprecated, "
            "please use (name, default, help) instead.")
    return {_RENAMED_ARGUMENTS.get(key, key): value for key, value in kwargs.items()}


def _define(name: str, default: Any, help: Optional[str], parse: Callable[[Any], Any], type_name: str,
            flag_values: FlagValues, required: bool, boolean: bool = False) -> Flag:
    flag = Flag(name, default, help or "(no help available)", parse, type_name, boolean)
    flag_values.define(flag)
    if required:
        flag_values.mark_required(name)
    return flag


def _parse_string(argument: Any) -> str:
    if not isinstance(argument, str):
        raise TypeError(f'flag value must be a string, found "{type(argument)}"')
    return argument


def _parse_integer(argument: Any) -> int:
    if isinstance(argument, int) and not isinstance(argument, bool):
        return argument
    if not isinstance(argument, str):
        raise TypeError(f"Expect argument to be a string or int, found {type(argument)}")
    base = 10
    if len(argument) > 2 and argument[0] == "0":
        base = {"o": 8, "x": 16}.get(argument[1], 10)
    return int(argument, base)


def _parse_float(argument: Any) -> float:
    if isinstance(argument, bool) or not isinstance(argument, (int, float, str)):
        raise TypeError(f"Expect argument to be a string, int, or float, found {type(argument)}")
    return float(argument)


def _parse_boolean(argument: Any) -> bool:
    if isinstance(argument, str):
        if argument.lower() in ("true", "t", "1"):
            return True
        if argument.lower() in ("false", "f", "0"):
            return False
        raise ValueError(f"Non-boolean argument to boolean flag {argument}")
    if isinstance(argument, int) and argument in (0, 1):
        return bool(argument)
    raise TypeError(f"Non-boolean argument to boolean flag {argument}")


def _parse_list(argument: Any) -> list[str]:
    if isinstance(argument, list):
        return argument
    if not argument:
        return []
    return [s.strip() for s in next(csv.reader([argument], strict=True))]


def _bounded(parse: Callable[[Any], Any], lower_bound: Any, upper_bound: Any) -> Callable[[Any], Any]:
    def parse_in_bounds(argument: Any) -> Any:
        value = parse(argument)
        if (lower_bound is not None and value < lower_bound) or (upper_bound is not None and value > upper_bound):
            if lower_bound is not None and upper_bound is not None:
                bounds = f"a value in the range [{lower_bound}, {upper_bound}]"
            elif lower_bound is not None:
                bounds = f"a value >= {lower_bound}"
            else:
                bounds = f"a value <= {upper_bound}"
            raise ValueError(f"{value} is not {bounds}")
        return value
    return parse_in_bounds


def _define_string(name: str, default: Optional[str], help: Optional[str], flag_values: FlagValues = FLAGS,
                   required: bool = False) -> Flag:
    """Defines a flag whose value is any string."""
    return _define(name, default, help, _parse_string, "", flag_values, required)


def _define_integer(name: str, default: Optional[int], help: Optional[str], lower_bound: Optional[int] = None,
                    upper_bound: Optional[int] = None, flag_values: FlagValues = FLAGS,
                    required: bool = False) -> Flag:
    """Defines a flag whose value is an integer (``0x`` and ``0o`` prefixes allowed), optionally bounded."""
    parse = _bounded(_parse_integer, lower_bound, upper_bound)
    return _define(name, default, help, parse, "an integer", flag_values, required)


def _define_float(name: str, default: Optional[float], help: Optional[str], lower_bound: Optional[float] = None,
                  upper_bound: Optional[float] = None, flag_values: FlagValues = FLAGS,
                  required: bool = False) -> Flag:
    """Defines a flag whose value is a float, optionally bounded."""
    parse = _bounded(_parse_float, lower_bound, upper_bound)
    return _define(name, default, help, parse, "a number", flag_values, required)


def _define_boolean(name: str, default: Any, help: Optional[str], flag_values: FlagValues = FLAGS,
                    required: bool = False) -> Flag:
    """Defines a boolean flag: ``--name``, ``--noname``, ``--name=true|false|t|f|1|0``."""
    return _define(name, default, help, _parse_boolean, "", flag_values, required, boolean=True)


def DEFINE_list(name: str, default: Any, help: Optional[str], flag_values: FlagValues = FLAGS,
                required: bool = False) -> Flag:
    """Defines a flag whose value is a comma-separated list of strings."""
    return _define(name, default, help, _parse_list, "a comma separated list", flag_values, required)


def DEFINE_enum(name: str, default: Optional[str], enum_values: Sequence[str], help: Optional[str],
                flag_values: FlagValues = FLAGS, case_sensitive: bool = True, required: bool = False) -> Flag:
    """Defines a flag whose value is one of ``enum_values``."""
    if not enum_values:
        raise ValueError(f"enum_values cannot be empty, found \"{enum_values}\"")
    choices = list(enum_values)

    def parse_choice(argument: Any) -> str:
        for choice in choices:
            if argument == choice or (not case_sensitive and str(argument).upper() == choice.upper()):
                return choice
        raise ValueError(f"value should be one of <{'|'.join(choices)}>")

    return _define(name, default, help, parse_choice, f"<{'|'.join(choices)}>", flag_values, required)


def mark_flag_as_required(flag_name: str, flag_values: FlagValues = FLAGS) -> None:
    """Parsing a command line fails unless it gives the flag a value other than None."""
    flag_values.mark_required(flag_name)


def mark_flags_as_required(flag_names: Sequence[str], flag_values: FlagValues = FLAGS) -> None:
    for name in flag_names:
        mark_flag_as_required(name, flag_values)


def _accepting_old_argument_names(define: Callable[..., Flag]) -> Callable[..., Flag]:
    def define_flag(*args: Any, **kwargs: Any) -> Flag:
        return define(*args, **_renamed(kwargs))
    define_flag.__name__ = define.__name__.replace("_define_", "DEFINE_")
    define_flag.__doc__ = define.__doc__
    return define_flag


DEFINE_string = _accepting_old_argument_names(_define_string)
DEFINE_integer = _accepting_old_argument_names(_define_integer)
DEFINE_float = _accepting_old_argument_names(_define_float)
DEFINE_boolean = _accepting_old_argument_names(_define_boolean)
DEFINE_bool = DEFINE_boolean
