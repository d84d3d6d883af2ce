import numbers
from typing import Tuple

import numpy as np
from gt4py.cartesian.gtc import ufuncs
from gt4py.cartesian.utils import Field


def run(*, q, w, out, dt, _domain_, _origin_):

    # --- begin domain boundary shortcuts ---
    _di_, _dj_, _dk_ = 0, 0, 0
    _dI_, _dJ_, _dK_ = _domain_
    __k_mask = np.empty(_domain_, dtype=int)
    __k_mask[:, :] = np.arange(_dK_, dtype=int)
    # --- end domain padding ---

    q = Field(q, _origin_["q"], (True, True, True))
    w = Field(w, _origin_["w"], (True, True, True))
    out = Field(out, _origin_["out"], (True, True, True))

    flux_gen_0 = Field.empty((_dI_ + 0, _dJ_ + 0, _dK_), np.float64, (0, 0, 0), (True, True, True))

    with np.errstate(divide="ignore", over="ignore", under="ignore", invalid="ignore"):

        # --- begin vertical block ---
        k, K = _dk_, _dk_ + 1

        # --- begin horizontal block --
        i, I = _di_ - 0, _dI_ + 0
        j, J = _dj_ - 0, _dJ_ + 0

        out[i:I, j:J, k:K] = q[i:I, j:J, k:K]
        # --- end horizontal block --

        # --- end vertical block ---

        # --- begin vertical block ---
        k, K = _dk_ + 1, _dK_ - 1

        # --- begin horizontal block --
        i, I = _di_ - 0, _dI_ + 0
        j, J = _dj_ - 0, _dJ_ + 0

        flux_gen_0[i:I, j:J, k:K] = np.where(
            (w[i:I, j:J, k:K] > np.float64(np.int64(0))),
            (w[i:I, j:J, k:K] * (q[i:I, j:J, k:K] - q[i:I, j:J, k - 1 : K - 1])),
            (w[i:I, j:J, k:K] * (q[i:I, j:J, k + 1 : K + 1] - q[i:I, j:J, k:K])),
        )
        out[i:I, j:J, k:K] = q[i:I, j:J, k:K] - (dt * flux_gen_0[i:I, j:J, k:K])
        # --- end horizontal block --

        # --- end vertical block ---

        # --- begin vertical block ---
        k, K = _dK_ - 1, _dK_

        # --- begin horizontal block --
        i, I = _di_ - 0, _dI_ + 0
        j, J = _dj_ - 0, _dJ_ + 0

        out[i:I, j:J, k:K] = q[i:I, j:J, k:K]
        # --- end horizontal block --

        # --- end vertical block ---
