"""Run the benchmark suite from a checkout: ``python benchmarks/run.py [--quick] [--json F]``."""

import sys

from stencilkit.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))
