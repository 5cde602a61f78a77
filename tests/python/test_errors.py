"""The typed errors of the host layer, one test each: the C++ validator's class arrives as
the Python class of the same name (DTypeError is a TypeError, the others ValueErrors), and
the message names the operand, what was expected and what came."""

from __future__ import annotations

import numpy as np
import pytest
from harness import Inputs, Layer, Pool

import kda_decode as kd


def _setup():
    layer = Layer(2, seed=1515)
    pool = Pool(layer, 6, 4, records=(6, 2))
    kda = layer.prepared(conv_dim_first=True)
    return layer, pool, kda, Inputs(layer, 2), np.zeros((2, layer.D), np.uint16)


SLOTS = np.array([1, 2], np.int32)


def test_dtype_error_is_a_type_error():
    _, pool, kda, inp, out = _setup()
    with pytest.raises(kd.DTypeError, match=r"^out: expected dtype bf16, got f32$") as ei:
        kda.run(inp.projected, out.astype(np.float32), pool.caches(), SLOTS)
    assert isinstance(ei.value, TypeError) and not isinstance(ei.value, ValueError)
    with pytest.raises(kd.DTypeError, match="slots"):  # not a tensor: the bindings' conversion
        kda.run(inp.projected, out, pool.caches(), [1, 2])


def test_shape_error():
    _, pool, kda, inp, out = _setup()
    with pytest.raises(kd.ShapeError, match=r"^out: expected dimension 1 \(D = 128·H\) = 256, got 128") as ei:
        kda.run(inp.projected, out[:, :128], pool.caches(), SLOTS)
    assert isinstance(ei.value, ValueError)


def test_layout_error():
    layer, pool, kda, inp, _ = _setup()
    with pytest.raises(kd.LayoutError, match=r"^out: expected unit inner stride, got strides") as ei:
        kda.run(inp.projected, np.zeros((2, 2 * layer.D), np.uint16)[:, ::2], pool.caches(), SLOTS)
    assert isinstance(ei.value, ValueError)


def test_argument_error():
    _, pool, kda, inp, out = _setup()
    with pytest.raises(kd.ArgumentError, match=r"^q: expected tokens per request in \[1, 16\], got 17$") as ei:
        kda.run(inp.projected, out, pool.caches(), np.array([[1, 2]], np.int32), q=17, mode="per_token")
    assert isinstance(ei.value, ValueError)
    with pytest.raises(
        kd.ArgumentError, match=r"^mode: expected one of decode, append, per_token, record, fused, got 'x'"
    ):
        kda.run(inp.projected, out, pool.caches(), SLOTS, mode="x")
    with pytest.raises(kd.ArgumentError, match=r"^correction: expected a tensor"):
        kda.run(inp.projected, out, kd.Caches(pool.conv, pool.state), SLOTS, mode="record")
    with pytest.raises(TypeError, match=r"^q: expected an int"):  # type conversion stays in Python
        kda.run(inp.projected, out, pool.caches(), SLOTS, q=1.0)


def test_plan_error():
    layer, pool, _, _, _ = _setup()
    kda = layer.prepared(conv_dim_first=True, policies={("decode", 2, 1): kd.Policy(variant="wide")})
    with pytest.raises(
        kd.PlanError, match=r"^policy for step \(decode, B=2, q=1\): variant 'wide' needs the CUDA"
    ) as ei:
        kda.prepare(pool.caches())
    assert isinstance(ei.value, ValueError)


def test_device_error():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("a DeviceError needs a tensor on another device: no CUDA device visible to torch")
    _, pool, kda, inp, out = _setup()
    with pytest.raises(kd.DeviceError, match=r"^slots: expected device cpu \(the layer's weights\), got cuda:0") as ei:
        kda.run(inp.projected, out, pool.caches(), torch.tensor([1, 2], dtype=torch.int32, device="cuda"))
    assert isinstance(ei.value, ValueError)


def test_every_error_is_an_error_of_the_package():
    for cls in (kd.ShapeError, kd.LayoutError, kd.DeviceError, kd.ArgumentError, kd.PlanError, kd.Error):
        assert issubclass(cls, ValueError) and not issubclass(cls, TypeError)
    assert issubclass(kd.DTypeError, TypeError) and not issubclass(kd.DTypeError, ValueError)
