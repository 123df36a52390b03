"""Gradient compressors (horovod.common.compression and each adapter's
Compression), in one process: what fp16 sends and how it restores."""

import pytest

from horovod.common.compression import NoneCompressor


def test_none_sends_the_tensor_itself():
    t = object()
    sent, ctx = NoneCompressor.compress(t)
    assert sent is t and ctx is None
    assert NoneCompressor.decompress(sent, ctx) is t


def test_torch_fp16_casts_wider_floats_only():
    torch = pytest.importorskip("torch")
    from horovod.torch.compression import Compression
    for dtype in (torch.float32, torch.float64, torch.bfloat16):
        t = torch.tensor([1.5, -2.25], dtype=dtype)
        sent, ctx = Compression.fp16.compress(t)
        assert sent.dtype == torch.float16 and ctx == dtype
        back = Compression.fp16.decompress(sent, ctx)
        assert back.dtype == dtype and torch.equal(back, t)
    for t in (torch.tensor([1, 2]), torch.tensor([0.5], dtype=torch.float16),
              torch.tensor([True])):
        sent, ctx = Compression.fp16.compress(t)
        assert sent is t and ctx is None
        assert Compression.fp16.decompress(sent, ctx) is t
    assert Compression.none is NoneCompressor


def test_tensorflow_fp16_casts_wider_floats_only():
    tf = pytest.importorskip("tensorflow")
    from horovod.tensorflow.compression import Compression
    for dtype in (tf.float32, tf.float64):
        t = tf.constant([1.5, -2.25], dtype=dtype)
        sent, ctx = Compression.fp16.compress(t)
        assert sent.dtype == tf.float16 and ctx == dtype
        back = Compression.fp16.decompress(sent, ctx)
        assert back.dtype == dtype
        assert back.numpy().tolist() == [1.5, -2.25]
    t = tf.constant([1, 2])
    sent, ctx = Compression.fp16.compress(t)
    assert sent is t and ctx is None


def test_keras_fp16_casts_wider_floats_only():
    keras = pytest.importorskip("keras")
    from horovod._keras import Compression
    t = keras.ops.convert_to_tensor([1.5, -2.25], dtype="float32")
    sent, ctx = Compression.fp16.compress(t)
    assert keras.backend.standardize_dtype(sent.dtype) == "float16"
    assert ctx == "float32"
    back = Compression.fp16.decompress(sent, ctx)
    assert keras.backend.standardize_dtype(back.dtype) == "float32"
    i = keras.ops.convert_to_tensor([1, 2], dtype="int32")
    sent, ctx = Compression.fp16.compress(i)
    assert sent is i and ctx is None
