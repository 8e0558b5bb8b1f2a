#!/usr/bin/env python3
"""llama-server answering the prompts nl2sql() built, as benches/batch-worker.sh asks them: one
caller alone, then CALLERS callers at once, each sending every prompt in turn (greedy, prompt
cache on, the same stop strings as benches/sqleval). One llama-server with `-np CALLERS` (continuous
batching, the context per slot) serves both. Prints one line in batch-worker.sh's format.

  benches/llamacpp-callers.py PROMPTS.json MODEL THREADS CTX MAX_NEW CALLERS LOG_DIR

PROMPTS.json: a JSON list of prompt strings (nl2sql_explain(question)->>'prompt').
"""

import json
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "common"))
from evalkit import LlamaServer  # noqa: E402


def main():
    prompts_file, model, threads, ctx, max_new, callers, log_dir = sys.argv[1:8]
    threads, ctx, max_new, callers = int(threads), int(ctx), int(max_new), int(callers)
    with open(prompts_file) as f:
        prompts = json.load(f)
    server = LlamaServer(model, threads, ctx, log_dir, "llamacpp-callers", slots=callers)
    try:
        answers = {}

        def ask(out):
            for p in prompts:
                content, _, ms = server.complete(p, max_new)
                out.append((ms / 1000.0, content))

        warm = []
        ask(warm)  # every prompt once: the prompt cache holds the schema prefix
        lone = []
        ask(lone)
        per = [[] for _ in range(callers)]
        took = [0.0] * callers

        def caller(i):
            t = time.perf_counter()
            ask(per[i])
            took[i] = time.perf_counter() - t

        start = time.perf_counter()
        ts = [threading.Thread(target=caller, args=(i,)) for i in range(callers)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        total = time.perf_counter() - start
        answers = {tuple(c for _, c in lone)} | {tuple(c for _, c in p) for p in per}
        print(f"llama-server -np {callers}: {callers} callers x {len(prompts)} prompts: total {total:.1f} s, "
              f"median caller {statistics.median(took):.1f} s, slowest {max(took):.1f} s; "
              f"lone caller median answer {statistics.median(ms for ms, _ in lone):.2f} s; "
              f"every caller's answers equal the lone caller's: {'yes' if len(answers) == 1 else 'no'}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
