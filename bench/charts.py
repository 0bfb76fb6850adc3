"""Draw docs/images/*.png from the benchmarks' JSON output (matplotlib, no hand-drawn figures).

    .venv/bin/python bench/rpc.py --runs 3 --json bench/results/rpc.json
    .venv/bin/python bench/spark.py --json bench/results/spark.json
    .venv/bin/python bench/workers.py --json bench/results/workers.json
    .venv/bin/python bench/charts.py          # or: make charts

Each chart says in its title which commit, date and CPU its figures come from. A missing input
file skips its charts with a message.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
IMAGES = ROOT / "docs" / "images"
OURS, RAW, GRPC = "#1f77b4", "#7f7f7f", "#ff7f0e"

LATENCY = [  # (label, run key, colour)
    ("ours: trio client,\nasync processor", "ours-async/trio/latency", OURS),
    ("ours: trio client,\npool processor", "ours-pool/trio/latency", OURS),
    ("ours: blocking client,\nasync processor", "ours-async/blocking/latency", OURS),
    ("ours: blocking client,\npool processor", "ours-pool/blocking/latency", OURS),
    ("raw trio echo", "raw/raw/latency", RAW),
    ("grpcio", "grpc/grpc/latency", GRPC),
]
THROUGHPUT = [
    ("ours: invoke_many\n(trio, async)", "ours-async/trio/many64", OURS),
    ("ours: invoke_async window\n(trio, async)", "ours-async/trio/window64", OURS),
    ("ours: 64 tasks\n(trio, async)", "ours-async/trio/tasks64", OURS),
    ("ours: invoke_many\n(blocking, async)", "ours-async/blocking/many64", OURS),
    ("ours: invoke_many\n(trio, pool)", "ours-pool/trio/many64", OURS),
    ("raw trio echo", "raw/raw/pipe64", RAW),
    ("grpcio (best of\nthreads, futures)", "grpc", GRPC),
]


def _subtitle(meta: dict[str, Any]) -> str:
    return f"commit {meta['commit']}, {meta['date']}, {meta['cpu']} ({meta['cpus']} CPUs)"


def _median(runs: list[dict[str, Any]], key: str, field: str) -> float:
    if key == "grpc":  # the faster grpcio client style, run by run
        return statistics.median(
            max(r["grpc/grpc/threads64"][field], r["grpc/grpc/futures64"][field]) for r in runs)
    return statistics.median(r[key][field] for r in runs)


def _bars(ax: Any, labels: list[str], values: list[float], colours: list[str], fmt: str) -> None:
    bars = ax.barh(labels, values, color=colours)
    ax.invert_yaxis()
    for bar, value in zip(bars, values, strict=True):
        ax.text(bar.get_width(), bar.get_y() + bar.get_height() / 2, " " + fmt.format(value),
                va="center", fontsize=8)
    ax.margins(x=0.18)


def rpc_charts(data: dict[str, Any]) -> list[Path]:
    """Sequential latency p50/p99 and pipelined throughput: ours, raw trio, grpcio."""
    runs = data["runs"]
    out = []
    fig, ax = plt.subplots(figsize=(8, 4.2))
    labels = [label for label, _, _ in LATENCY]
    p50 = [_median(runs, key, "p50") for _, key, _ in LATENCY]
    p99 = [_median(runs, key, "p99") for _, key, _ in LATENCY]
    ax.barh(labels, p99, color="#d9d9d9", label="p99")
    _bars(ax, labels, p50, [c for _, _, c in LATENCY], "{:.0f} µs")
    ax.set_xlabel("sequential round trip, 128-byte body (µs; bar = p50, grey = p99)")
    ax.set_title(f"Latency, lower is better\n{_subtitle(data['meta'])}", fontsize=9)
    fig.tight_layout()
    out.append(_save(fig, "rpc-latency.png"))

    fig, ax = plt.subplots(figsize=(8, 4.4))
    _bars(ax, [label for label, _, _ in THROUGHPUT],
          [_median(runs, key, "rps") for _, key, _ in THROUGHPUT],
          [c for _, _, c in THROUGHPUT], "{:,.0f}")
    ax.set_xlabel("requests per second, 64 in flight on one connection, 128-byte body")
    ax.set_title(f"Pipelined throughput, higher is better\n{_subtitle(data['meta'])}",
                 fontsize=9)
    fig.tight_layout()
    out.append(_save(fig, "rpc-throughput.png"))
    return out


def spark_chart(data: dict[str, Any]) -> list[Path]:
    """Rows/s per way of calling a service from Spark, log scale."""
    variants = data["variants"]
    labels = list(variants)
    rates = [v["rows"] / min(v["seconds"]) for v in variants.values()]
    colours = [OURS if label.startswith("ours") else RAW for label in labels]
    fig, ax = plt.subplots(figsize=(8, 3.8))
    _bars(ax, labels, rates, colours, "{:,.0f}")
    ax.set_xscale("log")
    ax.set_xlabel("rows per second (log scale), f = upper(), best of the runs")
    ax.set_title(f"Spark {data['master']}, {data['partitions']} partitions, higher is better\n"
                 f"{_subtitle(data['meta'])}", fontsize=9)
    fig.tight_layout()
    return [_save(fig, "spark-rows.png")]


def workers_chart(data: dict[str, Any]) -> list[Path]:
    """Requests/s served by 1 and 2 worker processes."""
    rates = {k: statistics.median(v) for k, v in data["req_per_s"].items()}
    fig, ax = plt.subplots(figsize=(6, 2.4))
    _bars(ax, [f"--workers {k}" for k in rates], list(rates.values()), [OURS] * len(rates),
          "{:,.0f}")
    ax.set_xlabel("requests per second (2 client processes, invoke_many windows of 128)")
    ax.set_title(f"remoting serve --workers, higher is better\n{_subtitle(data['meta'])}",
                 fontsize=9)
    fig.tight_layout()
    return [_save(fig, "serve-workers.png")]


def _save(fig: Any, name: str) -> Path:
    IMAGES.mkdir(parents=True, exist_ok=True)
    path = IMAGES / name
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args()
    for name, draw in (("rpc.json", rpc_charts), ("spark.json", spark_chart),
                       ("workers.json", workers_chart)):
        path = args.results / name
        if not path.exists():
            print(f"skipped: {path} is missing (run the benchmark with --json {path})")
            continue
        for image in draw(json.loads(path.read_text())):
            print(f"wrote {image.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
