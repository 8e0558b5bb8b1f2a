#!/usr/bin/env python3
"""Where an answer's time goes (docs/performance.md): reads the records of runs of
`benches/sqleval/run --llamacpp --label L` (target/sqleval/L.jsonl) and prints, per run, the
side-by-side figures (right answers, warm median, p90 and mean latency, ratios) for both halves
and each, the stages of the median and of the p90 warm call beside llama-server's, and the
answers accepted first against those that needed more; with several runs, each one's answers
against the first's (the same SQL, generated tokens and forward passes: a change that claims
exactness moves none, and the summed decode then compares like with like). Answers compare only
within a day: the harness reloads the databases on a new day, and their dates move with it.
Standard library only.

  benches/sqleval/stages.py LABEL [LABEL...]
"""
import json, os, sys, statistics as st

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

def pct(v, q):
    v = sorted(v); k = (len(v) - 1) * q; f = int(k); c = min(f + 1, len(v) - 1)
    return v[f] + (v[c] - v[f]) * (k - f)

def load(label):
    return [json.loads(l) for l in open(os.path.join(ROOT, 'target', 'sqleval', f'{label}.jsonl'))]

def summary(recs, name):
    w = [r for r in recs if r.get('call') == 'warm' and r.get('llama')]
    if not w: return
    a = [r['latency_ms'] for r in w]; b = [r['llama']['latency_ms'] for r in w]
    ok = sum(1 for r in recs if r.get('correct')); lok = sum(1 for r in recs if (r.get('llama') or {}).get('correct'))
    print(f"{name}: n={len(recs)} warm={len(w)} right nl2sql {ok} llama {lok} | median {st.median(a)/1000:.2f} vs {st.median(b)/1000:.2f} s = {st.median(a)/st.median(b):.2f}x"
          f" | p90 {pct(a,.9)/1000:.2f} vs {pct(b,.9)/1000:.2f} = {pct(a,.9)/pct(b,.9):.2f}x | mean {sum(a)/len(a)/1000:.2f} vs {sum(b)/len(b)/1000:.2f} = {sum(a)/sum(b):.2f}x")

def stages(r):
    t = r['timings_ms']; l = r['llama']
    q = t.get('prefill', 0) - t.get('refusal', 0)
    return (f"{r['id']}: nl2sql {r['latency_ms']/1000:.2f} s = refusal check {t.get('refusal',0):.0f} + other prefill {q:.0f}"
            f" + decode {t.get('decode',0):.0f} ms ({r['generated_tokens']} tokens, {r['forward_passes']} passes, {r['repair_rounds']} repair rounds)"
            f" + validate {t.get('validate',0):.0f} + rest {r['latency_ms']-t.get('prefill',0)-t.get('decode',0)-t.get('validate',0):.0f};"
            f" llama-server {l['latency_ms']/1000:.2f} s = prompt {l.get('prompt_ms',0):.0f} ms ({l.get('prompt_n')} tokens) + decode {l.get('predicted_ms',0):.0f} ms ({l.get('generated_tokens')} tokens)")

def same_answers(base, recs):
    """How many of `recs`' answers are the same SQL, generated tokens and passes as `base`'s."""
    key = lambda r: (r.get('sql'), r.get('generated_tokens'), r.get('forward_passes'))
    b = {r['id']: key(r) for r in base}
    both = [r for r in recs if r['id'] in b]
    diff = [r['id'] for r in both if key(r) != b[r['id']]]
    return len(both) - len(diff), len(both), diff

if __name__ == '__main__':
    base = None  # the first run: the others' answers are compared with its
    for label in sys.argv[1:]:
        recs = load(label)
        print('==', label)
        if base is None:
            base = (label, recs)
        else:
            same, n, diff = same_answers(base[1], recs)
            print(f"answers: {same} of {n} the same SQL, tokens and passes as {base[0]}'s" + (f"; differ: {' '.join(diff)}" if diff else ""))
        summary(recs, 'both')
        for h in 'AB': summary([r for r in recs if r.get('half') == h], 'half ' + h)
        w = sorted([r for r in recs if r.get('call') == 'warm' and r.get('llama')], key=lambda r: r['latency_ms'])
        if w:
            print(' median call', stages(w[len(w)//2])); print(' p90 call   ', stages(w[int(round(0.9*(len(w)-1)))]))
            tm = lambda k: st.median([r['timings_ms'].get(k,0) for r in w])
            print(f" medians over warm calls: refusal {tm('refusal'):.0f} ms, prefill {tm('prefill'):.0f}, decode {tm('decode'):.0f}, passes {st.median([r.get('forward_passes',0) for r in w])}, generated {st.median([r.get('generated_tokens',0) for r in w])}, ms/pass {st.median([r['timings_ms']['decode']/r['forward_passes'] for r in w if r.get('forward_passes')]):.1f}; llama ms/token {st.median([r['llama']['predicted_ms']/max(1,r['llama']['generated_tokens']) for r in w]):.1f}, prompt {st.median([r['llama']['prompt_ms'] for r in w]):.0f} ms")
            first = [r for r in w if not r.get('repair_rounds') and len(r.get('attempts') or []) <= 1]
            more = [r for r in w if r not in first]
            for n, g in (('accepted first', first), ('needed more', more)):
                if g: print(f"  {n}: {len(g)} calls, median {st.median([r['latency_ms'] for r in g])/1000:.2f} vs llama {st.median([r['llama']['latency_ms'] for r in g])/1000:.2f} s")
