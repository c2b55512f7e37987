"""Print the requirements of the operator alone, one per line, from pyproject.toml.

tensorgrid is one distribution with two packages; installing it normally would put
the runtime's dependencies (numpy, grpcio, protobuf) into the operator image, which
never imports them. The operator image installs the package with --no-deps and then
these: the [operator] extra and the core dependencies named in OPERATOR_CORE
(tests/images checks that the operator imports nothing else).

Usage: python3 docker/operator-requirements.py [pyproject.toml]
"""

import re
import sys
import tomllib

# Core dependencies (project.dependencies) that tensorgrid_operator imports.
OPERATOR_CORE = ("prometheus-client", "cryptography")


def requirement_name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9._-]+", requirement)
    if match is None:
        raise ValueError(f"not a requirement: {requirement!r}")
    return re.sub(r"[-_.]+", "-", match.group(0)).lower()


def operator_requirements(pyproject: dict) -> list[str]:
    project = pyproject["project"]
    core = [r for r in project["dependencies"] if requirement_name(r) in OPERATOR_CORE]
    missing = set(OPERATOR_CORE) - {requirement_name(r) for r in core}
    if missing:
        raise ValueError(f"pyproject.toml has no core dependency {sorted(missing)}")
    return core + list(project["optional-dependencies"]["operator"])


def main() -> int:
    path = sys.argv[1] if len(sys.argv) > 1 else "pyproject.toml"
    with open(path, "rb") as f:
        pyproject = tomllib.load(f)
    print("\n".join(operator_requirements(pyproject)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
