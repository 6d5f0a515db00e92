"""Train a small MLP with PaddlePaddle on a devstream device (default: devstream_wgpu:0, any
Vulkan/Metal/DX12 GPU, or Mesa's lavapipe on a machine without one).

    pip install paddlepaddle==3.3.1
    cargo xtask paddle-plugins
    CUSTOM_DEVICE_ROOT=target/paddle-plugins python examples/paddle/train_mlp.py [--device devstream_wgpu:0]

The tensors live in devstream buffers on the device; Paddle runs the arithmetic through its CPU
kernel fallback, so every step moves data through devstream's streams and copies. A producer
stream prepares each batch while the default stream trains, ordered with wait_stream.
"""

import argparse
import os
import time

os.environ.setdefault("GLOG_minloglevel", "2")
os.environ.setdefault("FLAGS_enable_api_kernel_fallback", "1")

import numpy as np  # noqa: E402
import paddle  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="devstream_wgpu:0")
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    available = paddle.device.get_available_custom_device()
    kind, _, index = args.device.partition(":")
    # Paddle lists a type with one device by its type alone.
    if args.device not in available and not (kind in available and index in ("", "0")):
        raise SystemExit(
            f"{args.device} is not registered with Paddle (available: {available}); "
            "is CUSTOM_DEVICE_ROOT set to the folder `cargo xtask paddle-plugins` made?"
        )
    paddle.seed(0)
    paddle.device.set_device(args.device)
    place = paddle.CustomPlace(kind, int(index or 0))

    rng = np.random.default_rng(0)
    w_true = rng.standard_normal((16, 1)).astype("float32")
    model = paddle.nn.Sequential(
        paddle.nn.Linear(16, 64), paddle.nn.ReLU(), paddle.nn.Linear(64, 1)
    )
    optimizer = paddle.optimizer.Adam(learning_rate=0.01, parameters=model.parameters())
    loader = paddle.device.Stream(args.device)
    compute = paddle.device.current_stream(args.device)

    started = time.perf_counter()
    for step in range(args.steps):
        batch = rng.standard_normal((256, 16)).astype("float32")
        with paddle.device.stream_guard(loader):
            x = paddle.to_tensor(batch, place=place)
            y = paddle.to_tensor(np.tanh(batch @ w_true), place=place)
        compute.wait_stream(loader)
        loss = paddle.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        # set_to_zero=False: Paddle 3.3.1 zeroes gradients in place through
        # set_constant_with_place<CustomPlace>, which runs the CPU `full` kernel directly on the
        # device pointer; devstream_wgpu memory is not host-addressable (its addresses are
        # handles), so only releasing the gradients is portable across devstream's devices.
        optimizer.clear_grad(set_to_zero=False)
        if step % 50 == 0 or step == args.steps - 1:
            print(f"step {step:4d}  loss {float(loss):.5f}")
    paddle.device.synchronize(args.device)
    elapsed = time.perf_counter() - started
    print(f"{args.steps} steps on {args.device} in {elapsed:.2f} s ({args.steps / elapsed:.0f} steps/s)")


if __name__ == "__main__":
    main()
