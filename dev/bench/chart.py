"""Draws dev/bench/throughput.png: throughput vs concurrency for the receiver over HTTP, pgbench's
(a), (b), (c) and the peer, from dev/bench/results/http.json and limit.json (a part that did not run
is left out). Usage: python dev/bench/chart.py [results_dir] [out.png]"""

import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

results = sys.argv[1] if len(sys.argv) > 1 else "dev/bench/results"
out = sys.argv[2] if len(sys.argv) > 2 else "dev/bench/throughput.png"


def load(name):
    path = os.path.join(results, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def series(by_concurrency, key):
    points = sorted((int(c), r[key]) for c, r in by_concurrency.items() if r.get(key) is not None)
    return [c for c, _ in points], [v for _, v in points]


http = load("http.json") or {}
limit = load("limit.json") or {}
lines = []
if "receiver" in http:
    lines.append(("receiver over HTTP (req/s)", series(http["receiver"]["unique"], "rps"), "o-"))
for key, label in [
    ("a", "(a) pgbench: the receiver's statements"),
    ("b", "(b) pgbench: the seeds' transaction"),
    ("c", "(c) pgbench: one statement with CTEs"),
]:
    if key in limit:
        lines.append((label + " (tps)", series(limit[key], "tps"), "s--"))
if "peer" in http:
    lines.append(("peer: FastAPI + asyncpg (req/s)", series(http["peer"]["unique"], "rps"), "^-"))

fig, ax = plt.subplots(figsize=(8, 5))
for label, (xs, ys), style in lines:
    ax.plot(xs, ys, style, label=label)
ax.set_xscale("log", base=2)
ax.set_xticks([1, 8, 32, 64])
ax.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
ax.set_xlabel("concurrency (connections)")
ax.set_ylabel("new events per second")
ax.set_title("Unique deliveries: throughput vs concurrency (one run, fsync on)")
ax.grid(True, alpha=0.3)
ax.legend(fontsize="small")
fig.tight_layout()
fig.savefig(out, dpi=110)
print(f"chart.py: wrote {out}", file=sys.stderr)
