import numbers
from typing import Tuple

import numpy as np
from gt4py.cartesian.gtc import ufuncs
from gt4py.cartesian.utils import Field


def run(*, a, b, c, d, _domain_, _origin_):

    # --- begin domain boundary shortcuts ---
    _di_, _dj_, _dk_ = 0, 0, 0
    _dI_, _dJ_, _dK_ = _domain_
    __k_mask = np.empty(_domain_, dtype=int)
    __k_mask[:, :] = np.arange(_dK_, dtype=int)
    # --- end domain padding ---

    a = Field(a, _origin_["a"], (True, True, True))
    b = Field(b, _origin_["b"], (True, True, True))
    c = Field(c, _origin_["c"], (True, True, True))
    d = Field(d, _origin_["d"], (True, True, True))

    m_gen_0 = Field.empty((_dI_ + 0, _dJ_ + 0, _dK_), np.float64, (0, 0, 0), (True, True, True))

    with np.errstate(divide="ignore", over="ignore", under="ignore", invalid="ignore"):

        # --- begin vertical block ---
        k, K = _dk_, _dk_ + 1
        for k_ in range(k, K):

            # --- begin horizontal block --
            i, I = _di_ - 0, _dI_ + 0
            j, J = _dj_ - 0, _dJ_ + 0

            c[i:I, j:J, k_ : k_ + 1] = c[i:I, j:J, k_ : k_ + 1] / b[i:I, j:J, k_ : k_ + 1]
            d[i:I, j:J, k_ : k_ + 1] = d[i:I, j:J, k_ : k_ + 1] / b[i:I, j:J, k_ : k_ + 1]
            # --- end horizontal block --

        # --- end vertical block ---

        # --- begin vertical block ---
        k, K = _dk_ + 1, _dK_
        for k_ in range(k, K):

            # --- begin horizontal block --
            i, I = _di_ - 0, _dI_ + 0
            j, J = _dj_ - 0, _dJ_ + 0

            m_gen_0[i:I, j:J, k_ : k_ + 1] = np.float64(1.0) / (
                b[i:I, j:J, k_ : k_ + 1] - (a[i:I, j:J, k_ : k_ + 1] * c[i:I, j:J, k_ - 1 : k_])
            )
            c[i:I, j:J, k_ : k_ + 1] = c[i:I, j:J, k_ : k_ + 1] * m_gen_0[i:I, j:J, k_ : k_ + 1]
            d[i:I, j:J, k_ : k_ + 1] = (
                d[i:I, j:J, k_ : k_ + 1] - (a[i:I, j:J, k_ : k_ + 1] * d[i:I, j:J, k_ - 1 : k_])
            ) * m_gen_0[i:I, j:J, k_ : k_ + 1]
            # --- end horizontal block --

        # --- end vertical block ---

        # --- begin vertical block ---
        k, K = _dk_, _dK_ - 1
        for k_ in range(K - 1, k - 1, -1):

            # --- begin horizontal block --
            i, I = _di_ - 0, _dI_ + 0
            j, J = _dj_ - 0, _dJ_ + 0

            d[i:I, j:J, k_ : k_ + 1] = d[i:I, j:J, k_ : k_ + 1] - (
                c[i:I, j:J, k_ : k_ + 1] * d[i:I, j:J, k_ + 1 : k_ + 2]
            )
            # --- end horizontal block --

        # --- end vertical block ---
