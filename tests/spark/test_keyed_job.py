"""The shipped keyed job (conf/smart_grid_keyed.toml) on every engine equals the oracle."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import pytest

from spark_stream_sched.data.smart_grid import smart_grid_streams
from spark_stream_sched.jobs.config import JobConfig, load_job_config
from spark_stream_sched.jobs.runner import run_job
from spark_stream_sched.testing.pipeline_reference import reference_pipeline

REPO = Path(__file__).resolve().parents[2]


def small(tmp_path: Path, engine: str) -> JobConfig:
    """The shipped config with a small workload and paths under ``tmp_path``."""
    cfg = load_job_config(REPO / "conf" / "smart_grid_keyed.toml")
    data = dataclasses.replace(cfg.data, dir=str(tmp_path / "input"), inputs=3, meters=25,
                               rows=2_400, files_per_input=2)
    return dataclasses.replace(cfg, engine=engine, output=str(tmp_path / "output"),
                               checkpoint=str(tmp_path / "checkpoint"), data=data,
                               max_records_per_trigger=700, max_files_per_trigger=1)


def rounded(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: round(v, 9) if isinstance(v, float) and not math.isnan(v) else v
             for k, v in r.items()} for r in rows]


def expected(cfg: JobConfig) -> list[dict[str, Any]]:
    d = cfg.data
    tables = smart_grid_streams(d.inputs, d.meters, rows=d.rows, seed=d.seed)
    return rounded(reference_pipeline(tables, cfg.query.spec(d.inputs)))


def test_shipped_keyed_config_uses_operators() -> None:
    cfg = load_job_config(REPO / "conf" / "smart_grid_keyed.toml")
    assert cfg.query.spec(cfg.data.inputs).operators == ("where(kind = 'reading')",
                                                         "delta(value) as change")


@pytest.mark.parametrize("engine", ["runtime", pytest.param("source", marks=pytest.mark.spark),
                                    pytest.param("sink", marks=pytest.mark.spark)])
def test_keyed_job_equals_the_oracle_on_every_engine(tmp_path: Path, engine: str,
                                                     request: pytest.FixtureRequest) -> None:
    cfg = small(tmp_path, engine)
    spark = request.getfixturevalue("spark") if engine != "runtime" else None
    result = run_job(cfg, spark=spark)
    assert result.rows_in == 2_400
    want = expected(cfg)
    assert len(want) > 100
    assert rounded(result.results.to_pylist()) == want
