"""gtscript computations in the style of weather and climate model code (see registry.py).

The modules here are data for tests/test_corpus.py, written for GT4Py exactly as its users
write them; they are loaded by the harness (twice), never imported as ``tests.corpus.X``.
"""

MODULES = ("advection", "solvers", "physics", "dynamics")  # tests/corpus/<name>.py
