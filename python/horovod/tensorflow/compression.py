"""Gradient compression applied around allreduce (see
horovod.common.compression)."""

import tensorflow as tf

from horovod.common.compression import (Compressor, HalfCompressor,  # noqa: F401
                                        NoneCompressor)


class FP16Compressor(HalfCompressor):
    """Sends floating-point tensors as float16."""

    half = tf.float16

    @staticmethod
    def dtype_of(tensor):
        return tensor.dtype

    @staticmethod
    def is_float(dtype):
        return dtype.is_floating

    @staticmethod
    def cast(tensor, dtype):
        return tf.cast(tensor, dtype)


class Compression:
    none = NoneCompressor
    fp16 = FP16Compressor
