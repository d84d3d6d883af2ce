"""The demo's progress bar: tqdm's where it is installed, else one plain line on stderr."""

from __future__ import annotations

import sys
from collections.abc import Iterator


def steps(total: int, desc: str, *, disable: bool = False) -> Iterator[int]:
    """``range(total)``, showing how far it got."""
    if disable:
        return iter(range(total))
    try:
        from tqdm import tqdm
    except ImportError:
        return _plain(total, desc)
    return iter(tqdm(range(total), desc=desc, unit="step"))


def _plain(total: int, desc: str) -> Iterator[int]:
    """A line rewritten in place at each whole percent (at most 101 writes, whatever the
    number of steps), ended by a newline."""
    shown = -1
    for i in range(total):
        percent = 100 * i // total
        if percent != shown:
            shown = percent
            sys.stderr.write(f"\r{desc}: {percent:3d}% ({i}/{total} steps)")
            sys.stderr.flush()
        yield i
    sys.stderr.write(f"\r{desc}: 100% ({total}/{total} steps)\n")
    sys.stderr.flush()
