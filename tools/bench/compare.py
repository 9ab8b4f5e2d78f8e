#!/usr/bin/env python3
"""Joins hipq_bench_ops and torch_ops.py output (JSON lines) into a Markdown
table: per op, case and dtype the hipq time, rate and % of peak, the PyTorch
time and rate, and the ratio hipq time / PyTorch time (> 1: hipq slower).

Usage: compare.py HIPQ.jsonl TORCH.jsonl
"""
import json
import sys


def load(path):
    head, rows = {}, {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            o = json.loads(line)
            if "impl" in o:
                rows[(o["op"], o["case"], o["dtype"])] = o
            else:
                head.update(o)
    return head, rows


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    hh, hipq = load(sys.argv[1])
    th, torch = load(sys.argv[2])
    print(f"Device: {hh.get('device')} ({hh.get('arch')}, {hh.get('sms')} SMs), {hh.get('runtime')}, "
          f"{hh.get('driver')}; PyTorch {th.get('torch')} (CUDA {th.get('cuda')}). Peaks used for %: "
          f"fp32 {hh.get('peak_fp32_tflops')} TFLOP/s, fp16/bf16 {hh.get('peak_fp16_tflops')} TFLOP/s, "
          f"{hh.get('peak_bandwidth_gbs')} GB/s.\n")
    print("| op | case | dtype | hipq ms | hipq rate | % peak | torch ms | torch rate | hipq/torch time |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for key, h in hipq.items():
        t = torch.get(key)
        tms = f"{t['ms']:.3f}" if t else "-"
        trate = f"{t['rate']:.1f} {t['unit']}" if t else "-"
        ratio = f"{h['ms'] / t['ms']:.1f}x" if t and t["ms"] > 0 else "-"
        print(f"| {key[0]} | {key[1]} | {key[2]} | {h['ms']:.3f} | {h['rate']:.1f} {h['unit']} | "
              f"{h['pct_peak']:.1f} | {tms} | {trate} | {ratio} |")


if __name__ == "__main__":
    main()
