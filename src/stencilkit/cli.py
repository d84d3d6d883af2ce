"""``stencilkit demo | bench | show | backends``.

``demo`` and ``bench`` are applications (``stencilkit_apps``), imported when they run; their
options are defined here, with the other commands'.

Bad command-line input gets one line on stderr and exit status 2, never a traceback; output
cut short by a closed pipe (``stencilkit show ... | head``) ends the program quietly.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import sys
from pathlib import Path
from typing import NoReturn

_MAX_DEMO_SIZE = 8192  # five float64 arrays of this size take 2.5 GB


class UsageError(Exception):
    """Bad input on the command line: reported as one line, exit status 2."""


def _one_line(text: str) -> str:
    return "; ".join(line.strip() for line in str(text).splitlines() if line.strip())


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors on one line (the usage is one ``--help`` away)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {_one_line(message)} (see {self.prog} --help)\n")


def _int_range(lo: int, hi: int | None):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < lo or hi is not None and value > hi:
            bound = f"from {lo} to {hi}" if hi is not None else f"of at least {lo}"
            raise argparse.ArgumentTypeError(f"expected an integer {bound}, got {value}")
        return value

    return parse


# ----------------------------------------------------------------------------- demo, bench

def _app(module: str):
    """The command ``main`` of ``stencilkit_apps.<module>``, imported when the command runs:
    the applications (and matplotlib, tqdm, Numba peers) stay out of the compiler's imports."""

    def run(args: argparse.Namespace) -> int:
        import importlib

        from stencilkit_apps.errors import UsageError as AppUsageError

        try:
            return importlib.import_module(f"stencilkit_apps.{module}").main(args)
        except AppUsageError as exc:
            raise UsageError(str(exc)) from None

    return run


# ----------------------------------------------------------------------------- show

def _load_user_module(path: str):
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"{path}: no such file" if not file.exists() else f"{path}: not a file")
    spec = importlib.util.spec_from_file_location("_stencilkit_show", file)
    if spec is None or spec.loader is None:
        raise UsageError(f"{path}: not a Python file (expected FILE.py:NAME)")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(file.resolve().parent))
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        raise UsageError(f"{path}:{exc.lineno}: syntax error: {exc.msg}") from None
    except (Exception, SystemExit) as exc:
        raise UsageError(f"running {path} failed: {type(exc).__name__}: {exc}") from None
    return module


def show(args: argparse.Namespace) -> int:
    """Print the generated code of ``FILE.py:NAME`` (called once on example arguments)."""
    from .errors import StencilError

    path, sep, name = args.target.rpartition(":")
    if not sep or not path or not name:
        raise UsageError(f"expected FILE.py:NAME, got {args.target!r}")
    module = _load_user_module(path)
    if not hasattr(module, name):
        raise UsageError(f"{path} defines no {name!r}")
    obj = getattr(module, name)
    if not callable(getattr(obj, "generate", None)):
        raise UsageError(f"{name!r} in {path} is of type {type(obj).__name__}, not a stencil, "
                         "kernel or ParLoop")
    example = getattr(module, f"{name}_example", None)
    try:
        if example is not None:
            text = obj.generate(*example(), backend=args.backend)
        else:
            text = obj.generate(backend=args.backend)
    except StencilError as exc:
        hint = "" if example is not None else \
            f" (or define {name}_example() returning example arguments in {path})"
        raise UsageError(_one_line(str(exc)) + hint) from None
    except Exception as exc:
        raise UsageError(f"generating {name!r} failed: {type(exc).__name__}: {exc}") from None
    if args.kernel_only:
        kernel = getattr(getattr(obj, "kernel", None), "name", None) or getattr(obj, "__name__", name)
        text = kernel_part(text, kernel)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


# where the user's kernel begins in C, CUDA and OpenCL sources: its header comment
_KERNEL_START = re.compile(r"^(/\* (point kernel '|computation '|--- kernel ---|ParLoop of kernel)"
                           r"|SK_DEVICE int )", re.MULTILINE)  # (CUDA: the kernel's function)


def kernel_part(text: str, kernel: str) -> str:
    """``text`` from the user's kernel on: without the runtime prelude and the helpers the
    backend always includes (C, CUDA, OpenCL: from the kernel's header comment; Numba and
    NumPy modules: from the first function named after the kernel)."""
    m = _KERNEL_START.search(text)
    if m is not None:
        return text[m.start():]
    m = re.search(rf"^def \w*{re.escape(kernel)}\w*\(", text, re.MULTILINE)
    return text[m.start():] if m is not None else text


# ----------------------------------------------------------------------------- backends

def list_backends(args: argparse.Namespace) -> int:
    from .registry import backends

    for status in backends().values():
        print(status)
    return 0


# ----------------------------------------------------------------------------- main

def _parser() -> argparse.ArgumentParser:
    from . import __version__
    from .registry import REGISTRY

    parser = _Parser(prog="stencilkit",
                     description="Stencil kernels in plain Python, compiled to C or NumPy.")
    parser.add_argument("--version", action="version", version=f"stencilkit {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=_Parser)
    p = sub.add_parser("demo", help="run a 2-D heat simulation and write a picture",
                       description="Run a 2-D heat-equation simulation on the default backend "
                                   "and write a picture of the result.")
    p.add_argument("--size", type=_int_range(3, _MAX_DEMO_SIZE), default=512, metavar="N",
                   help=f"grid points per side, 3 to {_MAX_DEMO_SIZE} (default 512)")
    p.add_argument("--steps", type=_int_range(0, None), default=500, metavar="S",
                   help="time steps to run, 0 or more (default 500)")
    p.add_argument("--output", default="stencilkit-demo.png", metavar="FILE",
                   help="picture to write; its suffix picks the format: .png, or any "
                        "matplotlib writes where it is installed (default stencilkit-demo.png)")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bar (tqdm's where installed, else a line on stderr)")
    p.add_argument("--mpi", action="store_true",
                   help="run on the ranks of MPI_COMM_WORLD (mpiexec -n 4 stencilkit demo "
                        "--mpi): the grid is split over them, halos exchanged each step, the "
                        "picture gathered on rank 0 (needs mpi4py)")
    p.set_defaults(run=_app("demo"))
    p = sub.add_parser("bench", help="run the benchmark suite",
                       description="Time stencilkit against NumPy and Numba on standard "
                                   "cases. An implementation whose backend cannot build or "
                                   "run here is left out, with the reason on stderr.")
    p.add_argument("--quick", action="store_true", help="small sizes, seconds")
    p.add_argument("--json", metavar="FILE", help="write results as JSON to this file")
    p.add_argument("--plot", metavar="FILE",
                   help="write a PNG bar chart to this file (needs matplotlib)")
    p.add_argument("--only", nargs="*", metavar="CASE",
                   help="run only these cases (--list names them)")
    p.add_argument("--list", action="store_true",
                   help="list the cases, with what each times, and run nothing")
    p.add_argument("--compare", nargs=2, metavar=("A.json", "B.json"),
                   help="print the ratio table of two --json results (runs nothing)")
    p.set_defaults(run=_app("bench"))
    p = sub.add_parser("show", help="print the generated code of FILE.py:NAME",
                       description="Print the code generated for the stencil, kernel or "
                                   "ParLoop NAME defined in FILE.py. A point kernel needs "
                                   "argument types: define NAME_example() in FILE.py returning "
                                   "example arguments.")
    p.add_argument("target", metavar="FILE.py:NAME", help="the file and the name of the object")
    p.add_argument("--backend", choices=list(REGISTRY), default=None,
                   help="the backend to generate for (default: the configured one)")
    p.add_argument("--kernel-only", action="store_true",
                   help="print the kernel itself, without the runtime prelude and helpers")
    p.set_defaults(run=show)
    p = sub.add_parser("backends", help="list the backends and why any is unavailable",
                       description="List every backend, whether it can run here, and if not "
                                   "why.")
    p.set_defaults(run=list_backends)
    return parser


def main(argv: list[str] | None = None) -> int:
    from .errors import StencilError

    prog = "stencilkit"
    try:
        args = _parser().parse_args(argv)
        prog = f"stencilkit {args.command}"
        status = args.run(args)
        sys.stdout.flush()
        return status
    except BrokenPipeError:
        # The reader went away (``| head``): stop quietly, and keep the interpreter's final
        # flush of stdout from reporting the same broken pipe.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except (UsageError, StencilError) as exc:
        print(f"{prog}: error: {_one_line(str(exc))}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"{prog}: error: {_one_line(str(exc))}", file=sys.stderr)
        return 2
    except MemoryError:
        print(f"{prog}: error: out of memory", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
