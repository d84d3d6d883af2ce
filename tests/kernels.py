"""Kernels used by the Numba comparison tests; they live in a file so both compilers can
read their source."""

import math

import numpy as np

W = 0.5


def blur(a):
    return 0.25 * (a[-1, 0] + a[1, 0] + a[0, -1] + a[0, 1])


def lap1d(a):
    return a[-1] - 2 * a[0] + a[1]


def lap3d(a):
    return (a[-1, 0, 0] + a[1, 0, 0] + a[0, -1, 0] + a[0, 1, 0] + a[0, 0, -1] + a[0, 0, 1]
            - 6.0 * a[0, 0, 0])


def int_add(a):
    return a[0, 1] + a[1, 0]


def centre(a):
    return a[0, 1]


def true_div(a):
    return a[0, 1] / (a[1, 0] + 1)


def floor_div_mod(a):
    return (a[0, 1] // 3) + (a[1, 0] % -4)


def float_scale(a):
    return a[0, 1] * 2.5


def float_int_scale(a):
    return a[0, 1] * 2


def two_arrays(a, b):
    return a[0, 1] + b[1, 0] * a[0, 0]


def scalar_arg(a, s):
    return a[0, 1] * s + a[-1, 0]


def local_vars(a):
    x = a[-1, 0] + a[1, 0]
    y = x * x
    x = y - a[0, 0]
    return x


def conditional(a):
    if a[0, 0] > 0.5:
        return a[-1, 0]
    else:
        return a[1, 0] * 2.0


def conditional_expr(a):
    return a[0, 1] if a[0, 0] > a[1, 0] else -a[0, -1]


def several_returns(a):
    if a[0, 0] < 0.2:
        return 0.0
    if a[0, 0] < 0.5:
        return a[1, 0]
    return a[-1, 0] + 1.0


def unify_int_float(a):
    if a[0, 1] > 5:
        return 1
    return 2.5


def loop_sum(a):
    s = 0.0
    for i in range(-2, 3):
        s += a[i, 0]
    return s / 5


def loop_explicit(a):
    s = 0
    for i in range(5, 10):
        s += a[i]
    return s


def math_funcs(a):
    return math.sqrt(abs(a[0, 0])) + math.exp(-a[1, 0]) + math.sin(a[0, 1]) + math.log(
        1.0 + abs(a[-1, 0]))


def numpy_funcs(a):
    return np.tanh(a[0, 0]) + np.cos(a[1, 1]) + np.floor(a[0, 1] * 3.0)


def min_max(a):
    return max(a[0, 1], a[1, 0]) - min(a[0, 0], a[-1, 0], a[0, -1])


def floor_int(a):
    return math.floor(a[0, 1] * 4.0)


def bool_result(a):
    return a[0, 1] > a[0, 0] and a[1, 0] < 0.7


def weighted(a, w):
    return w[0] * a[-1] + w[1] * a[0] + w[2] * a[1]


def complex_kernel(a):
    return a[0, 1] * 2.0 - a[1, 0] * (1 + 1j)


def global_const(a):
    return W * a[0, 1] + (1 - W) * a[0, -1]


def while_loop(a):
    x = a[0, 0]
    n = 0
    while x > 0.1 and n < 20:
        x = x * 0.5
        n += 1
    return n + x


def power(a):
    return a[0, 1] ** 2 + a[1, 0] ** 3 - a[0, 0] ** 0.5


def int_power(a):
    return a[0, 1] ** 2 + a[1, 0] ** 3


def asymmetric(a):
    return a[2, -3] - a[0, 1]


def return_in_loop(a):
    for i in range(3):
        if a[i, 0] > 0.8:
            return float(i)
    return -1.0


def bit_ops(a):
    return (a[0, 1] & 6) ^ (a[1, 0] | 1) + (a[0, 0] >> 1)


def not_kernel(a):
    return not (a[0, 1] > a[0, 0])


def dynamic_offset(a, n):
    return a[n, 0] + a[0, 0]
