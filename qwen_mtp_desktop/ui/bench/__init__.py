"""The Benchmark page: MTP validation, depth benchmarks, run history and charts."""

from qwen_mtp_desktop.ui.bench.panel import BenchDialogs, BenchPanel

__all__ = ["BenchDialogs", "BenchPanel"]
