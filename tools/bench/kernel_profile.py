#!/usr/bin/env python3
"""Where the device time of a run goes, kernel by kernel, from Nsight Compute.

    ncu --clock-control none --csv --page raw --metrics gpu__time_duration.sum \\
        -o - COMMAND... > profile.csv        # (or --log-file profile.csv)
    python3 tools/bench/kernel_profile.py profile.csv [--top 30]

Groups the kernels by name (template arguments kept, so f16 and f32 variants
stay apart), and prints count, total and mean time and the share of the whole,
largest first, as a Markdown table.
"""
import argparse
import collections
import csv
import io
import re
import sys


def rows(path):
    text = open(path, encoding="utf-8", errors="replace").read()
    start = text.find('"ID"')
    if start < 0:
        sys.exit(f"{path}: no ncu CSV header found")
    reader = csv.DictReader(io.StringIO(text[start:]))
    for r in reader:
        name = r.get("Kernel Name") or r.get("Function Name") or ""
        value = r.get("gpu__time_duration.sum", "")
        try:
            ns = float(value.replace(",", ""))
        except ValueError:
            continue  # the units row
        yield name, ns


def short(name):
    name = re.sub(r"\(anonymous namespace\)::|hipq::kernels::(dev::)?|hipq::", "", name)
    name = re.sub(r"\s*\(.*\)$", "", name)  # argument list
    return name[:110]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=30)
    a = ap.parse_args()
    total = collections.Counter()
    count = collections.Counter()
    for name, ns in rows(a.csv):
        k = short(name)
        total[k] += ns
        count[k] += 1
    whole = sum(total.values())
    print(f"{sum(count.values())} kernels, {whole / 1e6:.2f} ms in all\n")
    print("| kernel | launches | total ms | mean us | share |")
    print("|---|---:|---:|---:|---:|")
    for k, ns in total.most_common(a.top):
        print(f"| `{k}` | {count[k]} | {ns / 1e6:.3f} | {ns / count[k] / 1e3:.1f} | {100 * ns / whole:.1f}% |")


if __name__ == "__main__":
    main()
