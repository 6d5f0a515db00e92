"""Shared set-up for the PaddlePaddle tests: which custom devices to test, and helpers.

Run with real Paddle (`pip install paddlepaddle==3.3.1`) and `CUSTOM_DEVICE_ROOT` pointing at a folder
of plug-ins (`cargo xtask paddle-plugins` makes one with devstream-paddle's libraries):

    CUSTOM_DEVICE_ROOT=target/paddle-plugins python -m pytest tests/paddle -q

`DEVSTREAM_PADDLE_DEVICES` (comma list, default `devstream_cpu:0,devstream_wgpu:0`) names the devices
under test. A listed device that Paddle did not register fails every test on it (nothing passes by
skipping); `DEVSTREAM_PADDLE_OPTIONAL=1` turns that into a skip for machines without a device.
"""

import ctypes
import glob
import os

import pytest

os.environ.setdefault("GLOG_minloglevel", "2")
os.environ.setdefault("FLAGS_enable_api_kernel_fallback", "1")

import paddle  # noqa: E402  (after the environment above)

DEFAULT_DEVICES = "devstream_cpu:0,devstream_wgpu:0"


def devices_under_test():
    text = os.environ.get("DEVSTREAM_PADDLE_DEVICES", DEFAULT_DEVICES)
    return [d.strip() for d in text.split(",") if d.strip()]


def pytest_generate_tests(metafunc):
    if "device" in metafunc.fixturenames:
        metafunc.parametrize("device", devices_under_test(), indirect=True)


@pytest.fixture
def device(request):
    """The device string (`type:id`), set as Paddle's current device for the test."""
    name = request.param
    if not is_registered(name):
        available = paddle.device.get_available_custom_device()
        message = (
            f"{name} is not registered with Paddle (available: {available}; "
            f"CUSTOM_DEVICE_ROOT={os.environ.get('CUSTOM_DEVICE_ROOT')})"
        )
        if os.environ.get("DEVSTREAM_PADDLE_OPTIONAL") == "1":
            pytest.skip(message)
        pytest.fail(message)
    previous = paddle.device.get_device()
    paddle.device.set_device(name)
    yield name
    paddle.device.current_stream(name).synchronize()
    paddle.device.set_device(previous)


def is_registered(device):
    """Whether Paddle registered `type:id` (Paddle lists a type with one device without its id)."""
    available = paddle.device.get_available_custom_device()
    kind, _, index = device.partition(":")
    return device in available or (kind in available and index in ("", "0"))


def place_of(device):
    kind, _, index = device.partition(":")
    return paddle.CustomPlace(kind, int(index or 0))


def raw(stream):
    """The native stream handle Paddle holds (identity of the plug-in's stream)."""
    return stream.stream_base.raw_stream


def plugin_library(device_type):
    """The plug-in library that serves `device_type`, loaded with ctypes (None if not found)."""
    root = os.environ.get("CUSTOM_DEVICE_ROOT", "")
    for folder in root.split(":"):
        for path in sorted(glob.glob(os.path.join(folder, "*.so"))):
            if device_type.replace("devstream_", "") in os.path.basename(path):
                try:
                    return ctypes.CDLL(path)
                except OSError:
                    return None
    return None
