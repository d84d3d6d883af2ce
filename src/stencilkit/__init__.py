"""stencilkit: write stencil and mesh kernels once in Python, run them near the hardware's limit.

The names of the public contract (docs/site/contract.md, the "contract.md" that docstrings cite
by section; the documentation site's "The contract" page), re-exported; no logic lives here.
"""

import copyreg as _copyreg

from . import adapters as _adapters
from . import gtscript, registry  # noqa: E402
from ._version import __version__ as __version__
from .api.export import export  # noqa: E402
from .build import cache  # noqa: E402
from .config import configure  # noqa: E402
from .distributed import Decomposition, DistributedArray  # noqa: E402
from .errors import (  # noqa: E402
    AccessRuleError,
    ArgumentError,
    BackendError,
    StencilError,
    StencilSyntaxError,
    StencilTypeError,
)
from .gtscript import (  # noqa: E402
    __INLINED,
    BACKWARD,
    FORWARD,
    IJ,
    IJK,
    IK,
    JK,
    PARALLEL,
    Field,
    I,
    J,
    K,
    abs,
    acos,
    acosh,
    arccos,
    arccosh,
    arcsin,
    arcsinh,
    arctan,
    arctanh,
    asin,
    asinh,
    atan,
    atanh,
    cbrt,
    ceil,
    compile_assert,
    computation,
    cos,
    cosh,
    erf,
    erfc,
    exp,
    floor,
    function,
    gamma,
    horizontal,
    interval,
    isfinite,
    isinf,
    isnan,
    log,
    log10,
    max,
    min,
    mod,
    pow,
    region,
    round,
    round_away_from_zero,
    sin,
    sinh,
    sqrt,
    tan,
    tanh,
    trunc,
)

# gtscript.function helpers pickle by source through the adapter protocol (the pickling
# adapter, imported on the first pickling), registered here rather than as
# GTFunction.__reduce__: the DSL vocabulary is a leaf under the frontend and imports no adapter
_copyreg.pickle(gtscript.GTFunction, _adapters.reduce)
from .api.loop import ParLoop, flush, par_loop  # noqa: E402
from .api.parloop import (  # noqa: E402
    INC,
    MAX,
    MIN,
    READ,
    RW,
    WRITE,
    Dat,
    Global,
    Kernel,
    Map,
    Mat,
    Set,
    Sparsity,
    kernel,
)
from .api.stencil import PointStencil, stencil  # noqa: E402
from .registry import backends  # noqa: E402
from .runtime.device_sync import synchronize  # noqa: E402
from .runtime.threads import get_num_threads, set_num_threads  # noqa: E402
from .storage import as_storage, empty, full, ones, zeros  # noqa: E402

__all__ = [
    "AccessRuleError", "ArgumentError", "BackendError", "PointStencil", "StencilError",
    "StencilSyntaxError", "StencilTypeError", "backends", "registry", "cache", "configure",
    "stencil",
    "gtscript", "BACKWARD", "FORWARD", "IJ", "IJK", "IK", "JK", "PARALLEL", "Field", "I", "J",
    "K", "__INLINED", "abs", "acos", "acosh", "arccos", "arccosh", "arcsin", "arcsinh",
    "arctan", "arctanh", "asin", "asinh", "atan", "atanh", "cbrt", "ceil", "compile_assert",
    "computation", "cos", "cosh", "erf", "erfc", "exp", "floor", "function", "gamma",
    "horizontal", "interval", "isfinite", "isinf", "isnan", "log", "log10", "max", "min",
    "mod", "pow", "region", "round", "round_away_from_zero", "sin", "sinh", "sqrt", "tan",
    "tanh", "trunc",
    "INC", "MAX", "MIN", "READ", "RW", "WRITE", "Dat", "Global", "Kernel", "Map", "Mat", "Set",
    "Sparsity", "kernel", "ParLoop", "flush", "par_loop", "export",
    "as_storage", "empty", "full", "ones", "zeros", "Decomposition", "DistributedArray",
    "get_num_threads", "set_num_threads", "synchronize",
]

from .adapters import numba_hook as _numba_hook  # noqa: E402

_numba_hook.arm()  # jitted code may build stencils (imports nothing of numba)
