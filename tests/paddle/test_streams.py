"""paddle.device.Stream / Event behaviours (the seed document) on devstream's custom devices."""

import threading

import numpy as np
import paddle
import pytest

from conftest import is_registered, place_of, raw


def test_device_is_registered_with_its_type(device):
    kind, _, index = device.partition(":")
    assert kind in paddle.device.get_all_custom_device_type()
    assert is_registered(device)
    if hasattr(paddle.device, "device_count"):
        count = paddle.device.device_count(kind)
    else:
        # Paddle 2.x has no device_count: its list of available custom devices says the same.
        count = sum(
            1
            for name in paddle.device.get_available_custom_device()
            if name.partition(":")[0] == kind
        )
    assert count >= int(index) + 1


@pytest.mark.parametrize("priority", [1, 2])
def test_streams_of_each_priority_are_distinct_and_ordered(device, priority):
    # The custom-device C ABI's create_stream carries no priority, so Paddle accepts 1 (high)
    # and 2 (normal) and both give a working stream of their own.
    s = paddle.device.Stream(device, priority=priority)
    t = paddle.device.Stream(device, priority=priority)
    assert raw(s) != raw(t)
    x = paddle.to_tensor(np.arange(64, dtype="float32"), place=place_of(device))
    with paddle.device.stream_guard(s):
        y = x * 3.0 + 1.0
    s.synchronize()
    assert s.query() is True
    np.testing.assert_allclose(y.numpy(), np.arange(64, dtype="float32") * 3 + 1)


def test_device_synchronize_waits_for_every_stream(device):
    streams = [paddle.device.Stream(device) for _ in range(3)]
    x = paddle.ones([64, 64], dtype="float32").to(place_of(device))
    results = []
    for s in streams:
        with paddle.device.stream_guard(s):
            results.append(paddle.matmul(x, x))
    paddle.device.synchronize(device)
    assert all(s.query() for s in streams)
    assert all(float(r[3, 3]) == 64.0 for r in results)


def test_a_new_stream_is_idle_and_synchronize_leaves_it_idle(device):
    s = paddle.device.Stream(device)
    assert s.query() is True
    x = paddle.ones([256, 256], dtype="float32").to(place_of(device))
    with paddle.device.stream_guard(s):
        y = paddle.matmul(x, x)
    s.synchronize()
    assert s.query() is True
    assert float(y[0, 0]) == 256.0


def test_record_event_returns_a_new_or_the_given_event(device):
    s = paddle.device.Stream(device)
    e1 = s.record_event()
    assert isinstance(e1, paddle.device.Event)
    e2 = paddle.device.Event()
    assert s.record_event(e2) is e2
    s.synchronize()
    assert e1.query() is True and e2.query() is True
    e2.synchronize()


def test_a_never_recorded_event_is_complete(device):
    e = paddle.device.Event()
    assert e.query() is True
    e.synchronize()


def test_wait_event_orders_a_consumer_behind_a_producer(device):
    producer = paddle.device.Stream(device)
    consumer = paddle.device.Stream(device)
    data = np.random.default_rng(1).standard_normal((128, 64)).astype("float32")
    x = paddle.to_tensor(data, place=place_of(device))
    with paddle.device.stream_guard(producer):
        y = paddle.exp(x) * 2.0
    done = producer.record_event()
    consumer.wait_event(done)
    with paddle.device.stream_guard(consumer):
        z = paddle.sum(y, axis=1)
    consumer.synchronize()
    np.testing.assert_allclose(z.numpy(), (np.exp(data) * 2).sum(axis=1), rtol=1e-5)


def test_wait_stream_orders_a_consumer_behind_a_producer(device):
    producer = paddle.device.Stream(device)
    consumer = paddle.device.Stream(device)
    x = paddle.to_tensor(np.arange(1000, dtype="float32"), place=place_of(device))
    with paddle.device.stream_guard(producer):
        y = x + 5.0
    consumer.wait_stream(producer)
    with paddle.device.stream_guard(consumer):
        z = y * y
    consumer.synchronize()
    np.testing.assert_allclose(z.numpy(), (np.arange(1000, dtype="float32") + 5) ** 2)


def test_stream_guard_sets_and_restores_the_current_stream(device):
    before = paddle.device.current_stream(device)
    s = paddle.device.Stream(device)
    with paddle.device.stream_guard(s):
        assert raw(paddle.device.current_stream(device)) == raw(s)
        inner = paddle.device.Stream(device)
        with paddle.device.stream_guard(inner):
            assert raw(paddle.device.current_stream(device)) == raw(inner)
        assert raw(paddle.device.current_stream(device)) == raw(s)
    assert raw(paddle.device.current_stream(device)) == raw(before)


def test_set_stream_returns_the_previous_stream(device):
    before = paddle.device.current_stream(device)
    s = paddle.device.Stream(device)
    previous = paddle.device.set_stream(s)
    try:
        assert raw(previous) == raw(before)
        assert raw(paddle.device.current_stream(device)) == raw(s)
    finally:
        paddle.device.set_stream(previous)
    assert raw(paddle.device.current_stream(device)) == raw(before)


def test_timed_events_record_query_and_synchronize(device):
    s = paddle.device.Stream(device)
    start = paddle.device.Event(enable_timing=True)
    end = paddle.device.Event(enable_timing=True)
    start.record(s)
    with paddle.device.stream_guard(s):
        paddle.matmul(paddle.ones([128, 128]), paddle.ones([128, 128]))
    end.record(s)
    end.synchronize()
    assert start.query() is True and end.query() is True
    # The custom-device C ABI has no event timing. Paddle 3.3.1's custom-device event has no
    # elapsed_time, so the call fails loudly rather than returning a made-up number; Paddle 2.x's
    # Event.elapsed_time is a Python stub that returns 0 for every device, plug-in or not.
    if paddle.__version__.split(".")[0] == "2":
        assert start.elapsed_time(end) == 0
    else:
        with pytest.raises(AttributeError):
            start.elapsed_time(end)


def test_streams_and_events_from_many_threads(device):
    errors = []

    def cycles():
        try:
            paddle.device.set_device(device)
            for _ in range(200):
                s = paddle.device.Stream(device)
                e = s.record_event()
                other = paddle.device.Stream(device)
                other.wait_event(e)
                other.synchronize()
                assert e.query() is True
        except Exception as error:  # noqa: BLE001 (reported below)
            errors.append(repr(error))

    threads = [threading.Thread(target=cycles) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
        assert not t.is_alive(), "a stream/event cycle hung"
    assert errors == []
