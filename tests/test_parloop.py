"""ParLoop (contract.md section 3) on every backend against plain NumPy loops."""

from __future__ import annotations

import subprocess
import textwrap

import numpy as np
import pytest

import stencilkit as sk
from stencilkit.api.loop import block_coloring


def structured_mesh(nx: int, ny: int, seed: int = 0):
    """A triangulation of the unit square (two triangles per cell, jittered nodes)."""
    xs, ys = np.meshgrid(np.linspace(0, 1, nx + 1), np.linspace(0, 1, ny + 1), indexing="ij")
    xy = np.stack([xs.ravel(), ys.ravel()], axis=1)
    rng = np.random.default_rng(seed)
    inner = (xy[:, 0] > 0) & (xy[:, 0] < 1) & (xy[:, 1] > 0) & (xy[:, 1] < 1)
    xy[inner] += 0.2 / max(nx, ny) * (rng.random((inner.sum(), 2)) - 0.5)
    tris = []
    for i in range(nx):
        for j in range(ny):
            a, b = i * (ny + 1) + j, (i + 1) * (ny + 1) + j
            tris += [[a, b, b + 1], [a, b + 1, a + 1]]
    return xy, np.array(tris)


HAND_XY = np.array([[0, 0], [1, 0], [1, 1], [0, 1], [0.5, 0.5]], float)
HAND_TRI = np.array([[0, 1, 4], [1, 2, 4], [2, 3, 4], [3, 0, 4]])
MESHES = {"hand": (HAND_XY, HAND_TRI), "structured": structured_mesh(9, 7)}


def ref_areas(xy, tri):
    p = xy[tri]
    return 0.5 * np.abs((p[:, 1, 0] - p[:, 0, 0]) * (p[:, 2, 1] - p[:, 0, 1])
                        - (p[:, 2, 0] - p[:, 0, 0]) * (p[:, 1, 1] - p[:, 0, 1]))


def mesh(name):
    xy, tri = MESHES[name]
    cells, nodes = sk.Set(len(tri)), sk.Set(len(xy))
    return xy, tri, cells, nodes, sk.Map(cells, nodes, 3, tri), sk.Dat(nodes, dim=2, data=xy)


@sk.kernel
def cell_area(area, x, total):
    area[0] = 0.5 * abs((x[1, 0] - x[0, 0]) * (x[2, 1] - x[0, 1])
                        - (x[2, 0] - x[0, 0]) * (x[1, 1] - x[0, 1]))
    total[0] += area[0]


@pytest.fixture(params=["hand", "structured"])
def mesh_name(request):
    return request.param


def test_cell_areas(backend, mesh_name):
    xy, tri, cells, nodes, c2n, coords = mesh(mesh_name)
    area, total = sk.Dat(cells), sk.Global(1, 0.25)
    sk.par_loop(cell_area, cells, area(sk.WRITE), coords(sk.READ, c2n), total(sk.INC),
                backend=backend)
    np.testing.assert_allclose(area.data, ref_areas(xy, tri), rtol=1e-14)
    assert total.data.shape == (1,)
    np.testing.assert_allclose(total.data[0], 0.25 + ref_areas(xy, tri).sum(), rtol=1e-13)


@pytest.mark.parametrize("race", ["atomic", "color"])
def test_node_accumulation_through_a_map(backend, mesh_name, race):
    @sk.kernel
    def spread(area, node_vals, weight):
        for i in range(3):
            node_vals[i, 0] += area[0] / 3.0 * weight[0]
            node_vals[i, 1] += 1.0

    xy, tri, cells, nodes, c2n, _ = mesh(mesh_name)
    area = sk.Dat(cells, data=ref_areas(xy, tri))
    acc = sk.Dat(nodes, dim=2, data=np.ones((len(xy), 2)))  # INC adds to what is there
    weight = sk.Global(1, 2.0)
    sk.configure(race=race)
    sk.par_loop(spread, cells, area(sk.READ), acc(sk.INC, c2n), weight(sk.READ),
                backend=backend)
    expected = np.ones((len(xy), 2))
    for c, t in enumerate(tri):
        for n in t:
            expected[n, 0] += ref_areas(xy, tri)[c] / 3.0 * 2.0
            expected[n, 1] += 1.0
    np.testing.assert_allclose(acc.data, expected, rtol=1e-13)


def test_mass_matrix_assembly(backend, mesh_name):
    @sk.kernel
    def mass(m, x):
        a = 0.5 * abs((x[1, 0] - x[0, 0]) * (x[2, 1] - x[0, 1])
                      - (x[2, 0] - x[0, 0]) * (x[1, 1] - x[0, 1]))
        for i in range(3):
            for j in range(3):
                m[i, j] += a / 12.0 * (2.0 if i == j else 1.0)

    xy, tri, cells, nodes, c2n, coords = mesh(mesh_name)
    mat = sk.Mat(sk.Sparsity(c2n, c2n))
    sk.par_loop(mass, cells, mat(sk.INC, (c2n, c2n)), coords(sk.READ, c2n), backend=backend)
    dense = np.zeros((len(xy), len(xy)))
    local = np.full((3, 3), 1.0) + np.eye(3)
    for c, t in enumerate(tri):
        dense[np.ix_(t, t)] += ref_areas(xy, tri)[c] / 12.0 * local
    np.testing.assert_allclose(mat.to_scipy().toarray(), dense, rtol=1e-13, atol=1e-16)
    assert abs(mat.to_scipy().sum() - 1.0) < 1e-12  # the mass matrix integrates 1 exactly


def test_min_max_edge_length(backend, mesh_name):
    @sk.kernel
    def edges(x, lo, hi):
        for i in range(3):
            j = (i + 1) % 3
            d = ((x[i, 0] - x[j, 0]) ** 2 + (x[i, 1] - x[j, 1]) ** 2) ** 0.5
            lo[0] = min(lo[0], d)
            hi[0] = max(hi[0], d)

    xy, tri, cells, nodes, c2n, coords = mesh(mesh_name)
    lo, hi = sk.Global(1, 0.3), sk.Global(1, 0.0)  # the current values take part
    sk.par_loop(edges, cells, coords(sk.READ, c2n), lo(sk.MIN), hi(sk.MAX), backend=backend)
    p = xy[tri]
    lengths = np.linalg.norm(p - np.roll(p, -1, axis=1), axis=2)
    assert lo.data[0] == pytest.approx(min(0.3, lengths.min()), rel=1e-14)
    assert hi.data[0] == pytest.approx(lengths.max(), rel=1e-14)


def test_direct_axpy(backend):
    s = sk.Set(1000)
    x = sk.Dat(s, data=np.arange(1000.0))
    y = sk.Dat(s, data=np.ones(1000))
    alpha = sk.Global(1, 3.0)

    @sk.kernel
    def axpy(y, x, a):
        y[0] = a[0] * x[0] + y[0]

    sk.par_loop(axpy, s, y(sk.RW), x(sk.READ), alpha(sk.READ), backend=backend)
    np.testing.assert_array_equal(y.data, 3.0 * np.arange(1000.0) + 1)


def test_map_entry_arguments(backend, mesh_name):
    @sk.kernel
    def first_minus_last(out, a, b):
        out[0] = a[0] - b[0]

    xy, tri, cells, nodes, c2n, coords = mesh(mesh_name)
    xs = sk.Dat(nodes, data=xy[:, 0])
    out = sk.Dat(cells)
    sk.par_loop(first_minus_last, cells, out(sk.WRITE), xs(sk.READ, c2n[0]),
                xs(sk.READ, c2n[2]), backend=backend)
    np.testing.assert_array_equal(out.data, xy[tri[:, 0], 0] - xy[tri[:, 2], 0])


def test_c_string_kernel():
    xy, tri, cells, nodes, c2n, coords = mesh("structured")
    code = textwrap.dedent("""
        void c_area(double *area, const double *x) {
            area[0] = 0.5 * fabs((x[2] - x[0]) * (x[5] - x[1]) - (x[4] - x[0]) * (x[3] - x[1]));
        }
    """)
    area = sk.Dat(cells)
    loop = sk.ParLoop(sk.Kernel(code, "c_area"), cells, area(sk.WRITE), coords(sk.READ, c2n),
                      backend="c")
    assert "c_area(l0, l1)" in loop.generate()
    loop.compute()
    np.testing.assert_allclose(area.data, ref_areas(xy, tri), rtol=1e-14)
    with pytest.raises(sk.StencilError, match="C-string"):
        sk.ParLoop(sk.Kernel(code, "c_area"), cells, area(sk.WRITE), coords(sk.READ, c2n),
                   backend="numpy").compute()


def test_generated_code_is_reused_for_new_data_and_sizes():
    sk.cache.clear(disk=False)
    xy, tri, cells, nodes, c2n, coords = mesh("hand")
    area = sk.Dat(cells)
    loop = sk.ParLoop(cell_area, cells, area(sk.WRITE), coords(sk.READ, c2n), sk.Global(1)(sk.INC),
                      backend="c")
    code = loop.generate()
    loop.compute()
    before = sk.cache.info()
    # a different mesh, new data: the same generated code, no new build
    xy2, tri2 = MESHES["structured"]
    cells2, nodes2 = sk.Set(len(tri2)), sk.Set(len(xy2))
    m2 = sk.Map(cells2, nodes2, 3, tri2)
    area2 = sk.Dat(cells2)
    loop2 = sk.ParLoop(cell_area, cells2, area2(sk.WRITE), sk.Dat(nodes2, dim=2, data=xy2)(
        sk.READ, m2), sk.Global(1)(sk.INC), backend="c")
    assert loop2.generate() == code
    loop2.compute()
    coords.data[:] *= 2.0
    loop.compute()
    after = sk.cache.info()
    assert after["builds"] == before["builds"]
    np.testing.assert_allclose(area.data, 4 * ref_areas(HAND_XY, HAND_TRI), rtol=1e-14)
    np.testing.assert_allclose(area2.data, ref_areas(xy2, tri2), rtol=1e-14)


def test_lazy_evaluation_matches_eager(backend):
    xy, tri, cells, nodes, c2n, coords = mesh("structured")

    @sk.kernel
    def double(a):
        a[0] = 2.0 * a[0]

    def program():
        area, total = sk.Dat(cells), sk.Global(1)
        sk.par_loop(cell_area, cells, area(sk.WRITE), coords(sk.READ, c2n), total(sk.INC),
                    backend=backend)
        sk.par_loop(double, cells, area(sk.RW), backend=backend)
        return area, total

    eager_area, eager_total = program()
    eager = eager_area.data.copy()
    sk.configure(lazy=True)
    lazy_area, lazy_total = program()
    assert sk.runtime.lazy.pending() == 2          # nothing ran yet
    np.testing.assert_array_equal(lazy_area.data, eager)   # reading runs the queue in order
    assert sk.runtime.lazy.pending() == 0
    assert lazy_total.data[0] == eager_total.data[0]
    sk.configure(lazy=False)


def test_static_export_builds_without_python(tmp_path):
    xy, tri, cells, nodes, c2n, coords = mesh("structured")
    area, total = sk.Dat(cells), sk.Global(1)
    loop = sk.ParLoop(cell_area, cells, area(sk.WRITE), coords(sk.READ, c2n), total(sk.INC),
                      backend="c")
    loop.compute()
    c_file, h_file = sk.export(loop, tmp_path)
    assert "Arguments after the blocks, in order" in h_file.read_text()
    np.savetxt(tmp_path / "xy.txt", xy)
    np.savetxt(tmp_path / "tri.txt", tri, fmt="%d")
    driver = tmp_path / "driver.c"
    driver.write_text(textwrap.dedent(f"""
        #include <stdio.h>
        #include <stdlib.h>
        #include "{h_file.name}"
        int main(void) {{
            enum {{ NN = {len(xy)}, NC = {len(tri)} }};
            static double xy[NN * 2], area[NC], total[1];
            static int32_t tri[NC * 3];
            FILE *f = fopen("xy.txt", "r");
            for (int i = 0; i < NN * 2; ++i) if (fscanf(f, "%lf", &xy[i]) != 1) return 1;
            fclose(f);
            f = fopen("tri.txt", "r");
            for (int i = 0; i < NC * 3; ++i) if (fscanf(f, "%d", &tri[i]) != 1) return 1;
            fclose(f);
            int64_t blocks[2] = {{0, NC}};
            int status = sk_parloop_cell_area(1, blocks, area, xy, tri, total);
            for (int i = 0; i < NC; ++i) printf("%.17g\\n", area[i]);
            printf("%.17g\\n", total[0]);
            return status;
        }}
    """))
    subprocess.run(["gcc", "-O2", "-fopenmp", "-o", "driver", "driver.c", c_file.name, "-lm"],
                   cwd=tmp_path, check=True)
    out = subprocess.run(["./driver"], cwd=tmp_path, capture_output=True, text=True, check=True)
    values = np.array(out.stdout.split(), float)
    np.testing.assert_array_equal(values[:-1], area.data)
    assert values[-1] == pytest.approx(total.data[0], rel=1e-14)


def test_static_export_of_a_point_stencil(tmp_path):
    @sk.stencil(backend="c")
    def diff(a):
        return a[1] - a[-1]

    diff(np.arange(10.0))
    c_file, h_file = sk.export(diff, tmp_path)
    assert "int sk_diff_point(" in h_file.read_text()
    subprocess.run(["gcc", "-O2", "-fopenmp", "-c", c_file.name], cwd=tmp_path, check=True)


def test_block_coloring_is_valid():
    _, tri = MESHES["structured"]
    colours = block_coloring(len(tri), [tri], [tri.max() + 1], block=8)
    covered = sorted(e for blocks in colours for s, t in blocks for e in range(s, t))
    assert covered == list(range(len(tri)))
    assert len(colours) > 1
    for blocks in colours:   # blocks of one colour share no node
        seen: set[int] = set()
        for s, t in blocks:
            nodes = set(tri[s:t].ravel().tolist())
            assert not nodes & seen
            seen |= nodes


# ------------------------------------------------------------------ bad input


def test_map_outside_target_set():
    a, b = sk.Set(2), sk.Set(3)
    with pytest.raises(sk.StencilError, match="outside the target set"):
        sk.Map(a, b, 2, [[0, 1], [2, 3]])
    with pytest.raises(sk.StencilError, match="shape"):
        sk.Map(a, b, 2, [[0, 1, 2]])


def test_arity_or_dim_mismatch_with_the_kernel():
    xy, tri, cells, nodes, c2n, coords = mesh("hand")
    scalar_coords = sk.Dat(nodes, data=xy[:, 0])   # dim 1, but the kernel reads x[i, 1]
    with pytest.raises(sk.StencilError, match="out of range") as info:
        sk.ParLoop(cell_area, cells, sk.Dat(cells)(sk.WRITE), scalar_coords(sk.READ, c2n),
                   sk.Global(1)(sk.INC))
    assert "test_parloop.py" in str(info.value)


def test_write_global_is_rejected():
    s = sk.Set(3)

    @sk.kernel
    def k(g):
        g[0] = 1.0

    with pytest.raises(sk.ArgumentError, match="Global cannot be WRITE"):
        sk.ParLoop(k, s, sk.Global(1)(sk.WRITE))


def test_kernel_writing_a_read_argument():
    s = sk.Set(3)

    @sk.kernel
    def k(a):
        a[0] = 1.0

    with pytest.raises(sk.StencilTypeError, match="READ"):
        sk.ParLoop(k, s, sk.Dat(s)(sk.READ))


def test_inc_into_direct_dat_written_by_another_argument():
    s = sk.Set(3)
    d = sk.Dat(s)

    @sk.kernel
    def k(a, b):
        a[0] += 1.0
        b[0] = 2.0

    with pytest.raises(sk.ArgumentError, match="also writes"):
        sk.ParLoop(k, s, d(sk.INC), d(sk.WRITE))


def test_dtype_the_kernel_does_not_accept():
    s = sk.Set(3)
    z = sk.Dat(s, data=np.ones(3) + 1j)
    out = sk.Dat(s)

    @sk.kernel
    def k(o, z):
        o[0] = z[0] * 2.0    # complex into a float64 Dat

    with pytest.raises(sk.StencilTypeError, match="complex"):
        sk.ParLoop(k, s, out(sk.WRITE), z(sk.READ))


def test_wrong_map_for_the_dat():
    xy, tri, cells, nodes, c2n, coords = mesh("hand")
    with pytest.raises(sk.ArgumentError, match="points into"):
        sk.ParLoop(cell_area, cells, sk.Dat(cells)(sk.WRITE), sk.Dat(cells, dim=2)(sk.READ, c2n),
                   sk.Global(1)(sk.INC))


@pytest.mark.parametrize("race", ["atomic", "color"])
def test_min_max_through_a_map(backend, mesh_name, race):
    @sk.kernel
    def extremes(area, lo, hi):
        for i in range(3):
            lo[i, 0] = min(lo[i, 0], area[0])
            hi[i, 0] = max(hi[i, 0], area[0])

    xy, tri, cells, nodes, c2n, _ = mesh(mesh_name)
    areas = ref_areas(xy, tri)
    area = sk.Dat(cells, data=areas)
    lo = sk.Dat(nodes, data=np.full(len(xy), 0.3))   # current values take part
    hi = sk.Dat(nodes)
    sk.configure(race=race)
    sk.par_loop(extremes, cells, area(sk.READ), lo(sk.MIN, c2n), hi(sk.MAX, c2n),
                backend=backend)
    exp_lo, exp_hi = np.full(len(xy), 0.3), np.zeros(len(xy))
    for c, t in enumerate(tri):
        for n in t:
            exp_lo[n] = min(exp_lo[n], areas[c])
            exp_hi[n] = max(exp_hi[n], areas[c])
    np.testing.assert_array_equal(lo.data, exp_lo)
    np.testing.assert_array_equal(hi.data, exp_hi)


def test_direct_min(backend):
    s = sk.Set(5)
    d = sk.Dat(s, data=[5.0, 1.0, 3.0, 0.0, 9.0])

    @sk.kernel
    def clamp(x):
        x[0] = min(x[0], 2.0)

    sk.par_loop(clamp, s, d(sk.MIN), backend=backend)
    np.testing.assert_array_equal(d.data, [2.0, 1.0, 2.0, 0.0, 2.0])
