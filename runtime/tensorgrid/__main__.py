"""``python -m tensorgrid``: the ``tensorgrid`` command."""

import sys

from tensorgrid import cli

sys.exit(cli.main())
