"""``python -m resprop`` is the ``resprop`` command."""
import sys

from resprop.numeric.cli import main

sys.exit(main())
