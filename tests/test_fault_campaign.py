"""What issue 25's fault campaign found: a crash and raw Python exceptions where bad input
must get an ``sk.StencilError`` naming the stencil (or argument), file and line, and the fix.
Crash-capable cases run in a child process (``run_isolated``)."""

from __future__ import annotations

import json

import numpy as np

import stencilkit as sk

from .requires import needs_c
from .test_hostile_input import run_isolated


def test_c_kernel_names_must_be_c_identifiers():
    needs_c()
    # The name is pasted into the generated C as the function to call: "kc(0,0); int x"
    # compiled, and running the loop killed the interpreter (SIGSEGV).
    out = run_isolated("""
        import json, numpy as np, stencilkit as sk

        code = "void kc(double *a) { a[0] += 1.0; }"
        cells = sk.Set(5)
        results = {}
        for name in ["kc(0); int x", "kc(0,0); int x", "kc(0,0)", "kc;", "k c", "1kc", "int", "double",
                     "__attribute__", "k\\u00e9", "kc\\n", 5, ("kc",)]:
            d = sk.Dat(cells, data=np.zeros(5))
            try:
                sk.par_loop(sk.Kernel(code, name), cells, d(sk.INC), backend="c")
                results[repr(name)] = "ran"
            except sk.StencilError as exc:
                results[repr(name)] = str(exc)
        d = sk.Dat(cells, data=np.zeros(5))
        sk.par_loop(sk.Kernel(code, "kc"), cells, d(sk.INC), backend="c")
        results["good"] = d.data.tolist()
        print(json.dumps(results))
    """)
    results = json.loads(out.splitlines()[-1])
    assert results.pop("good") == [1.0] * 5
    for name, message in results.items():
        assert "not a C identifier" in message or "a C keyword" in message or \
            "not a string" in message, (name, message)
        assert "child.py:" in message and "fix:" in message, message
    assert "a C keyword" in results["'int'"]


def test_a_python_kernel_may_carry_any_name():
    needs_c()
    # Its name reaches C only through a mangled stem (sk_<stem>_kernel): no check applies
    def plus_one(a):
        a[0] += 1.0

    cells = sk.Set(4)
    d = sk.Dat(cells, data=np.zeros(4))
    sk.par_loop(sk.Kernel(plus_one, "int x; (odd)"), cells, d(sk.RW), backend="c")
    np.testing.assert_array_equal(d.data, np.ones(4))
