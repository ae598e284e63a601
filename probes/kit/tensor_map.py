"""The TMA tensor map: a 128-byte CUtensorMap encoded by the driver's ``cuTensorMapEncodeTiled`` (libcuda
through ctypes: CuPy does not wrap it), with its shape rules checked on the host first."""
from __future__ import annotations


CU_TENSOR_MAP_DATA_TYPE_UINT32 = 2


def tensor_map_args(cols: int, rows: int, box_cols: int, box_rows: int) -> dict:
    """cuTensorMapEncodeTiled's shape arguments for a row-major uint32 tensor, checked against its rules:
    dims innermost first, rank - 1 byte strides (multiples of 16), box sides of 1..256 elements with the
    inner side a multiple of 16 bytes."""
    if not (0 < box_cols <= 256 and 0 < box_rows <= 256) or box_cols * 4 % 16 or cols * 4 % 16:
        raise ValueError(f"box {box_cols} x {box_rows} of a {cols}-column uint32 tensor breaks TMA's rules")
    if cols % box_cols or rows % box_rows:
        raise ValueError(f"box {box_cols} x {box_rows} does not tile a {cols} x {rows} tensor")
    return {"dims": [cols, rows], "strides": [cols * 4], "box": [box_cols, box_rows], "element_strides": [1, 1]}


def encode_tensor_map(address: int, cols: int, rows: int, box_cols: int, box_rows: int) -> bytes:
    """The 128-byte CUtensorMap of a row-major uint32 tensor at ``address``, tiled in boxes, from the
    driver's cuTensorMapEncodeTiled (libcuda through ctypes: CuPy does not wrap it); no interleave, swizzle,
    L2 promotion or out-of-bounds fill."""
    import ctypes

    args = tensor_map_args(cols, rows, box_cols, box_rows)
    encode = ctypes.CDLL("libcuda.so.1").cuTensorMapEncodeTiled
    u64, u32 = ctypes.c_uint64, ctypes.c_uint32
    encode.argtypes = [ctypes.c_void_p, ctypes.c_int, u32, ctypes.c_void_p, ctypes.POINTER(u64),
                       ctypes.POINTER(u64), ctypes.POINTER(u32), ctypes.POINTER(u32), ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_int]
    encode.restype = ctypes.c_int
    tensor_map = (u64 * 16)()
    status = encode(ctypes.addressof(tensor_map), CU_TENSOR_MAP_DATA_TYPE_UINT32, 2, address,
                    (u64 * 2)(*args["dims"]), (u64 * 1)(*args["strides"]), (u32 * 2)(*args["box"]),
                    (u32 * 2)(*args["element_strides"]), 0, 0, 0, 0)
    if status:
        raise RuntimeError(f"cuTensorMapEncodeTiled failed with CUresult {status}")
    return bytes(tensor_map)
