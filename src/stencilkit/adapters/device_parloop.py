"""ParLoop runs on device data bound to what they ran on: after the first run, a run
whose arguments are the same objects, with the same shapes, only launches.

What ``ParLoop.compute`` checks before a run (``api.parloop_checks.check_objects``) reads
the loop's Dats, Globals and Maps: their arrays' shapes, dtypes, layout and writability,
the maps' values, and on a GPU the overlap of a written device array with another. The
maps' values cannot change without a new version (``Map``), and a device array's memory,
dtype and layout cannot change while it stays the same object with the same shape (CuPy's
arrays are never read-only). So a run whose every argument still holds the array it held
when the run was bound (``is``), with the shape it had, under the same backend, race
mode and map versions, passes every check the bound run passed; it launches the bound
plans with the resident maps and block lists (``runtime.cuda_parloop.BoundRun``). Anything
else, and every loop with host data (copied per run), a Mat, or a non-CUDA entry, takes
the general path, which checks, raises and binds again.
"""

from __future__ import annotations

from ..config import current


class BoundDeviceLoop:
    """One ParLoop's bound device run and what it was bound to."""

    __slots__ = ("backend", "race", "versions", "arrays", "run")

    def __init__(self, backend: object, race: object, versions: tuple, arrays: tuple,
                 run) -> None:
        self.backend, self.race, self.versions = backend, race, versions
        self.arrays, self.run = arrays, run

    @staticmethod
    def of(loop, call, fn) -> BoundDeviceLoop | None:
        """The bound run of ``loop``, which just ran ``call`` (its ``ParLoopCall``) through
        ``fn`` on a GPU backend; None where it cannot be bound."""
        from ..ir.abi import ArgKind
        from ..runtime.cuda import _cupy
        from ..runtime.cuda_parloop import BoundRun

        if any(a.kind is ArgKind.MAT for a in loop.args):
            return None
        ndarray = _cupy().ndarray
        datas = [a.obj._data for a in loop.args]
        if any(type(x) is not ndarray for x in datas):
            return None  # host data (copied per run) or a view through an interface
        run = BoundRun.of(call, fn)
        if run is None:
            return None
        return BoundDeviceLoop(loop.backend or current().backend, loop.race or current().race,
                               tuple(m.version for m in loop._maps),
                               tuple((a.obj, x, x.shape) for a, x in zip(loop.args, datas)),
                               run)

    def __call__(self, loop) -> bool:
        """Run ``loop`` on the bound launches if it still has what they were bound to
        (True); else nothing (False)."""
        if (loop.backend or current().backend) != self.backend or \
                (loop.race or current().race) != self.race:
            return False
        for obj, data, shape in self.arrays:
            held = obj._data
            if held is not data or held.shape != shape:
                return False
        if self.versions and tuple(m.version for m in loop._maps) != self.versions:
            return False
        self.run.run()
        return True
