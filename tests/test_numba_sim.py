"""The Numba chase kernel runs in the CUDA simulator (own process: the switch is read at import time)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent


def run_sim(*args) -> dict:
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", PYTHONPATH=os.pathsep.join([str(HERE.parent), str(HERE)]))
    done = subprocess.run([sys.executable, str(HERE / "sim_chase.py"), *map(str, args)], capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("elements, stride, warm", [(16, 128, 16), (37, 32, 5), (64, 128, 0)])
def test_simulated_chase_follows_the_chain(elements, stride, warm):
    steps = 2 * 32  # two trips of the unrolled loop
    result = run_sim(elements, stride, warm, steps)
    assert result["sink"] == result["expected"]
    hops = result["visited"]
    assert len(hops) == warm + steps
    order = result["order"]
    assert hops == [order[i % elements] for i in range(warm + steps)], "visits the chain in its order"
    if warm + steps >= elements:
        assert set(hops) == set(order), "a walk as long as the chain visits every element"
