"""Gradient compression applied around allreduce, for every adapter: a
compressor's compress(tensor) returns (tensor to send, ctx) and its
decompress(tensor, ctx) undoes it. Each adapter's `Compression` offers
`none` and `fp16`; the latter is a HalfCompressor told the framework's
dtypes and cast."""


class Compressor:
    """The interface: compress(tensor) -> (tensor, ctx); decompress(tensor,
    ctx) -> tensor. Subclasses implement both."""

    @staticmethod
    def compress(tensor):
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        raise NotImplementedError


class NoneCompressor(Compressor):
    """Sends tensors as they are."""

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class HalfCompressor(Compressor):
    """Sends floating-point tensors other than float16 as float16 and casts
    the result back; other tensors go as they are. A framework's subclass
    sets `half` (its float16 dtype) and defines dtype_of(tensor),
    is_float(dtype) and cast(tensor, dtype)."""

    half = None

    @classmethod
    def compress(cls, tensor):
        dtype = cls.dtype_of(tensor)
        if cls.is_float(dtype) and dtype != cls.half:
            return cls.cast(tensor, cls.half), dtype
        return tensor, None

    @classmethod
    def decompress(cls, tensor, ctx):
        return tensor if ctx is None else cls.cast(tensor, ctx)


def checked(compression, default):
    """`compression`, or `default` where it is None; anything without
    compress and decompress (the name "fp16" rather than
    hvd.Compression.fp16, say) is refused with a ValueError when the call
    or the optimizer is made, rather than failing in the middle of a
    step."""
    if compression is None:
        return default
    if not (callable(getattr(compression, "compress", None)) and
            callable(getattr(compression, "decompress", None))):
        raise ValueError(
            "compression must be a compressor such as Compression.none or "
            "Compression.fp16 (with compress and decompress), got %r"
            % (compression,))
    return compression
