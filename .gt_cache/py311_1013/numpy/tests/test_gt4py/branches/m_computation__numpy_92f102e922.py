import numbers
from typing import Tuple

import numpy as np
from gt4py.cartesian.gtc import ufuncs
from gt4py.cartesian.utils import Field


def run(*, u, out, _domain_, _origin_):

    # --- begin domain boundary shortcuts ---
    _di_, _dj_, _dk_ = 0, 0, 0
    _dI_, _dJ_, _dK_ = _domain_
    __k_mask = np.empty(_domain_, dtype=int)
    __k_mask[:, :] = np.arange(_dK_, dtype=int)
    # --- end domain padding ---

    u = Field(u, _origin_["u"], (True, True, True))
    out = Field(out, _origin_["out"], (True, True, True))

    mask_140263775338384_gen_0 = Field.empty(
        (_dI_ + 0, _dJ_ + 0, _dK_), bool, (0, 0, 0), (True, True, True)
    )
    mask_140263765294672_gen_0 = Field.empty(
        (_dI_ + 0, _dJ_ + 0, _dK_), bool, (0, 0, 0), (True, True, True)
    )

    with np.errstate(divide="ignore", over="ignore", under="ignore", invalid="ignore"):

        # --- begin vertical block ---
        k, K = _dk_, _dK_

        # --- begin horizontal block --
        i, I = _di_ - 0, _dI_ + 0
        j, J = _dj_ - 0, _dJ_ + 0

        mask_140263765294672_gen_0[i:I, j:J, k:K] = u[i:I, j:J, k:K] > np.float64(0.7)
        out[i:I, j:J, k:K] = np.where(
            mask_140263765294672_gen_0[i:I, j:J, k:K], np.float64(1.0), out[i:I, j:J, k:K]
        )
        mask_140263775338384_gen_0[i:I, j:J, k:K] = np.where(
            (np.bitwise_not(mask_140263765294672_gen_0[i:I, j:J, k:K])),
            (u[i:I, j:J, k:K] > np.float64(0.3)),
            mask_140263775338384_gen_0[i:I, j:J, k:K],
        )
        out[i:I, j:J, k:K] = np.where(
            np.bitwise_and(
                (np.bitwise_not(mask_140263765294672_gen_0[i:I, j:J, k:K])),
                mask_140263775338384_gen_0[i:I, j:J, k:K],
            ),
            (u[i:I, j:J, k:K] * np.float64(2.0)),
            out[i:I, j:J, k:K],
        )
        out[i:I, j:J, k:K] = np.where(
            np.bitwise_and(
                (np.bitwise_not(mask_140263765294672_gen_0[i:I, j:J, k:K])),
                (np.bitwise_not(mask_140263775338384_gen_0[i:I, j:J, k:K])),
            ),
            (-(u[i:I, j:J, k:K])),
            out[i:I, j:J, k:K],
        )
        # --- end horizontal block --

        # --- end vertical block ---
