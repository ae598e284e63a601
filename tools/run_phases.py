"""gpuatlas's CLI with time stamps around its start-up and end-of-run steps, on stderr: where a run's time goes
(`python3 tools/run_phases.py run --profile quick`; the runs of reports/h200-quick-cold/phases/)."""
import sys
import time

T0 = time.time()


def stamp(msg):
    print(f"[t {time.time() - T0:7.3f}] {msg}", file=sys.stderr, flush=True)


def timed(owner, name, label=None):
    func = getattr(owner, name)

    def wrapper(*a, **k):
        stamp(f"{label or name} start")
        try:
            return func(*a, **k)
        finally:
            stamp(f"{label or name} end")
    setattr(owner, name, wrapper)


if __name__ == "__main__":
    from gpuatlas import cli  # noqa: E402
    from gpuatlas.machinery import runner, workers, device  # noqa: E402
    from gpuatlas.analysis import results  # noqa: E402
    stamp("cli imported")
    timed(workers.Worker, "stop")
    timed(runner, "prepare")
    timed(device, "require_gpu")
    timed(device, "device_properties")
    timed(device, "software_versions")
    timed(runner, "new_run")
    timed(workers, "start_lanes")
    timed(runner, "_now", "now")
    orig_merge = results.RunDir.merge_parts


    def merge(self, *a, **k):
        stamp("merge start")
        out = orig_merge(self, *a, **k)
        stamp("merge end")
        d = sys.modules["gpuatlas.analysis.derive"]
        timed(d, "_family_rows")
        timed(d.repro, "attach")
        return out


    results.RunDir.merge_parts = merge
    timed(results.RunDir, "write_derived")
    rc = cli.main(sys.argv[1:])
    stamp(f"main returned {rc}")
    sys.exit(rc)
