"""Host CPU and memory metrics with Triton's names (``src/metrics.cc`` of Triton core):

- ``nv_cpu_utilization`` (gauge, 0.0 - 1.0): busy share of all CPU time since the previous
  scrape (since boot at the first), from ``/proc/stat`` (busy = user + nice + system +
  irq + softirq + steal; idle = idle + iowait), as Triton computes it;
- ``nv_cpu_memory_total_bytes`` / ``nv_cpu_memory_used_bytes`` (gauges): ``MemTotal`` and
  ``MemTotal - MemAvailable`` of ``/proc/meminfo``, in bytes.

Like Triton's, these are the host's figures as the kernel reports them to the container
(not its cgroup's limits). Also :func:`format_value`, the one Prometheus number format:
integers exactly, floats with every digit (``repr``: round-trips bit-exact).
"""

from __future__ import annotations

import math
import threading
from pathlib import Path

PROC = Path("/proc")
BUSY = (0, 1, 2, 5, 6, 7)  # user nice system irq softirq steal (columns of the "cpu" line)
IDLE = (3, 4)  # idle iowait


def format_value(value: float) -> str:
    """A sample value as the Prometheus text format writes it: ``53067``, ``367590123``,
    ``0.1234567891234``, ``+Inf``, ``NaN`` (never ``3.6759e+08``)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    number = float(value)
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "+Inf" if number > 0 else "-Inf"
    if number.is_integer() and abs(number) < 2**53:
        return str(int(number))
    return repr(number)


class CpuMetrics:
    """The three ``nv_cpu_*`` families; :meth:`exposition` is safe from any thread."""

    def __init__(self, proc: Path = PROC) -> None:
        self.proc = proc
        self.lock = threading.Lock()
        self.last = (0, 0)  # (busy, total) jiffies at the previous scrape

    def utilization(self) -> float:
        """Busy CPU time / all CPU time since the previous call (0.0 - 1.0)."""
        fields = (self.proc / "stat").read_text().split("\n", 1)[0].split()[1:]
        jiffies = [int(field) for field in fields]
        busy = sum(jiffies[i] for i in BUSY if i < len(jiffies))
        total = busy + sum(jiffies[i] for i in IDLE)
        with self.lock:
            last_busy, last_total = self.last
            self.last = (busy, total)
        elapsed = total - last_total
        return min(1.0, max(0.0, (busy - last_busy) / elapsed)) if elapsed > 0 else 0.0

    def memory(self) -> tuple[int, int]:
        """(total, used) RAM in bytes."""
        values: dict[str, int] = {}
        for line in (self.proc / "meminfo").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in ("MemTotal", "MemAvailable"):
                values[key] = int(rest.split()[0]) * 1024  # /proc/meminfo counts in kB
        total = values.get("MemTotal", 0)
        return total, total - values.get("MemAvailable", total)

    def exposition(self) -> list[str]:
        """The families' lines (HELP, TYPE, one unlabelled sample each), as Triton's."""
        total, used = self.memory()
        lines: list[str] = []
        for name, doc, value in (
            ("nv_cpu_utilization", "CPU utilization rate [0.0 - 1.0]", self.utilization()),
            ("nv_cpu_memory_total_bytes", "CPU total memory (RAM), in bytes", total),
            ("nv_cpu_memory_used_bytes", "CPU used memory (RAM), in bytes", used),
        ):
            lines += [f"# HELP {name} {doc}", f"# TYPE {name} gauge"]
            lines.append(f"{name} {format_value(value)}")
        return lines
