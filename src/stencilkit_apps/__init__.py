"""Applications built on stencilkit, shipped with it but outside the compiler package.

``stencilkit demo`` and ``stencilkit bench`` run these; they use stencilkit through its
public API (``import stencilkit as sk``), but for the few internals listed in
``_internals``. matplotlib and tqdm are optional (``pip install 'stencilkit[apps]'``): the
demo writes its picture and shows its progress without them; ``bench --plot`` needs
matplotlib.

- ``demo``, ``demo_mpi``: the heat-equation demo, on one process or MPI ranks; ``heat``: its
  simulation; ``picture``: its picture (matplotlib, or ``png``); ``progress``: its bar;
- ``bench``: the benchmark run; ``cases``: its cases; ``definitions``: their gtscript
  definitions and Numba peers; ``handc``: their hand-written C peers; ``stream``: STREAM
  bandwidth; ``timing``: medians and spreads; ``report``: the tables; ``chart``: the chart;
- ``errors``: ``UsageError``, bad command-line input.
"""
