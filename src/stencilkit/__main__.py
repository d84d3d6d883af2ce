"""``python -m stencilkit ...`` is the ``stencilkit`` command (for environments where the
console script is not on PATH, e.g. a notebook kernel's interpreter)."""

import sys

from .cli import main

sys.exit(main())
