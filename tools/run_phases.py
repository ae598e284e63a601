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
    from gpuatlas import cli
    from gpuatlas.analysis import results
    from gpuatlas.machinery import device, runner, workers

    stamp("cli imported")
    timed(workers.Worker, "stop")
    timed(runner, "prepare")
    timed(device, "require_gpu")
    timed(device, "device_properties")
    timed(device, "software_versions")
    timed(runner, "new_run")
    timed(workers, "start_lanes")
    timed(runner, "_now", "now")
    merge_parts = results.RunDir.merge_parts

    def merge(self, *a, **k):
        """The merge, stamped; then the derivation (imported by now) stamped too, once."""
        stamp("merge start")
        out = merge_parts(self, *a, **k)
        stamp("merge end")
        derive = sys.modules["gpuatlas.analysis.derive"]
        if not hasattr(derive, "_stamped"):
            derive._stamped = True
            timed(derive, "_family_rows")
            timed(derive.repro, "attach")
        return out

    results.RunDir.merge_parts = merge
    timed(results.RunDir, "write_derived")
    rc = cli.main(sys.argv[1:])
    stamp(f"main returned {rc}")
    sys.exit(rc)
