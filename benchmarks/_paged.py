"""PagedAttention caches that a benchmark owns (attention_kernels.py, paged_target.py): blocks of
BLOCK tokens, one key and one value tensor per attention, bound to an infer request."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

#: Tokens per cache block (the CPU plugin's PagedAttention block size).
BLOCK = 32


def bind_zeroed_caches(
    compiled: Any, request: Any, blocks: int, is_cache: Callable[[str], bool]
) -> tuple[int, str]:
    """Bind a zeroed [blocks, heads, BLOCK, head size] tensor to every input of `compiled` that
    `is_cache` names, in the element type the compiled model asks for: (their bytes together,
    that type's name; "" when there is none)."""
    import openvino as ov

    total, kind = 0, ""
    for port in compiled.inputs:
        name = port.get_any_name()
        if is_cache(name):
            dims = port.get_partial_shape()
            shape = [blocks, *(dims[i].get_length() for i in (1, 2, 3))]
            tensor = ov.Tensor(port.get_element_type(), shape)
            np.asarray(tensor.data).view(np.uint8).fill(0)
            request.set_tensor(name, tensor)
            total += tensor.byte_size
            kind = port.get_element_type().get_type_name()
    return total, kind
