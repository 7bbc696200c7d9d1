"""OpenVINO's published benchmark figures, and the one mapping that turns them into batch-1 latencies.

The simulated presets (`placement_gym.backends.profiles`) name real parts that OpenVINO runs and reproduce what
OpenVINO publishes for them. The published rows ship as ``placement_gym/data/published/ov2024.1_benchmarks.csv``
(copied verbatim from OpenVINO's own benchmark data, release OV-2024.1; the file's header names the source).

**The mapping.** OpenVINO publishes, per model and platform, throughput in throughput mode at INT8, FP16, FP32 and
(on Xeons with AMX) BF16, but batch-1 latency mostly at INT8 only. A preset runs each device at OpenVINO's default
precision (f32 on a CPU, bf16 on a CPU with AMX, f16 on a GPU or NPU), so its latency is mapped, the same way for
every row:

* where the row publishes the latency at that precision (the Xeons' BF16), it is that latency;
* else ``latency_P = latency_INT8 * (throughput_INT8 / throughput_P) ** PRECISION_EXPONENT``: latency grows with the
  precision's throughput cost, damped by `PRECISION_EXPONENT`, fitted (least squares in logs) on the only rows that
  publish both latencies (`fit_precision_exponent`: the BF16 and INT8 latencies of the Xeon Platinum 8490H and 8580
  for ResNet-50, BERT-base and MobileNet-V2). Where a row lacks one of the two throughputs, the platform's and
  device's ratio on the other models stands in (their geometric mean); where it lacks the INT8 latency, the row has
  no latency to reproduce (`published_latency` says so).

`benchmarks/published/fit_presets.py` fits the presets to these figures and writes the table that compares them
(docs/results/presets.md).
"""
from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterable

__all__ = ["PRECISIONS", "PUBLISHED_CSV", "PublishedLatency", "PublishedRow", "fit_precision_exponent",
           "precision_exponent", "published_latency", "published_rows"]

#: The published figures the presets are built from (copied from OpenVINO's benchmark data; header: the source).
PUBLISHED_CSV = Path(__file__).resolve().parent.parent / "data" / "published" / "ov2024.1_benchmarks.csv"
#: A device's inference precision -> the throughput column that measures it.
PRECISIONS = {"f32": "thr_fp32_fps", "f16": "thr_fp16_fps", "bf16": "thr_bf16_fps", "int8": "thr_int8_fps"}


@dataclass(frozen=True)
class PublishedRow:
    """One row of the published figures: a model on one device of one platform (empty cells are None)."""

    model: str
    platform: str
    device: str
    thr_int8_fps: float | None
    thr_fp16_fps: float | None
    thr_fp32_fps: float | None
    thr_bf16_fps: float | None
    lat_int8_ms: float | None
    lat_bf16_ms: float | None

    def throughput(self, precision: str) -> float | None:
        return getattr(self, PRECISIONS[precision])


@dataclass(frozen=True)
class PublishedLatency:
    """A published figure mapped to batch-1 latency at a precision (`published_latency`).

    Attributes:
        seconds: the mapped latency, or None where the row publishes no latency to map.
        how: how it was obtained, in words (for the generated table).
    """

    seconds: float | None
    how: str


def _number(text: str) -> float | None:
    return float(text) if text.strip() else None


@lru_cache(maxsize=4)
def published_rows(path: "str | Path" = PUBLISHED_CSV) -> tuple[PublishedRow, ...]:
    """The rows of the published figures file (`PUBLISHED_CSV`; ``#`` lines are its header)."""
    lines = [line for line in Path(path).read_text(encoding="utf-8").splitlines() if not line.startswith("#")]
    rows = []
    for record in csv.DictReader(lines):
        rows.append(PublishedRow(record["model"], record["platform"], record["device"],
                                 *(_number(record[key]) for key in ("thr_int8_fps", "thr_fp16_fps", "thr_fp32_fps",
                                                                    "thr_bf16_fps", "lat_int8_ms", "lat_bf16_ms"))))
    return tuple(rows)


def fit_precision_exponent(rows: Iterable[PublishedRow]) -> float:
    """The exponent ``a`` of ``latency_P / latency_INT8 = (throughput_INT8 / throughput_P) ** a``, least squares in
    logs (through the origin) over the rows that publish both an INT8 and a BF16 latency and both throughputs."""
    xy = xx = 0.0
    for row in rows:
        if None in (row.lat_int8_ms, row.lat_bf16_ms, row.thr_int8_fps, row.thr_bf16_fps):
            continue
        x = math.log(row.thr_int8_fps / row.thr_bf16_fps)
        y = math.log(row.lat_bf16_ms / row.lat_int8_ms)
        xy, xx = xy + x * y, xx + x * x
    if xx == 0:
        raise ValueError("no published row gives both an INT8 and a BF16 latency: the mapping cannot be fitted")
    return xy / xx


def precision_exponent() -> float:
    """`fit_precision_exponent` of the shipped figures (`PUBLISHED_CSV`)."""
    return fit_precision_exponent(published_rows())


def _row(model: str, platform: str, device: str) -> PublishedRow | None:
    return next((r for r in published_rows() if (r.model, r.platform, r.device) == (model, platform, device)), None)


def published_latency(model: str, platform: str, device: str, precision: str) -> PublishedLatency:
    """The published batch-1 latency of `model` on `device` of `platform` at `precision`, by the module's mapping.

    Args:
        model: the published model name (``"resnet-50"``, ``"bert-base-cased"``, ``"mobilenet-v2"``).
        platform, device: as in the file (``"Core Ultra 7-165H"``, ``"NPU"``).
        precision: ``"f32"``, ``"f16"``, ``"bf16"`` or ``"int8"`` (`PRECISIONS`).
    """
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; expected one of {sorted(PRECISIONS)}")
    row = _row(model, platform, device)
    if row is None:
        return PublishedLatency(None, f"no published row for {model} on {platform} {device}")
    if precision == "bf16" and row.lat_bf16_ms is not None:
        return PublishedLatency(row.lat_bf16_ms / 1e3, "published BF16 latency")
    if row.lat_int8_ms is None:
        return PublishedLatency(None, "no published latency")
    if precision == "int8":
        return PublishedLatency(row.lat_int8_ms / 1e3, "published INT8 latency")
    ratio, source = None, "this row's throughputs"
    if row.thr_int8_fps is not None and row.throughput(precision) is not None:
        ratio = row.thr_int8_fps / row.throughput(precision)
    else:  # the same device's ratio on the platform's other models
        others = [r.thr_int8_fps / r.throughput(precision) for r in published_rows()
                  if (r.platform, r.device) == (platform, device) and r.thr_int8_fps is not None
                  and r.throughput(precision) is not None]
        if not others:
            return PublishedLatency(None, f"no INT8/{precision} throughput ratio for {platform} {device}")
        ratio = math.exp(sum(math.log(x) for x in others) / len(others))
        source = f"the device's ratio on its other models ({len(others)})"
    exponent = precision_exponent()
    return PublishedLatency(row.lat_int8_ms / 1e3 * ratio ** exponent,
                            f"INT8 latency x (INT8/{precision} throughput {ratio:.2f}, {source}) ^ {exponent:.2f}")
