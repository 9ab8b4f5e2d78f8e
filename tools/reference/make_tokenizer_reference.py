#!/usr/bin/env python3
"""Writes reference CLIP token ids from transformers' CLIPTokenizer (what
diffusers uses) for every PartiPrompts prompt and a set of probe strings
(whitespace, case, accents, non-Latin scripts, emoji, contractions, HTML
entities, long prompts).

    python3 tools/reference/make_tokenizer_reference.py VOCAB_DIR PartiPrompts.tsv OUT.json

VOCAB_DIR holds vocab.json + merges.txt (tools/clip_vocab_to_json.py makes
them from bpe_simple_vocab_16e6.txt.gz). ids include BOS/EOS and are neither
truncated nor padded; `padded` shows the max_length=77 truncation with each of
SDXL's two pad tokens.
"""
import csv
import json
import os
import sys

import transformers
from transformers import CLIPTokenizer

PROBES = [
    "", "   ", "A  photo\tof\n a CAT", "  leading and trailing  ",
    "Hello&amp;world &lt;3 &quot;quoted&quot; &#39;x&#39;", "Café Ünïcödé ÉCOLE naïve façade",
    "ΣΊΣΥΦΟΣ ΟΔΟΣ ΣΑΣ", "İstanbul DİYARBAKIR", "straße STRASSE", "東京タワーの夜景", "北京 天安门",
    "a photo of 🐶 and 🎉!!", "👨‍👩‍👧 family ✨", "it's I'm you're they've we'll he'd", "'s's 'S 'T 'RE",
    "numbers 12345 and 3.14159, 1e10", "e\u0301cole (decomposed)", "tab\u00a0nbsp\u2003em\u3000ideo",
    "control\u0007bell zero\u200bwidth", "!!!???...", "snake_case-and-kebab/slash\\back", "العربية جميلة",
    "हिन्दी भाषा", "한국어 텍스트", "nel\u0085next line\u2028sep", "\ufb01 ligature \u2167 roman \u00bd \u00b2",
    "ǅungla Ǆ", "ÀÉÎÕÜ àéîõü", "ﬀ ﬃ", "Ⓐ ⓑ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 math", "x" * 100, "word " * 90,
    "a" + "b" * 60 + " " + "é" * 30,
]


def main():
    vocab_dir, tsv, out_path = sys.argv[1], sys.argv[2], sys.argv[3]
    tok = CLIPTokenizer(os.path.join(vocab_dir, "vocab.json"), os.path.join(vocab_dir, "merges.txt"))
    tok2 = CLIPTokenizer(os.path.join(vocab_dir, "vocab.json"), os.path.join(vocab_dir, "merges.txt"), pad_token="!")
    with open(tsv, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t"))
    prompts = [r[0] for r in rows[1:] if r]
    out = {
        "produced_by": "tools/reference/make_tokenizer_reference.py, transformers %s, %s" % (
            transformers.__version__, type(tok).__module__ + "." + type(tok).__name__),
        "bos": tok.bos_token_id, "eos": tok.eos_token_id, "pad_2": tok2.pad_token_id,
        "prompts": [], "probes": [], "padded": [],
    }
    for p in prompts:
        out["prompts"].append({"text": p, "ids": tok(p)["input_ids"]})
    for p in PROBES:
        out["probes"].append({"text": p, "ids": tok(p)["input_ids"]})
    for p in [prompts[0], prompts[-1], PROBES[-2]]:
        out["padded"].append({
            "text": p,
            "pad_eos": tok(p, padding="max_length", max_length=77, truncation=True)["input_ids"],
            "pad_bang": tok2(p, padding="max_length", max_length=77, truncation=True)["input_ids"],
        })
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
