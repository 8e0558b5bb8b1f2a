#!/usr/bin/env python3
"""First call on a cold page cache, with and without weight read-ahead, next to the disk.

    benches/coldstart.py [--model NAME] [--depths 0,1,2,4,99] [--reps 5] [--threads 2]
                         [--baseline BIN] [--limit-mib MIB [--budget-mib MIB]]

For each read-ahead depth (`turboinfer run --readahead D`: layers asked ahead of the pass; 0 =
none, the kernel's fault-time read-around only) and each repetition, the page cache is dropped
(`echo 1 > /proc/sys/vm/drop_caches` as root; else `posix_fadvise(DONTNEED)` on the model and
pack files, which frees only pages no process maps), then one process loads the model, prefills
a fixed prompt and decodes 8 tokens. Prints, per depth, the median wall time of that process
and of its prefill, beside:
  - the same run on a warm cache (the compute alone),
  - the disk roofline: the bytes one pass reads (`turboinfer info`) over the files' sequential
    read bandwidth measured here after the same drop (`cat` of the model and pack files), plus
    the warm time,
  - with --baseline, the same first call by another build's `turboinfer` binary (one without
    read-ahead: an earlier revision, built in a worktree), cold and warm,
  - with --limit-mib, a model larger than its memory: 16 tokens decoded inside a memory cgroup
    of that limit (v1 or v2, created and removed here), with the default page-cache behaviour
    and with the weights streamed (`--weight-budget`, default half the limit): decode speed,
    peak RSS and the cgroup's peak memory.
Depths are interleaved within each repetition, so drift in the machine hits them alike. Nothing
here is a test; run it on an otherwise idle machine (no PostgreSQL backend holding the model:
mapped pages survive a drop).
"""
import argparse
import json
import mmap
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.environ.get("TURBOINFER_MODELS_DIR", "/var/lib/turboinfer/models")
# About 120 tokens: long enough that prefill runs as batches, short enough that the cold run
# is dominated by reading the weights.
PROMPT = ("-- PostgreSQL schema\nCREATE TABLE customers (id integer PRIMARY KEY, name text, "
          "city text, created_at timestamp);\nCREATE TABLE orders (id integer PRIMARY KEY, "
          "customer_id integer REFERENCES customers(id), amount numeric, status text, "
          "ordered_at timestamp);\n-- Question: total amount of the orders of each city in 2024, "
          "largest first\nSELECT")


def drop_cache(files):
    """Drops the page cache; returns how ('drop_caches' or 'fadvise')."""
    subprocess.run(["sync"], check=True)
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("1\n")
        return "drop_caches"
    except OSError:
        for p in files:
            fd = os.open(p, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
        return "fadvise"


def read_bandwidth(files):
    """Read bandwidth of the disk after a drop, in bytes per second: (`cat` of `files` one after
    the other, the same bytes asked all at once as the read-ahead asks them, with
    `madvise(MADV_WILLNEED)` in 128 KiB pieces and waited for until resident). The second keeps
    the device's queue full and is the faster here: the roofline uses it."""
    total = sum(os.path.getsize(p) for p in files)
    drop_cache(files)
    t0 = time.monotonic()
    subprocess.run(["cat", *files], check=True, stdout=subprocess.DEVNULL)
    seq = total / (time.monotonic() - t0)
    drop_cache(files)
    maps = []
    t0 = time.monotonic()
    for p in files:
        with open(p, "rb") as f:
            m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
        maps.append(m)
        for off in range(0, len(m), 128 << 10):
            m.madvise(mmap.MADV_WILLNEED, off, min(128 << 10, len(m) - off))
    while True:
        res = subprocess.run(["fincore", "-b", "-n", "-o", "RES", *files], check=True,
                             capture_output=True, text=True).stdout.split()
        if sum(int(x) for x in res) >= total - (1 << 20) or time.monotonic() - t0 > 60:
            break
        time.sleep(0.01)
    queued = total / (time.monotonic() - t0)
    for m in maps:
        m.close()
    return seq, queued


def run(binary, model, depth, threads):
    """One `turboinfer run` (`depth` None: without `--readahead`): (wall seconds, prefill ms)."""
    cmd = [binary, "run", "-m", model, "-p", PROMPT, "-n", "8", "-t", str(threads),
           "--json", "--no-special"]
    if depth is not None:
        cmd += ["--readahead", str(depth)]
    t0 = time.monotonic()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    wall = time.monotonic() - t0
    t = json.loads(out.strip().splitlines()[-1])["timings"]
    return wall, t["prefill_ms"]


def cgroup_run(limit, cmd):
    """Runs `cmd` inside a fresh memory cgroup of `limit` bytes: (stdout, peak RSS bytes, the
    cgroup's peak usage bytes)."""
    v1 = os.path.isdir("/sys/fs/cgroup/memory")
    base = "/sys/fs/cgroup/memory" if v1 else "/sys/fs/cgroup"
    cg = os.path.join(base, f"turboinfer-coldstart-{os.getpid()}")
    os.mkdir(cg)
    try:
        with open(os.path.join(cg, "memory.limit_in_bytes" if v1 else "memory.max"), "w") as f:
            f.write(str(limit))
        procs = os.path.join(cg, "cgroup.procs")
        wrapped = ["bash", "-c", f'echo $$ > {procs} && exec "$@"', "cg", *cmd]
        p = subprocess.run(["/usr/bin/time", "-f", "%M", *wrapped], check=True,
                           capture_output=True, text=True)
        peak_file = "memory.max_usage_in_bytes" if v1 else "memory.peak"
        with open(os.path.join(cg, peak_file)) as f:
            peak = int(f.read())
        return p.stdout, int(p.stderr.strip().splitlines()[-1]) * 1024, peak
    finally:
        os.rmdir(cg)


def limited(binary, model, files, threads, limit_mib, budget_mib, reps):
    """The --limit-mib table."""
    med = statistics.median
    rows = {"page cache (no budget)": [], f"streamed, --weight-budget {budget_mib}": []}
    for _ in range(reps):
        for name, extra in zip(rows, ([], ["--weight-budget", str(budget_mib)])):
            drop_cache(files)
            cmd = [binary, "run", "-m", model, "-p", PROMPT, "-n", "16", "-t", str(threads),
                   "--ctx", "512", "--json", "--no-special", *extra]
            out, rss, peak = cgroup_run(limit_mib << 20, cmd)
            t = json.loads(out.strip().splitlines()[-1])["timings"]
            rows[name].append((t["decode_tok_s"], t["prefill_ms"], rss, peak))
    print()
    print(f"Inside a memory cgroup of {limit_mib} MiB (medians of {reps}; 16 tokens decoded "
          "after the same prompt, cold cache):")
    print()
    print("| weights | decode (tok/s) | prefill (ms) | peak RSS (MiB) | cgroup peak (MiB) |")
    print("|---|---|---|---|---|")
    for name, v in rows.items():
        print(f"| {name} | {med(x[0] for x in v):.2f} | {med(x[1] for x in v):.0f} | "
              f"{med(x[2] for x in v) / 2**20:.0f} | {med(x[3] for x in v) / 2**20:.0f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--depths", default="0,1,2,4,99")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--baseline", help="another build's turboinfer binary, run beside")
    ap.add_argument("--limit-mib", type=int, help="also decode inside a memory cgroup this big")
    ap.add_argument("--budget-mib", type=int, help="--weight-budget there (default: half)")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    model = os.path.join(MODELS, a.model + ".gguf")
    files = [p for p in (model, model + ".kx16") if os.path.exists(p)]
    if model not in files:
        sys.exit(f"coldstart: {model} not found (make fetch-model MODEL={a.model})")
    subprocess.run(["cargo", "build", "-q", "--release", "--bin", "turboinfer"], cwd=ROOT,
                   check=True)
    binary = os.path.join(ROOT, "target", "release", "turboinfer")
    info = subprocess.run([binary, "info", "-m", model], check=True, capture_output=True,
                          text=True).stdout
    pass_bytes = next(int(l.split()[3]) for l in info.splitlines()
                      if l.startswith("one pass reads:"))
    depths = [int(d) for d in a.depths.split(",")]
    how = drop_cache(files)
    cold = {d: [] for d in depths}
    warm, bw, base_cold, base_warm = [], [], [], []
    for _ in range(a.reps):
        bw.append(read_bandwidth(files))
        for d in depths:
            drop_cache(files)
            cold[d].append(run(binary, model, d, a.threads))
        warm.append(run(binary, model, 0, a.threads))
        if a.baseline:
            drop_cache(files)
            base_cold.append(run(a.baseline, model, None, a.threads))
            base_warm.append(run(a.baseline, model, None, a.threads))
    med = statistics.median
    seq = med(b for b, _ in bw)
    bwm = med(q for _, q in bw)
    warm_s = med(w for w, _ in warm)
    print(f"model {a.model}: files {sum(os.path.getsize(p) for p in files) / 2**20:.0f} MiB, "
          f"one pass reads {pass_bytes / 2**20:.0f} MiB; cache dropped by {how}; "
          f"{a.threads} threads; medians of {a.reps}")
    print(f"disk: {seq / 2**20:.0f} MiB/s read by `cat`, {bwm / 2**20:.0f} MiB/s asked all at "
          "once (runs: " + ", ".join(f"{q / 2**20:.0f}" for _, q in bw) + ")")
    print()
    print("| read-ahead (layers) | first call, cold (s) | its prefill (ms) | cold − warm (s) |")
    print("|---|---|---|---|")
    for d in depths:
        w = med(x for x, _ in cold[d])
        p = med(y for _, y in cold[d])
        name = "none" if d == 0 else ("whole model" if d >= 99 else str(d))
        print(f"| {name} | {w:.2f} | {p:.0f} | {w - warm_s:.2f} |")
    print(f"| warm cache (compute only) | {warm_s:.2f} | {med(y for _, y in warm):.0f} | 0 |")
    if a.baseline:
        bw_s = med(w for w, _ in base_warm)
        bc_s = med(w for w, _ in base_cold)
        print(f"| baseline build, cold | {bc_s:.2f} | {med(y for _, y in base_cold):.0f} | "
              f"{bc_s - bw_s:.2f} |")
        print(f"| baseline build, warm | {bw_s:.2f} | {med(y for _, y in base_warm):.0f} | 0 |")
    io = pass_bytes / bwm
    print(f"| bound: reading and computing overlapped, max(pass bytes / queued bandwidth, warm) | "
          f"{max(io, warm_s):.2f} | | {max(io - warm_s, 0):.2f} |")
    print(f"| bound: one after the other, pass bytes / queued bandwidth + warm | "
          f"{io + warm_s:.2f} | | {io:.2f} |")


    if a.limit_mib:
        limited(binary, model, files, a.threads, a.limit_mib,
                a.budget_mib or a.limit_mib // 2, a.reps)


if __name__ == "__main__":
    main()
