"""torch.distributed (NCCL) all_reduce beside `bench-comm sweep` (issue 14).

The same measurement as bench-comm: in-place float32 sum all_reduce of 8 B ... --max-bytes (x4 per
step), --iters calls per size (x10 below 1 MiB) after 5 warm-up calls, timed on each rank from a
barrier to its torch.cuda.synchronize(); rank 0's time is printed with the algorithm bandwidth and
NCCL's bus bandwidth (x 2(n-1)/n). Ranks are processes, rank r on cuda:r.

    NCCL_NVLS_ENABLE=0 python peers_comm.py --ranks 2 [--max-bytes 4294967296] [--iters 20]
"""

import argparse
import os
import socket
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(rank, world, args, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    device = torch.device(f"cuda:{rank}")
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=device)
    factor = 2.0 * (world - 1) / world if world > 1 else 1.0
    if rank == 0:
        print(
            f"peers_comm: torch {torch.__version__} NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}, "
            f"{world} ranks (processes): in-place float32 sum all_reduce, {args.iters} calls per size"
        )
        print(f"{'bytes':>12} {'us/call':>12} {'algbw GB/s':>14} {'busbw GB/s':>14}")
    size = 8
    while size <= args.max_bytes:
        n = max(size // 4, 1)
        t = torch.zeros(n, dtype=torch.float32, device=device)
        iters = args.iters * 10 if size < (1 << 20) else args.iters
        for _ in range(5):
            dist.all_reduce(t)
        torch.cuda.synchronize()
        dist.barrier()
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(t)
        torch.cuda.synchronize()
        seconds = (time.perf_counter() - start) / iters
        dist.barrier()
        if rank == 0:
            algbw = size / seconds / 1e9
            print(f"{size:>12} {seconds * 1e6:>12.2f} {algbw:>14.3f} {algbw * factor:>14.3f}", flush=True)
        del t
        size *= 4
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--max-bytes", type=int, default=4 << 30)
    parser.add_argument("--iters", type=int, default=20)
    args = parser.parse_args()
    mp.spawn(worker, args=(args.ranks, args, free_port()), nprocs=args.ranks, join=True)


if __name__ == "__main__":
    main()
