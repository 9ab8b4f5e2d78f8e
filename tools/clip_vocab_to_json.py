#!/usr/bin/env python3
"""Converts CLIP's original BPE file (bpe_simple_vocab_16e6.txt.gz) into the
vocab.json + merges.txt pair that transformers' CLIPTokenizer reads, with the
vocabulary built the way CLIP's simple_tokenizer builds it.

    python3 tools/clip_vocab_to_json.py bpe_simple_vocab_16e6.txt.gz OUT_DIR
"""
import gzip
import json
import os
import sys


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + \
        list(range(ord("\xae"), ord("\xff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def main():
    src, out = sys.argv[1], sys.argv[2]
    lines = gzip.open(src).read().decode("utf-8").split("\n")
    merges = [tuple(m.split()) for m in lines[1:49152 - 256 - 2 + 1]]
    vocab = list(bytes_to_unicode().values())
    vocab = vocab + [v + "</w>" for v in vocab]
    for m in merges:
        vocab.append("".join(m))
    vocab.extend(["<|startoftext|>", "<|endoftext|>"])
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump({v: i for i, v in enumerate(vocab)}, f, ensure_ascii=False)
    with open(os.path.join(out, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for m in merges:
            f.write(" ".join(m) + "\n")


if __name__ == "__main__":
    main()
