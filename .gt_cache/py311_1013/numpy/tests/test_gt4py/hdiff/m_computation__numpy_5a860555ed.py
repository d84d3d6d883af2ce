import numbers
from typing import Tuple

import numpy as np
from gt4py.cartesian.gtc import ufuncs
from gt4py.cartesian.utils import Field


def run(*, in_field, out_field, coeff, _domain_, _origin_):

    # --- begin domain boundary shortcuts ---
    _di_, _dj_, _dk_ = 0, 0, 0
    _dI_, _dJ_, _dK_ = _domain_
    __k_mask = np.empty(_domain_, dtype=int)
    __k_mask[:, :] = np.arange(_dK_, dtype=int)
    # --- end domain padding ---

    in_field = Field(in_field, _origin_["in_field"], (True, True, True))
    out_field = Field(out_field, _origin_["out_field"], (True, True, True))
    coeff = Field(coeff, _origin_["coeff"], (True, True, True))

    lap_gen_2 = Field.empty((_dI_ + 0, _dJ_ + 0, _dK_), np.float64, (0, 0, 0), (True, True, True))
    lap_gen_3 = Field.empty((_dI_ + 0, _dJ_ + 0, _dK_), np.float64, (0, 0, 0), (True, True, True))
    res_gen_0 = Field.empty((_dI_ + 0, _dJ_ + 0, _dK_), np.float64, (0, 0, 0), (True, True, True))
    res_gen_1 = Field.empty((_dI_ + 0, _dJ_ + 0, _dK_), np.float64, (0, 0, 0), (True, True, True))
    fly_gen_0 = Field.empty((_dI_ + 0, _dJ_ + 0, _dK_), np.float64, (0, 0, 0), (True, True, True))
    fly_gen_1 = Field.empty((_dI_ + 0, _dJ_ + 0, _dK_), np.float64, (0, 0, 0), (True, True, True))
    lap_gen_0 = Field.empty((_dI_ + 0, _dJ_ + 0, _dK_), np.float64, (0, 0, 0), (True, True, True))
    lap_gen_1 = Field.empty((_dI_ + 0, _dJ_ + 0, _dK_), np.float64, (0, 0, 0), (True, True, True))
    res_gen_2 = Field.empty((_dI_ + 0, _dJ_ + 0, _dK_), np.float64, (0, 0, 0), (True, True, True))
    flx_gen_0 = Field.empty((_dI_ + 0, _dJ_ + 0, _dK_), np.float64, (0, 0, 0), (True, True, True))
    flx_gen_1 = Field.empty((_dI_ + 0, _dJ_ + 0, _dK_), np.float64, (0, 0, 0), (True, True, True))

    with np.errstate(divide="ignore", over="ignore", under="ignore", invalid="ignore"):

        # --- begin vertical block ---
        k, K = _dk_, _dK_

        # --- begin horizontal block --
        i, I = _di_ - 0, _dI_ + 0
        j, J = _dj_ - 0, _dJ_ + 0

        lap_gen_1[i:I, j:J, k:K] = (np.float64(4.0) * in_field[i - 1 : I - 1, j:J, k:K]) - (
            (
                (in_field[i:I, j:J, k:K] + in_field[i - 2 : I - 2, j:J, k:K])
                + in_field[i - 1 : I - 1, j + 1 : J + 1, k:K]
            )
            + in_field[i - 1 : I - 1, j - 1 : J - 1, k:K]
        )
        lap_gen_0[i:I, j:J, k:K] = (np.float64(4.0) * in_field[i:I, j:J, k:K]) - (
            (
                (in_field[i + 1 : I + 1, j:J, k:K] + in_field[i - 1 : I - 1, j:J, k:K])
                + in_field[i:I, j + 1 : J + 1, k:K]
            )
            + in_field[i:I, j - 1 : J - 1, k:K]
        )
        res_gen_2[i:I, j:J, k:K] = lap_gen_0[i:I, j:J, k:K] - lap_gen_1[i:I, j:J, k:K]
        flx_gen_1[i:I, j:J, k:K] = np.where(
            (
                (
                    res_gen_2[i:I, j:J, k:K]
                    * (in_field[i:I, j:J, k:K] - in_field[i - 1 : I - 1, j:J, k:K])
                )
                > np.float64(np.int64(0))
            ),
            np.float64(0.0),
            res_gen_2[i:I, j:J, k:K],
        )
        lap_gen_1[i:I, j:J, k:K] = (np.float64(4.0) * in_field[i:I, j:J, k:K]) - (
            (
                (in_field[i + 1 : I + 1, j:J, k:K] + in_field[i - 1 : I - 1, j:J, k:K])
                + in_field[i:I, j + 1 : J + 1, k:K]
            )
            + in_field[i:I, j - 1 : J - 1, k:K]
        )
        lap_gen_0[i:I, j:J, k:K] = (np.float64(4.0) * in_field[i + 1 : I + 1, j:J, k:K]) - (
            (
                (in_field[i + 2 : I + 2, j:J, k:K] + in_field[i:I, j:J, k:K])
                + in_field[i + 1 : I + 1, j + 1 : J + 1, k:K]
            )
            + in_field[i + 1 : I + 1, j - 1 : J - 1, k:K]
        )
        res_gen_2[i:I, j:J, k:K] = lap_gen_0[i:I, j:J, k:K] - lap_gen_1[i:I, j:J, k:K]
        flx_gen_0[i:I, j:J, k:K] = np.where(
            (
                (
                    res_gen_2[i:I, j:J, k:K]
                    * (in_field[i + 1 : I + 1, j:J, k:K] - in_field[i:I, j:J, k:K])
                )
                > np.float64(np.int64(0))
            ),
            np.float64(0.0),
            res_gen_2[i:I, j:J, k:K],
        )
        lap_gen_3[i:I, j:J, k:K] = (np.float64(4.0) * in_field[i:I, j:J, k:K]) - (
            (
                (in_field[i + 1 : I + 1, j:J, k:K] + in_field[i - 1 : I - 1, j:J, k:K])
                + in_field[i:I, j + 1 : J + 1, k:K]
            )
            + in_field[i:I, j - 1 : J - 1, k:K]
        )
        lap_gen_2[i:I, j:J, k:K] = (np.float64(4.0) * in_field[i:I, j - 1 : J - 1, k:K]) - (
            (
                (
                    in_field[i + 1 : I + 1, j - 1 : J - 1, k:K]
                    + in_field[i - 1 : I - 1, j - 1 : J - 1, k:K]
                )
                + in_field[i:I, j:J, k:K]
            )
            + in_field[i:I, j - 2 : J - 2, k:K]
        )
        res_gen_1[i:I, j:J, k:K] = lap_gen_3[i:I, j:J, k:K] - lap_gen_2[i:I, j:J, k:K]
        fly_gen_1[i:I, j:J, k:K] = np.where(
            (
                (
                    res_gen_1[i:I, j:J, k:K]
                    * (in_field[i:I, j:J, k:K] - in_field[i:I, j - 1 : J - 1, k:K])
                )
                > np.float64(np.int64(0))
            ),
            np.float64(0.0),
            res_gen_1[i:I, j:J, k:K],
        )
        lap_gen_3[i:I, j:J, k:K] = (np.float64(4.0) * in_field[i:I, j + 1 : J + 1, k:K]) - (
            (
                (
                    in_field[i + 1 : I + 1, j + 1 : J + 1, k:K]
                    + in_field[i - 1 : I - 1, j + 1 : J + 1, k:K]
                )
                + in_field[i:I, j + 2 : J + 2, k:K]
            )
            + in_field[i:I, j:J, k:K]
        )
        lap_gen_2[i:I, j:J, k:K] = (np.float64(4.0) * in_field[i:I, j:J, k:K]) - (
            (
                (in_field[i + 1 : I + 1, j:J, k:K] + in_field[i - 1 : I - 1, j:J, k:K])
                + in_field[i:I, j + 1 : J + 1, k:K]
            )
            + in_field[i:I, j - 1 : J - 1, k:K]
        )
        res_gen_0[i:I, j:J, k:K] = lap_gen_3[i:I, j:J, k:K] - lap_gen_2[i:I, j:J, k:K]
        fly_gen_0[i:I, j:J, k:K] = np.where(
            (
                (
                    res_gen_0[i:I, j:J, k:K]
                    * (in_field[i:I, j + 1 : J + 1, k:K] - in_field[i:I, j:J, k:K])
                )
                > np.float64(np.int64(0))
            ),
            np.float64(0.0),
            res_gen_0[i:I, j:J, k:K],
        )
        out_field[i:I, j:J, k:K] = in_field[i:I, j:J, k:K] - (
            coeff[i:I, j:J, k:K]
            * (
                ((flx_gen_0[i:I, j:J, k:K] - flx_gen_1[i:I, j:J, k:K]) + fly_gen_0[i:I, j:J, k:K])
                - fly_gen_1[i:I, j:J, k:K]
            )
        )
        # --- end horizontal block --

        # --- end vertical block ---
