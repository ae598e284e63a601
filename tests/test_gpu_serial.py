"""GPU tests never share the GPU: under pytest-xdist (``--dist loadgroup``, the project's default) every
``gpu``-marked test carries the same xdist groups, and one group runs on one worker, one test at a time."""
import pytest

import conftest

TESTS = '''
import pytest

@pytest.fixture(scope="module")
def once():
    return 1

@pytest.mark.gpu
def test_times_the_gpu(): pass

@pytest.mark.gpu
def test_times_the_gpu_with_a_module_fixture(once): pass

@pytest.mark.gpu
@pytest.mark.xdist_group("its_own")
def test_times_the_gpu_in_its_own_group(): pass

def test_on_the_cpu(once): pass
'''


class Groups:
    """Records each collected test's xdist group names, after every other collection hook."""

    def __init__(self):
        self.seen = {}

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items):
        self.seen = {item.name: conftest._group_names(item) for item in items}


def test_every_gpu_test_is_in_one_xdist_group(tmp_path):
    (tmp_path / "test_gpu_tests.py").write_text(TESTS)
    groups = Groups()
    code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "-p", "no:benchmark", "-n", "0",
                        str(tmp_path)], plugins=[conftest, groups])
    assert code == 0
    gpu = {name: names for name, names in groups.seen.items() if "gpu" in name and "cpu" not in name}
    assert len(gpu) == 3 and len({frozenset(names) for names in gpu.values()}) == 1, gpu
    assert "gpu" in gpu["test_times_the_gpu"]
    assert "gpu" not in groups.seen["test_on_the_cpu"]  # a CPU test keeps its own group
