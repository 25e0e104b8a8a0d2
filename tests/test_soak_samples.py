"""The soak's verdicts on synthetic samples: flat passes, the leaks its bounds promise fail."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.spark.soak_samples import (
    MIB,
    lives,
    location_violations,
    memory_violations,
    read_samples,
)


def samples(n: int, files: float = 0.0, rss: float = 0.0, seed: int = 0,
            kill_every: int = 0) -> list[dict[str, Any]]:
    """``n`` samples: a location of ~56 files and ~250 KB with noise, memory with noise; plus a
    leak of ``files`` files and ``rss`` bytes a batch (memory's restarting at every kill)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        age = i % kill_every if kill_every else i
        out.append({"batch_id": i, "wall": 1000.0 + i, "location_files": 56 + int(files * i),
                    "location_bytes": int(rng.uniform(216_000, 272_000)),
                    "jvm_rss_bytes": int(rng.uniform(480, 520) * MIB + rss * age),
                    "driver_rss_bytes": int(rng.choice([435, 848]) * MIB + rss * age),
                    "worker_rss_bytes": int(158 * MIB + rss * age)})
    return out


@pytest.mark.parametrize("seed", range(5))
def test_flat_noisy_series_pass(seed: int) -> None:
    run = samples(250, seed=seed, kill_every=80)
    kills = [1000.0 + k - 0.5 for k in (80, 160, 240)]
    assert location_violations(run) == []
    assert memory_violations(run, kills) == []


def test_a_file_every_20_batches_fails() -> None:
    (found,) = location_violations(samples(250, files=1 / 20))
    assert found == ("location_files over the run: last third's maximum 68 > 66 (middle "
                     "third's 64 + tolerance)")


def test_a_leak_of_16_mib_a_batch_within_a_life_of_80_fails() -> None:
    run = samples(250, rss=16 * MIB, kill_every=80)
    kills = [1000.0 + k - 0.5 for k in (80, 160, 240)]
    found = memory_violations(run, kills)
    assert {f.split(" over ")[0] for f in found} == {"jvm_rss_bytes", "driver_rss_bytes",
                                                     "worker_rss_bytes"}
    assert {f.split(" over ")[1].split(":")[0] for f in found} == {
        "batches 0-79", "batches 80-159", "batches 160-239"}  # the last life, 10, is too short


def test_memory_needs_a_life_long_enough() -> None:
    with pytest.raises(ValueError, match="no driver life of 30 batches"):
        memory_violations(samples(50), [1000.0 + k - 0.5 for k in (20, 40)])


def test_lives_split_at_kill_times_and_replays_keep_their_last_sample(tmp_path: Path) -> None:
    path = tmp_path / "samples.jsonl"
    rows = [{"batch_id": b, "wall": w} for b, w in [(0, 1.0), (1, 2.0), (1, 9.0), (2, 10.0)]]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"batch_id": 3, "wa')
    got = read_samples(path)
    assert got == [rows[0], rows[2], rows[3]]
    assert lives(got, [5.0]) == [[rows[0]], [rows[2], rows[3]]]
