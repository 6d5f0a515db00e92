"""Tensors on devstream's custom devices: copies, arithmetic through Paddle's CPU kernel fallback,
training, out-of-memory, and that nothing devstream owns is left alive."""

import ctypes
import gc
import threading

import numpy as np
import paddle
import pytest

from conftest import place_of, plugin_library

DTYPES = ["float32", "float64", "float16", "int32", "int64", "uint8", "bool"]


def sample(dtype, shape, seed=0):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.startswith("float"):
        return rng.standard_normal(shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -1000), min(info.max, 1000), shape).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [[1], [7, 13], [1 << 18]])
def test_tensors_round_trip_to_the_device_and_back(device, dtype, shape):
    data = sample(dtype, shape)
    on_device = paddle.to_tensor(data, place=place_of(device))
    assert str(on_device.place).startswith("Place(" + device.split(":")[0])
    np.testing.assert_array_equal(on_device.numpy(), data)
    # Device to device and back to the host through .cpu().
    copy = on_device.clone()
    np.testing.assert_array_equal(copy.cpu().numpy(), data)


def test_an_empty_tensor_round_trips(device):
    empty = paddle.to_tensor(np.zeros([0, 3], dtype="float32"), place=place_of(device))
    assert empty.shape == [0, 3]
    assert empty.numpy().shape == (0, 3)


def test_arithmetic_through_the_cpu_fallback_equals_numpy(device):
    a = sample("float32", [64, 32], seed=1)
    b = sample("float32", [32, 16], seed=2)
    c = sample("float32", [64, 16], seed=3)
    pa, pb, pc = (paddle.to_tensor(v, place=place_of(device)) for v in (a, b, c))
    np.testing.assert_allclose(paddle.matmul(pa, pb).numpy(), a @ b, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose((pc * 2.0 - 1.0).numpy(), c * 2 - 1, rtol=1e-6)
    np.testing.assert_allclose(paddle.exp(pc).numpy(), np.exp(c), rtol=1e-5)
    np.testing.assert_allclose(paddle.nn.functional.relu(pc).numpy(), np.maximum(c, 0))
    np.testing.assert_allclose(paddle.sum(pc, axis=0).numpy(), c.sum(axis=0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(paddle.mean(pc).numpy(), c.mean(), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(paddle.argmax(pc, axis=1).numpy(), c.argmax(axis=1))
    i = sample("int64", [100], seed=4)
    pi = paddle.to_tensor(i, place=place_of(device))
    np.testing.assert_array_equal((pi * 3 + 7).numpy(), i * 3 + 7)


def train_mlp(device, steps=200):
    """Losses of a small MLP trained with SGD on a fixed regression problem."""
    paddle.seed(2026)
    np.random.seed(2026)
    paddle.device.set_device(device)
    x = paddle.to_tensor(np.random.default_rng(7).standard_normal((128, 16)).astype("float32"))
    w = np.random.default_rng(8).standard_normal((16, 1)).astype("float32")
    y = paddle.to_tensor(np.tanh(x.numpy() @ w) + 0.1)
    model = paddle.nn.Sequential(
        paddle.nn.Linear(16, 32), paddle.nn.ReLU(), paddle.nn.Linear(32, 1)
    )
    optimizer = paddle.optimizer.SGD(learning_rate=0.05, parameters=model.parameters())
    losses = []
    for _ in range(steps):
        loss = paddle.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        # set_to_zero=False: Paddle 3.3.1 zeroes gradients in place through
        # set_constant_with_place<CustomPlace>, which runs the CPU `full` kernel directly on the
        # device pointer; devstream_wgpu memory is not host-addressable (its addresses are
        # handles), so only releasing the gradients is portable across devstream's devices.
        optimizer.clear_grad(set_to_zero=False)
        losses.append(float(loss))
    return losses


def test_an_mlp_trains_to_the_same_losses_as_on_cpu(device):
    on_device = train_mlp(device)
    on_cpu = train_mlp("cpu")
    paddle.device.set_device(device)
    assert len(on_device) == 200
    np.testing.assert_allclose(on_device, on_cpu, rtol=1e-4, atol=1e-6)
    assert on_device[-1] < on_device[0] / 2, "the loss went down"


def test_two_streams_pass_data_through_wait_stream(device):
    producer = paddle.device.Stream(device)
    consumer = paddle.device.Stream(device)
    results = []
    for round_ in range(20):
        data = sample("float32", [4096], seed=round_)
        with paddle.device.stream_guard(producer):
            made = paddle.to_tensor(data, place=place_of(device)) * 2.0
        consumer.wait_stream(producer)
        with paddle.device.stream_guard(consumer):
            used = made + 1.0
        results.append((used, data))
    consumer.synchronize()
    for used, data in results:
        np.testing.assert_allclose(used.numpy(), data * 2 + 1, rtol=1e-6)


def test_a_tensor_too_large_for_the_device_is_an_out_of_memory_error(device):
    with pytest.raises(Exception) as error:
        paddle.empty([1 << 50], dtype="float32").to(place_of(device))
    # Paddle's own out-of-memory error (ResourceExhausted, "Out of memory error on ..."), which
    # Paddle raises when the plug-in's allocate succeeds with a null pointer; a failing status
    # would surface as a generic "customdevice error" instead.
    assert "out of memory" in str(error.value).lower(), str(error.value)
    # The process goes on and the device still works.
    x = paddle.to_tensor([1.0, 2.0], place=place_of(device))
    np.testing.assert_allclose((x * 2).numpy(), [2.0, 4.0])


def live_counts(device):
    """devstream's live (streams, events) counts from the plug-in, or None where not exported."""
    library = plugin_library(device.split(":")[0])
    if library is None or not hasattr(library, "devstream_paddle_live_counts"):
        return None
    streams, events = ctypes.c_uint64(), ctypes.c_uint64()
    library.devstream_paddle_live_counts(ctypes.byref(streams), ctypes.byref(events))
    return streams.value, events.value


def test_many_threads_of_stream_and_event_cycles_leave_nothing_live(device):
    if device.startswith("devstream_") and live_counts(device) is None:
        pytest.fail("devstream-paddle must export devstream_paddle_live_counts")
    if live_counts(device) is None:
        pytest.skip(f"{device}: not a devstream-paddle device (no live counts)")
    paddle.device.synchronize(device)
    gc.collect()
    before = live_counts(device)
    errors = []

    def cycles():
        try:
            paddle.device.set_device(device)
            for _ in range(1000):
                s = paddle.device.Stream(device)
                e = s.record_event()
                s.wait_event(e)
                e.query()
                s.synchronize()
                del s, e
        except Exception as error:  # noqa: BLE001 (reported below)
            errors.append(repr(error))

    threads = [threading.Thread(target=cycles) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
        assert not t.is_alive(), "a cycle hung"
    assert errors == []
    gc.collect()
    paddle.device.synchronize(device)
    assert live_counts(device) == before
