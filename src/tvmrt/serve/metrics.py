"""Per-model counters and the Prometheus text exposition format, written by hand.

No ``prometheus_client``: its process-global registry makes two servers in one process
(tests, benchmarks, Ray replicas sharing a worker) collide, and the format is a few lines.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ModelMetrics", "LATENCY_BUCKETS", "render_prometheus", "JsonLogFormatter"]

# seconds; covers a tiny graph (sub-ms) up to a large model under load
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


@dataclass
class ModelMetrics:
    """Counters of one model; every method is thread-safe."""

    name: str
    requests: dict[int, int] = field(default_factory=dict)  # HTTP status -> count
    buckets: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS) + 1))
    latency_sum: float = 0.0
    success_ns: int = 0
    fail_count: int = 0
    fail_ns: int = 0
    queue_ns: int = 0
    compute_ns: int = 0
    executions: int = 0
    busy_seconds: float = 0.0
    queue_depth: int = 0
    in_flight: int = 0
    rejected: int = 0
    last_inference_ms: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def observe_request(self, status: int, seconds: float) -> None:
        """Count one answered infer request and its latency."""
        with self._lock:
            self.requests[status] = self.requests.get(status, 0) + 1
            index = next((i for i, b in enumerate(LATENCY_BUCKETS) if seconds <= b), -1)
            self.buckets[index] += 1
            self.latency_sum += seconds
            ns = int(seconds * 1e9)
            if status == 200:
                self.success_ns += ns
            else:
                self.fail_count += 1
                self.fail_ns += ns
            if status == 503:
                self.rejected += 1

    def observe_execution(self, queued_s: float, compute_s: float) -> None:
        """Count one run of an executor: time waiting for it and time running."""
        with self._lock:
            self.executions += 1
            self.queue_ns += int(queued_s * 1e9)
            self.compute_ns += int(compute_s * 1e9)
            self.busy_seconds += compute_s
            self.last_inference_ms = int(time.time() * 1000)

    def add_depth(self, queued: int, running: int) -> None:
        """Move requests between waiting and running (deltas)."""
        with self._lock:
            self.queue_depth += queued
            self.in_flight += running

    def stats(self) -> dict[str, Any]:
        """A Triton-style ``model_stats`` entry (counts and nanosecond totals)."""
        with self._lock:
            success = self.requests.get(200, 0)
            return {
                "name": self.name,
                "version": "1",
                "last_inference": self.last_inference_ms,
                "inference_count": success,
                "execution_count": self.executions,
                "inference_stats": {
                    "success": {"count": success, "ns": self.success_ns},
                    "fail": {"count": self.fail_count, "ns": self.fail_ns},
                    "queue": {"count": self.executions, "ns": self.queue_ns},
                    "compute_infer": {"count": self.executions, "ns": self.compute_ns},
                },
                "queue_depth": self.queue_depth,
                "in_flight": self.in_flight,
                "rejected": self.rejected,
                "executor_busy_seconds": round(self.busy_seconds, 6),
            }

    def prometheus_lines(self) -> dict[str, list[str]]:
        """Sample lines of each metric family for this model."""
        label = f'model="{_escape(self.name)}"'
        with self._lock:
            out: dict[str, list[str]] = {
                "tvmrt_requests_total": [
                    f'tvmrt_requests_total{{{label},code="{code}"}} {n}'
                    for code, n in sorted(self.requests.items())
                ],
                "tvmrt_request_duration_seconds": [],
                "tvmrt_queue_depth": [f"tvmrt_queue_depth{{{label}}} {self.queue_depth}"],
                "tvmrt_in_flight": [f"tvmrt_in_flight{{{label}}} {self.in_flight}"],
                "tvmrt_executor_busy_seconds_total": [
                    f"tvmrt_executor_busy_seconds_total{{{label}}} {self.busy_seconds:.6f}"
                ],
                "tvmrt_executions_total": [f"tvmrt_executions_total{{{label}}} {self.executions}"],
            }
            hist = out["tvmrt_request_duration_seconds"]
            total = 0
            for bound, n in zip((*LATENCY_BUCKETS, float("inf")), self.buckets, strict=True):
                total += n
                le = "+Inf" if bound == float("inf") else repr(bound)
                hist.append(f'tvmrt_request_duration_seconds_bucket{{{label},le="{le}"}} {total}')
            hist.append(f"tvmrt_request_duration_seconds_sum{{{label}}} {self.latency_sum:.6f}")
            hist.append(f"tvmrt_request_duration_seconds_count{{{label}}} {total}")
        return out


_HELP = {
    "tvmrt_requests_total": ("counter", "Infer requests answered, by HTTP status code."),
    "tvmrt_request_duration_seconds": ("histogram", "Infer request latency, receipt to answer."),
    "tvmrt_queue_depth": ("gauge", "Accepted requests waiting for an executor."),
    "tvmrt_in_flight": ("gauge", "Requests running on an executor now."),
    "tvmrt_executor_busy_seconds_total": ("counter", "Seconds executors spent running."),
    "tvmrt_executions_total": ("counter", "Executor runs."),
}


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def render_prometheus(models: Iterable[ModelMetrics]) -> str:
    """Prometheus text format (version 0.0.4) for every model."""
    per_model = [m.prometheus_lines() for m in models]
    lines: list[str] = []
    for family, (kind, text) in _HELP.items():
        lines.append(f"# HELP {family} {text}")
        lines.append(f"# TYPE {family} {kind}")
        for samples in per_model:
            lines.extend(samples[family])
    return "\n".join(lines) + "\n"


class JsonLogFormatter(logging.Formatter):
    """One JSON object per line: time, level, message and the record's ``fields``."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": round(record.created, 6),
            "level": record.levelname.lower(),
            "msg": record.getMessage(),
        }
        doc.update(getattr(record, "fields", {}))
        if record.exc_info and record.exc_info[1] is not None:
            doc["error"] = repr(record.exc_info[1])[:1000]
        return json.dumps(doc, separators=(",", ":"))
