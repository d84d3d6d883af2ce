"""The device-array adapter: CuPy (``__cuda_array_interface__``) and CUDA DLPack arrays run
in place on a GPU backend (``integrations.device``); ParLoop ``Dat``s hold them uncopied."""

from __future__ import annotations

import numpy as np

from . import Adapter, _device_like, is_device, register


class DeviceAdapter(Adapter):
    name = "device"
    priority = 20

    def claims_type(self, cls: type) -> bool:
        return _device_like(cls)

    def claims(self, value: object) -> bool:
        return is_device(value)

    def point_call(self, st, args: tuple, out: object) -> object:
        from ..integrations import device

        return device.point_call(st, args, out)

    def computation_call(self, st, args: tuple, kwargs: dict, origin: object, domain: object,
                         validate_args: bool, exec_info: dict | None) -> None:
        from ..integrations import device

        values, fields, origin = st.bind_call(args, kwargs, origin, exec_info)
        values, fields = device.computation_fields(st, values, fields)
        return st.run_bound(values, fields, origin, domain, validate_args, exec_info,
                            device=self)

    def upload(self, backend, host: np.ndarray) -> tuple[object, np.ndarray]:
        from .. import storage
        from ..integrations import device

        value = device.cuda_view(backend, storage.array_module(backend).asarray(host))
        return value, device.stand_in(value, writable=True)

    def dat_data(self, size: int, dim: int, data: object, dtype) -> object:
        from ..integrations import device

        return device.dat_data(size, dim, data, dtype)


register(DeviceAdapter())
