#!/usr/bin/env python3
"""The same ops and shapes as hipq_bench_ops, through PyTorch on the same GPU.

Prints one JSON object per line ({"impl": "torch", "op", "case", "dtype",
"ms", ...}), timed like hipq_bench_ops: warm-up calls, then `repeats` calls
each between two CUDA events, median reported. fp32 matmul/conv run without
TF32 so both sides do plain fp32 arithmetic.

Usage: torch_ops.py [--dtype f16|bf16|f32]... [--repeats N] [--warmup N]
"""
import argparse
import json
import statistics

import torch
import torch.nn.functional as F

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def quantize_rows(x):
    """e4m3 codes and dequantization scales per row, as torchao's rowwise recipe (docs/kernels.md, "fp8")."""
    amax = x.abs().amax(dim=-1, keepdim=True).to(torch.float64)
    s = (448.0 / torch.clamp(amax, min=1e-12)).to(torch.float32)
    q = (x.to(torch.float32) * s).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    return q, s.reciprocal()


def cases():
    """(op, case, input shapes, flops or 0, elements moved, fn(inputs))."""
    out = []

    def gemm(name, M, N, K, bias, geglu=False):
        shapes = [(M, K), (N, K)] + ([(N,)] if bias else [])

        def fn(t):
            y = F.linear(t[0], t[1], t[2] if bias else None)
            if not geglu:
                return y
            h, g = y.chunk(2, dim=-1)  # diffusers' GEGLU: proj, then chunk into value and gate halves
            return h * F.gelu(g)
        out.append(("matmul", name, shapes, 2.0 * M * N * K, 0, fn))

    gemm("sdxl_l1_qkv_8192x640x640", 8192, 640, 640, False)
    gemm("sdxl_l1_ff_in_8192x5120x640", 8192, 5120, 640, True)
    gemm("sdxl_l2_ff_in_2048x10240x1280", 2048, 10240, 1280, True)
    gemm("sdxl_l2_qkv_2048x1280x1280", 2048, 1280, 1280, False)
    gemm("sdxl_l2_ff_out_2048x1280x5120", 2048, 1280, 5120, True)
    gemm("sdxl_l1_ff_in_nobias_8192x5120x640", 8192, 5120, 640, False)
    gemm("sdxl_l2_ff_in_nobias_2048x10240x1280", 2048, 10240, 1280, False)
    gemm("sdxl_l1_ff_in_geglu_8192x5120x640", 8192, 5120, 640, True, True)
    gemm("sdxl_l2_ff_in_geglu_2048x10240x1280", 2048, 10240, 1280, True, True)
    gemm("sdxl_l1_ff_out_8192x640x2560", 8192, 640, 2560, True)
    gemm("sdxl_l1_proj_8192x640x640", 8192, 640, 640, True)
    gemm("sdxl_l2_proj_2048x1280x1280", 2048, 1280, 1280, True)
    gemm("sdxl_l2_cross_kv_154x2560x2048", 154, 2560, 2048, False)

    # matmul_fp8: torch._scaled_mm on e4m3 operands with row-wise scales
    # (torchao's dynamic row-wise recipe), quantized once before timing as
    # hipq_bench_ops does; bf16 out only (what row-wise _scaled_mm accepts).
    def gemm_fp8(name, M, N, K, bias, geglu=False):
        shapes = [(M, K), (N, K)] + ([(N,)] if bias else [])
        cache = {}

        def fn(t):
            if not cache:
                cache["a"] = quantize_rows(t[0])
                cache["b"] = quantize_rows(t[1])
            (qa, sa), (qb, sb) = cache["a"], cache["b"]
            y = torch._scaled_mm(qa, qb.t(), scale_a=sa, scale_b=sb.t(), bias=t[2] if bias else None,
                                 out_dtype=torch.bfloat16)
            if not geglu:
                return y
            h, g = y.chunk(2, dim=-1)
            return h * F.gelu(g)
        out.append(("matmul_fp8", name, shapes, 2.0 * M * N * K, 0, fn))

    gemm_fp8("sdxl_l1_qkv_8192x1920x640", 8192, 1920, 640, False)
    gemm_fp8("sdxl_l1_ff_in_geglu_8192x5120x640", 8192, 5120, 640, True, True)
    gemm_fp8("sdxl_l1_ff_out_8192x640x2560", 8192, 640, 2560, True)
    gemm_fp8("sdxl_l2_qkv_2048x3840x1280", 2048, 3840, 1280, False)
    gemm_fp8("sdxl_l2_ff_in_nobias_2048x10240x1280", 2048, 10240, 1280, False)
    gemm_fp8("sdxl_l2_ff_in_geglu_2048x10240x1280", 2048, 10240, 1280, True, True)
    gemm_fp8("sdxl_l2_ff_out_2048x1280x5120", 2048, 1280, 5120, True)
    gemm_fp8("sdxl_l1_proj_8192x640x640", 8192, 640, 640, True)
    gemm_fp8("sdxl_l2_proj_2048x1280x1280", 2048, 1280, 1280, True)
    out.append(("quantize_fp8_rows", "sdxl_8192x640", [(8192, 640)], 0, 1.5 * 8192 * 640,
                lambda t: quantize_rows(t[0])))

    def conv(name, N, C, H, W, O, k, s, p):
        Ho, Wo = (H + 2 * p - k) // s + 1, (W + 2 * p - k) // s + 1
        out.append(("conv2d", name, [(N, C, H, W), (O, C, k, k), (O,)], 2.0 * N * O * Ho * Wo * C * k * k, 0,
                    lambda t: F.conv2d(t[0], t[1], t[2], stride=s, padding=p)))

    conv("sdxl_2x320x128x128_o320_k3", 2, 320, 128, 128, 320, 3, 1, 1)
    conv("sdxl_2x640x64x64_o640_k3", 2, 640, 64, 64, 640, 3, 1, 1)
    conv("sdxl_2x1280x32x32_o1280_k3", 2, 1280, 32, 32, 1280, 3, 1, 1)
    conv("sdxl_2x640x32x32_o1280_k1", 2, 640, 32, 32, 1280, 1, 1, 0)

    def attn(name, B, Sq, Sk, H, D):
        def fn(t):
            q = t[0].view(B, Sq, H, D).transpose(1, 2)
            k = t[1].view(B, Sk, H, D).transpose(1, 2)
            v = t[2].view(B, Sk, H, D).transpose(1, 2)
            return F.scaled_dot_product_attention(q, k, v).transpose(1, 2)
        out.append(("attention", name, [(B, Sq, H * D), (B, Sk, H * D), (B, Sk, H * D)],
                    4.0 * B * H * Sq * Sk * D, 0, fn))

    attn("sdxl_self_b2_q4096_h10_d64", 2, 4096, 4096, 10, 64)
    attn("sdxl_cross_b2_q4096_k77_h10_d64", 2, 4096, 77, 10, 64)
    attn("sdxl_l2_self_b2_q1024_h20_d64", 2, 1024, 1024, 20, 64)

    def gn(name, shape, silu):
        n = 1
        for d in shape:
            n *= d

        def fn(t):
            y = F.group_norm(t[0], 32, t[1], t[2], 1e-5)
            return F.silu(y) if silu else y
        out.append(("group_norm", name, [shape, (shape[1],), (shape[1],)], 0, 2.0 * n, fn))

    gn("sdxl_2x320x128x128_silu", (2, 320, 128, 128), True)
    gn("sdxl_2x1280x32x32", (2, 1280, 32, 32), False)
    out.append(("layer_norm", "sdxl_2x4096x640", [(2, 4096, 640), (640,), (640,)], 0, 2.0 * 2 * 4096 * 640,
                lambda t: F.layer_norm(t[0], (640,), t[1], t[2], 1e-5)))

    def geglu(t):
        h, g = t[0].chunk(2, dim=-1)
        return h * F.gelu(g)
    out.append(("geglu", "sdxl_2x4096x10240", [(2, 4096, 10240)], 0, 1.5 * 2 * 4096 * 10240, geglu))
    out.append(("binary_add", "sdxl_2x320x128x128", [(2, 320, 128, 128)] * 2, 0, 3.0 * 2 * 320 * 128 * 128,
                lambda t: t[0] + t[1]))
    out.append(("softmax", "sdxl_20x4096x77", [(20, 4096, 77)], 0, 2.0 * 20 * 4096 * 77,
                lambda t: torch.softmax(t[0] * 0.125, dim=-1)))
    out.append(("upsample_nearest2x", "sdxl_2x1280x32x32", [(2, 1280, 32, 32)], 0, 1.25 * 2 * 1280 * 64 * 64,
                lambda t: F.interpolate(t[0], scale_factor=2.0, mode="nearest")))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtype", action="append", choices=sorted(DTYPES))
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    print(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda,
                      "device": torch.cuda.get_device_name(0)}), flush=True)
    gen = torch.Generator(device=dev).manual_seed(1234)
    for dname in args.dtype or ["f16"]:
        dt = DTYPES[dname]
        for op, name, shapes, flops, elems, fn in cases():
            if op in ("matmul_fp8", "quantize_fp8_rows") and dname != "bf16":
                continue  # row-wise _scaled_mm gives bf16 only
            scale = 0.05 if op in ("matmul", "conv2d") else 1.0
            t = [((torch.rand(s, device=dev, generator=gen) * 2 - 1) * scale).to(dt) for s in shapes]
            with torch.no_grad():
                for _ in range(args.warmup):
                    fn(t)
                times = []
                for _ in range(args.repeats):
                    e0 = torch.cuda.Event(enable_timing=True)
                    e1 = torch.cuda.Event(enable_timing=True)
                    e0.record()
                    fn(t)
                    e1.record()
                    e1.synchronize()
                    times.append(e0.elapsed_time(e1))
            ms = statistics.median(times)
            if flops:
                rate, unit = flops / (ms * 1e-3) / 1e12, "TFLOP/s"
            else:
                rate, unit = elems * t[0].element_size() / (ms * 1e-3) / 1e9, "GB/s"
            print(json.dumps({"impl": "torch", "op": op, "case": name, "dtype": dname, "ms": round(ms, 4),
                              "min_ms": round(min(times), 4), "rate": round(rate, 3), "unit": unit}), flush=True)


if __name__ == "__main__":
    main()
