#!/usr/bin/env python
"""Summarize an Nsight Compute SASS source export (``ncu --import R --page source --csv --print-source sass``): the
share of warp-stall samples per stall reason and per opcode (with its share of executed instructions), and the
instructions with the most samples. CPU is fine.

    python bench/ncu_stalls.py vl.sass.csv [--top 30]
"""
import argparse
import collections
import csv


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=0, help="also list the N instructions with the most samples")
    a = ap.parse_args()
    rows = list(csv.reader(open(a.csv)))
    hdr = rows[1]
    ix = {h: i for i, h in enumerate(hdr)}
    data = [r for r in rows[2:] if len(r) >= len(hdr)]
    reasons = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
    samples = [int(r[ix["Warp Stall Sampling (All Samples)"]] or 0) for r in data]
    total = max(1, sum(samples))
    by_reason = collections.Counter()
    by_op, exe = collections.Counter(), collections.Counter()
    for r, s in zip(data, samples):
        for h in reasons:
            by_reason[h] += int(r[ix[h]] or 0)
        words = r[ix["Source"]].split()
        if not words:
            continue
        op = (words[1] if words[0].startswith("@") and len(words) > 1 else words[0]).split(".")[0]
        by_op[op] += s
        exe[op] += int(r[ix["Instructions Executed"]] or 0)
    n_exe = max(1, sum(exe.values()))
    print(f"{a.csv}: {total} samples")
    for h, v in by_reason.most_common(12):
        print(f"  {h[6:]:22s} {v / total:6.1%}")
    print("  opcode      samples  executed")
    for op, v in by_op.most_common(20):
        print(f"  {op:10s} {v / total:7.1%} {exe[op] / n_exe:8.1%}")
    if a.top:
        top = sorted(range(len(data)), key=lambda i: -samples[i])[:a.top]
        for i in sorted(top):
            r = data[i]
            why = sorted(((int(r[ix[h]] or 0), h[6:]) for h in reasons), reverse=True)[:2]
            print(f"  {i:5d} {samples[i] / total:5.1%} {r[ix['Source']].strip()[:58]:58s} {why}")


if __name__ == "__main__":
    main()
