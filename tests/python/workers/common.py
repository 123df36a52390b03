"""Shared helpers for worker scripts: each check raises on failure, so a
failing worker exits non-zero and the launcher reports it."""

import torch

ALL_DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
              torch.float16, torch.bfloat16, torch.float32, torch.float64,
              torch.bool]


def close(a, b, tol=1e-5):
    a = a.double() if a.dtype != torch.bool else a
    b = b.double() if b.dtype != torch.bool else b
    if a.shape != b.shape:
        raise AssertionError("shape %s != %s" % (a.shape, b.shape))
    if a.dtype == torch.bool:
        if not torch.equal(a, b):
            raise AssertionError("%s != %s" % (a, b))
        return
    if not torch.allclose(a, b, atol=tol, rtol=tol):
        raise AssertionError("%s != %s" % (a.flatten()[:8], b.flatten()[:8]))
