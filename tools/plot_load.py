"""Latency against offered load, from make load's load.json, as a PNG.

usage: plot_load.py LOAD_JSON PNG
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

report = json.load(open(sys.argv[1]))
levels = report["levels"]
clients = [level["clients"] for level in levels]
figure, latency = plt.subplots(figsize=(7, 4), dpi=120)
latency.plot(clients, [level["p50_ms"] for level in levels], marker="o", label="p50 latency")
latency.plot(clients, [level["p99_ms"] for level in levels], marker="o", label="p99 latency")
latency.set_xscale("log", base=2)
latency.set_xticks(clients, [str(c) for c in clients])
latency.set_xlabel("concurrent customers (offered load)")
latency.set_ylabel("turn latency (ms)")
latency.set_ylim(bottom=0)
throughput = latency.twinx()
throughput.plot(clients, [level["turns_per_second"] for level in levels], color="grey", linestyle="--", marker="s", label="turns/s")
throughput.set_ylabel("throughput (turns/s)")
throughput.set_ylim(bottom=0)
lines = latency.get_legend_handles_labels()
more = throughput.get_legend_handles_labels()
latency.legend(lines[0] + more[0], lines[1] + more[1], loc="upper left")
rpm = report.get("model_rpm")
latency.set_title(
    f"refund-chat under load: model {report['latency_ms']} ± {report['jitter_ms']} ms, "
    f"{report['functions']} containers" + (f", model limit {rpm}/min" if rpm else "")
)
figure.tight_layout()
figure.savefig(sys.argv[2])
