"""Point kernels on dask arrays computed by a ``dask.distributed`` LocalCluster of two worker
processes: the stencil travels pickled (by its definition) to processes that build it again.
The results equal the NumPy calls. Skipped, with the reason, when the cluster cannot start."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import stencilkit as sk

from . import dask_kernels as kk
from .test_dask import _arguments, _dask_args, cases

da = pytest.importorskip("dask.array", reason="dask is not installed (pip install .[dask])")
distributed = pytest.importorskip("distributed", reason="distributed is not installed "
                                                        "(pip install .[dask])")

EXAMPLES = int(os.environ.get("STENCILKIT_HYPOTHESIS_EXAMPLES_CLUSTER", "12"))


@pytest.fixture(scope="module")
def client():
    try:
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                           dashboard_address=None, memory_limit="1GiB",
                                           silence_logs=50)
    except Exception as exc:  # noqa: BLE001 - any failure to start is a reason to skip
        pytest.skip(f"a LocalCluster of 2 worker processes cannot start here: {exc!r}")
    with cluster, distributed.Client(cluster) as c:
        yield c


def test_cluster_runs_stencils_in_worker_processes(client):
    pids = set(client.run(os.getpid).values())
    assert len(pids) == 2 and os.getpid() not in pids
    stencil = sk.stencil(kk.k2_uneven, cval=7.5)
    a = np.random.default_rng(0).random((40, 30))
    lazy = stencil(da.from_array(a, chunks=(7, 9)))
    np.testing.assert_array_equal(client.compute(lazy).result(), stencil(a))


def test_cluster_closures_and_computations(client):
    three = kk.scaled(3.0)
    a = np.arange(50.0)
    np.testing.assert_array_equal(client.compute(three(da.from_array(a, chunks=6))).result(),
                                  three(a))
    from .test_pickle import with_helper

    a3 = np.random.default_rng(1).random((5, 4, 3))
    ref = np.zeros_like(a3)
    with_helper(a3, ref)
    got = client.submit(kk.run_computation, with_helper, a3, np.zeros_like(a3)).result()
    np.testing.assert_array_equal(got, ref)


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(case=cases())
def test_cluster_equals_numpy(client, case):
    func, options, extras, shape, chunks, mode, seed, other = case
    rng = np.random.default_rng(seed)
    dtype = np.int64 if func is kk.k2_int else np.float64
    args = _arguments(rng, func, len(shape), extras, shape, dtype)
    stencil = kk.make(func, options, mode)
    ref = stencil(*args)
    got = client.compute(stencil(*_dask_args(args, chunks, extras, other, rng))).result()
    assert got.dtype == ref.dtype
    np.testing.assert_array_equal(got, ref)
