"""The occupancy calculator against CUDA's own occupancy API (recorded on the H200) and the lecture."""
import json
from pathlib import Path

import pandas as pd
import pytest

from gpuatlas.analysis.occupancy import occupancy
from conftest import COMMITTED_RUN

FIXTURE = Path(__file__).parent / "fixtures" / "occupancy_api_h200.csv"
DEVICE = json.loads((COMMITTED_RUN / "run.json").read_text())["device"]


def test_calculator_matches_cuda_occupancy_api_on_every_recorded_config():
    configs = pd.read_csv(FIXTURE)
    assert len(configs) >= 100 and configs["gpu"].eq(DEVICE["name"]).all()
    wrong = [(r.registers_per_thread, r.threads_per_block, r.smem_per_block_bytes, r.api_blocks_per_sm,
              occupancy(DEVICE, r.registers_per_thread, r.threads_per_block, r.smem_per_block_bytes).blocks_per_sm)
             for r in configs.itertuples()
             if occupancy(DEVICE, r.registers_per_thread, r.threads_per_block,
                          r.smem_per_block_bytes).blocks_per_sm != r.api_blocks_per_sm]
    assert not wrong, f"(regs, threads, smem, API, calculator): {wrong[:10]}"
    assert configs["api_blocks_per_sm"].nunique() >= 5, "the fixture spans many occupancies"


def test_lecture_exercise_1_registers_bind_at_half_occupancy():
    # 64 registers/thread, 256-thread blocks, 32 KB of shared memory per block (lecture exercise 1)
    result = occupancy(DEVICE, 64, 256, 32 * 1024)
    assert (result.blocks_per_sm, result.warps_per_sm, result.binding) == (4, 32, "registers")
    assert result.occupancy == pytest.approx(0.5)
    assert result.limits["shared memory"] >= 6  # does not bind


def test_each_budget_can_bind():
    assert occupancy(DEVICE, 16, 1024).binding == "threads"
    assert occupancy(DEVICE, 16, 32).binding == "blocks"
    assert occupancy(DEVICE, 32, 128, 100_000).binding == "shared memory"
    assert occupancy(DEVICE, 32, 128, DEVICE["smem_per_block_optin_bytes"] + 1).blocks_per_sm == 0
