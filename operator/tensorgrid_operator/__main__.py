"""``python -m tensorgrid_operator``: the same as the ``tensorgrid-operator`` command."""

from tensorgrid_operator import cli

if __name__ == "__main__":
    cli.main()
