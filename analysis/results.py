"""The results contract: a run directory and how it is written and read.

A run directory holds

* ``run.json`` -- schema version, device properties, software versions, argv, git sha, times and the
  status of every probe;
* ``measurements.parquet`` -- tidy long format, one row per sample per metric (``MEASUREMENT_COLUMNS`` plus
  one column per probe parameter);
* ``derived.csv`` -- one row per reconstructed hardware parameter (``DERIVED_COLUMNS``);
* ``parts/<probe>/<config>.parquet`` -- the same rows, one file per finished config.  Parts are the durable
  record while a run is in flight: each is written by atomic rename, so a crash or ``kill -9`` loses at most
  the config being measured, and ``gpuatlas run --resume`` skips every config that has a part.
* ``parts/<probe>.parquet`` -- a probe's finished configs in one file, written when the probe ends, so that
  reading a run in flight reads a file per probe, not one per config.
  ``measurements.parquet`` is the merge of all of these, written when the run ends (the per-probe files are
  then removed); a reader of an interrupted or killed run sees every part not merged yet.

Every file is replaced by ``os.replace`` of a finished temporary file: a reader never sees half a file.
"""
from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from gpuatlas.analysis.errors import UsageError

SCHEMA = "gpuatlas.run"
#: 2: every measurements row carries NVML telemetry (TELEMETRY_COLUMNS); schema-1 runs load with them empty.
#: 3: derived.csv carries ``repro_low``/``repro_high`` (REPRO_COLUMNS); older runs load with them empty.
SCHEMA_VERSION = 3
#: Quantity ids a schema renamed, by the version that renamed them: a run older than that version has its
#: derived.csv rows read under the new ids.  Schema 2: the two address-order fill blocks of chase.line, which
#: schema 1 called a line and a sector, got the names of what they measure; the TLB levels' ids took the
#: dotted form of the other levels.  Schema 3: the measured ratio of FFMA issue rates, which schema 2 called
#: the scheduler count, got its own name.
RENAMED_QUANTITIES = {2: {"l1.line_bytes": "l1.fill_bytes", "mem.sector_bytes": "l2.dram_fetch_bytes",
                          "tlb.level1_reach_bytes": "tlb.l1.reach_bytes", "tlb.level1_miss_cycles": "tlb.l1.miss_cycles",
                          "tlb.level2_reach_bytes": "tlb.l2.reach_bytes", "tlb.level2_miss_cycles": "tlb.l2.miss_cycles"},
                      # schema 3: sm.schedulers is the count; the ratio it was rounded from has its own id
                      3: {"sm.schedulers": "sm.schedulers_ratio"}}

#: The NVML readings over a sample's window: mean and max board power (W), median NVML SM clock (Hz), the OR
#: of the clock-event reason masks, max GPU temperature (C), and ``telemetry``: "power_capped" (SW power cap
#: or HW power brake set), "thermal" (SW or HW thermal slowdown), both joined by "+", or "".  Not a flag:
#: a power-capped sample is a real result, and fits keep it.  ``elapsed_s``: when the sample was made, in
#: seconds since its probe began measuring (in that process), the time axis the readings are drawn against.
TELEMETRY_COLUMNS = ("power_w", "power_max_w", "nvml_sm_clock_hz", "clock_event_reasons", "temperature_c",
                     "telemetry", "elapsed_s")
#: What a row has when nothing was recorded (no NVML, or a schema-1 run).
TELEMETRY_EMPTY = {"power_w": float("nan"), "power_max_w": float("nan"), "nvml_sm_clock_hz": float("nan"),
                   "clock_event_reasons": 0, "temperature_c": float("nan"), "telemetry": "",
                   "elapsed_s": float("nan")}
#: Columns every measurements row has; probe parameters add one column each (``footprint_bytes``, ...).
#: Schema 1 had all but the telemetry columns.
CORE_COLUMNS = ("run_id", "gpu", "probe", "config", "metric", "value", "unit", "repeat", "sm_clock_hz", "timer",
                "flag")
MEASUREMENT_COLUMNS = CORE_COLUMNS + TELEMETRY_COLUMNS
#: The columns of every schema's derived.csv (and of the references' tables).
BASE_DERIVED_COLUMNS = ("quantity", "value", "unit", "ci_low", "ci_high", "method", "probe", "note")
#: The interval another board of the same GPU model is expected to read (95%): the run's CI widened by the
#: board-to-board spread of the model's panel (``gpuatlas.analysis.repro``).  Empty where neither is known.
REPRO_COLUMNS = ("repro_low", "repro_high")
DERIVED_COLUMNS = (*BASE_DERIVED_COLUMNS[:5], *REPRO_COLUMNS, *BASE_DERIVED_COLUMNS[5:])

#: Flags a sample can carry; fits use only unflagged samples.
FLAGS = ("", "throttled", "invalid", "warmup")


def _file_mode() -> int:
    """rw for everyone the umask allows (mkstemp alone would leave finished files private)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that ``path`` is either the old file or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, _file_mode())
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def atomic_write_parquet(path: Path, frame: pd.DataFrame) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.fchmod(fd, _file_mode())
    os.close(fd)
    try:
        frame.to_parquet(tmp, index=False)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_table(path: Path, table: pa.Table) -> None:
    """Write ``table`` to ``path`` whole or not at all, as a part is written: atomic against the writer's death
    (``kill -9``), not synced to the disk, which a machine's crash alone could lose (a part costs a
    millisecond; a sync would cost more than that)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{os.getpid()}.tmp"
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def config_key(params: dict) -> str:
    """Canonical ``k=v,k=v`` string of one config's parameters, sorted by name."""
    return ",".join(f"{k}={params[k]}" for k in sorted(params))


def config_filename(params: dict) -> str:
    """A file name for one config's part: readable, and unique for distinct configs."""
    return _part_name(config_key(params))


def _part_name(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=,-]", "_", key or "default") + ".parquet"


@dataclass
class RunDir:
    """A run directory on disk (a path or its string); reading methods validate and raise ``UsageError`` with a
    fix."""

    path: Path

    def __post_init__(self):
        self.path = Path(self.path)

    @property
    def run_json(self) -> Path:
        return self.path / "run.json"

    @property
    def measurements_path(self) -> Path:
        return self.path / "measurements.parquet"

    @property
    def derived_path(self) -> Path:
        return self.path / "derived.csv"

    @property
    def parts(self) -> Path:
        return self.path / "parts"

    def part_path(self, probe: str, params: dict) -> Path:
        return self.parts / probe / config_filename(params)

    def probe_path(self, probe: str) -> Path:
        return self.parts / f"{probe}.parquet"

    # -- reading ---------------------------------------------------------------------------------
    def read_meta(self) -> dict:
        if not self.path.is_dir():
            raise UsageError(f"{self.path} is not a directory: give a run directory made by `gpuatlas run`")
        if not self.run_json.is_file():
            raise UsageError(f"{self.path} is not a gpuatlas run (no run.json): give a directory made by "
                             "`gpuatlas run`")
        try:
            meta = json.loads(self.run_json.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise UsageError(f"{self.run_json} is not valid JSON ({exc.__class__.__name__}): the run is "
                             "damaged; re-run it or restore the file") from None
        if not isinstance(meta, dict) or meta.get("schema") != SCHEMA:
            raise UsageError(f"{self.run_json} was not written by gpuatlas (no \"schema\": \"{SCHEMA}\")")
        version = meta.get("schema_version")
        if not isinstance(version, int):
            raise UsageError(f"{self.run_json} has no integer schema_version: the run is damaged")
        if version > SCHEMA_VERSION:
            raise UsageError(f"{self.path} was written with results schema {version}, newer than this "
                             f"gpuatlas reads ({SCHEMA_VERSION}): upgrade gpuatlas")
        return meta

    def read_measurements(self, order=()) -> pd.DataFrame:
        """All measured rows: the merged file, then the rows not merged yet (an interrupted run, or one being
        measured) probe by probe, those in ``order`` first."""
        frames = self._frames(None, order)
        if not frames:
            raise UsageError(f"{self.path} holds no measurements yet: finish it with "
                             f"`gpuatlas run --resume {self.path}`")
        return _whole_parameters(pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0])

    def read_probe(self, probe: str) -> pd.DataFrame:
        """The rows of one probe, merged or not (empty if it has none)."""
        frames = self._frames(probe)
        return _whole_parameters(pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
            columns=list(MEASUREMENT_COLUMNS)))

    def _frames(self, probe: str | None, order=()) -> list[pd.DataFrame]:
        """The merged rows (of ``probe``, or all), then each probe's own file and its parts, every config once:
        a part already in the merged file or its probe's file is not read (a full run has thousands)."""
        frames, held = [], set()  # (probe, part file name) of every config read

        def add(frame: pd.DataFrame, keys: list[tuple]) -> None:
            new = {key for key in keys if (key[0], _part_name(key[1])) not in held}
            if len(new) < len(keys):  # a file left by a run killed while it merged: only what is not merged yet
                frame = frame[[key in new for key in zip(frame["probe"], frame["config"])]]
            if len(frame):
                frames.append(frame)
                held.update((p, _part_name(c)) for p, c in new)

        def add_file(path: Path, filters=None) -> None:
            frame = _read_parquet(path, filters=filters)
            keys = frame[["probe", "config"]].drop_duplicates()
            add(frame, list(zip(keys["probe"], keys["config"])))

        if self.measurements_path.exists():
            add_file(self.measurements_path, None if probe is None else [("probe", "==", probe)])
        for name in self._unmerged(order) if probe is None else [probe]:
            if self.probe_path(name).is_file():
                add_file(self.probe_path(name))
            folder = self.parts / name
            for part in sorted(folder.glob("*.parquet")) if folder.is_dir() else ():
                if (name, part.name) not in held:
                    frame = _read_parquet(part)  # one config
                    add(frame, [(frame["probe"].iat[0], frame["config"].iat[0])] if len(frame) else [])
        return frames

    def _unmerged(self, order=()) -> list[str]:
        """Probes with files under parts/: those in ``order`` first, then the rest by name."""
        found = {p.name.removesuffix(".parquet") for p in self.parts.iterdir()
                 if not p.name.startswith(".")} if self.parts.is_dir() else set()
        return [p for p in order if p in found] + sorted(found - set(order))

    def read_derived(self) -> pd.DataFrame:
        if not self.derived_path.is_file():
            raise UsageError(f"{self.path} has no derived.csv: finish the run with "
                             f"`gpuatlas run --resume {self.path}`")
        try:
            frame = pd.read_csv(self.derived_path)
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
            raise UsageError(f"{self.derived_path} is not a derived-quantities CSV "
                             f"({exc.__class__.__name__})") from None
        missing = set(BASE_DERIVED_COLUMNS) - set(frame.columns)
        if missing:
            raise UsageError(f"{self.derived_path} lacks columns {sorted(missing)}: not a gpuatlas "
                             "derived.csv")
        for column in REPRO_COLUMNS:  # a run older than schema 3
            if column not in frame:
                frame[column] = float("nan")
        frame = frame[list(DERIVED_COLUMNS)]
        numbers = ["value", "ci_low", "ci_high", *REPRO_COLUMNS]
        try:
            frame[numbers] = frame[numbers].apply(pd.to_numeric)
        except (ValueError, TypeError):
            raise UsageError(f"{self.derived_path} has values that are not numbers: it is damaged; rebuild it "
                             f"with `gpuatlas run --resume {self.path}`") from None
        return migrate_derived(frame, self.read_meta()["schema_version"])

    def done_configs(self, probe: str) -> set[str]:
        """Config keys of ``probe`` that are on disk: merged, in its probe's file, or in a part."""
        done = set()
        if self.measurements_path.exists():
            frame = _read_parquet(self.measurements_path, columns=["probe", "config"],
                                  filters=[("probe", "==", probe)])
            done |= set(frame["config"])
        if self.probe_path(probe).is_file():
            done |= set(_read_parquet(self.probe_path(probe), columns=["config"])["config"])
        folder = self.parts / probe
        if folder.is_dir():
            named = {_part_name(key) for key in done}
            for part in folder.glob("*.parquet"):
                if part.name not in named:
                    done |= set(_read_parquet(part, columns=["config"])["config"])
        return done

    # -- writing ---------------------------------------------------------------------------------
    def write_meta(self, meta: dict) -> None:
        atomic_write_text(self.run_json, json.dumps(meta, indent=2, sort_keys=False, default=str) + "\n")

    def write_part(self, probe: str, params: dict, rows: pa.Table) -> None:
        write_table(self.part_path(probe, params), rows)

    def write_probe(self, probe: str, tables: list[pa.Table]) -> None:
        """A probe's finished parts as its one file, with the rows that file holds already (a resumed probe)."""
        path = self.probe_path(probe)
        if path.is_file():
            tables = [pq.read_table(path), *tables]
        write_table(path, pa.concat_tables(tables, promote_options="permissive"))

    def read_merged(self, order=()) -> pd.DataFrame:
        """What ``merge_parts`` writes: every measured row, a sample measured twice (a resumed config) once."""
        return self.read_measurements(order).drop_duplicates(subset=["probe", "config", "metric", "repeat"],
                                                            keep="last")

    def merge_parts(self, order=()) -> pd.DataFrame:
        """Write measurements.parquet as the union of everything measured (probes in ``order`` first, as
        ``read_measurements`` orders them), then remove the per-probe files it holds."""
        frame = self.read_merged(order)
        self.write_merged(frame)
        return frame

    def write_merged(self, frame: pd.DataFrame) -> None:
        """measurements.parquet as ``frame`` (``read_merged``'s), then the per-probe files it holds removed."""
        atomic_write_parquet(self.measurements_path, frame)
        for path in self.parts.glob("*.parquet") if self.parts.is_dir() else ():
            path.unlink()

    def remove_temporaries(self) -> list[Path]:
        """Delete half-written files a killed writer left (``.name.*.tmp``); finished files are never touched."""
        stale = [p for p in self.path.rglob(".*.tmp") if p.is_file()]
        for p in stale:
            p.unlink()
        return stale

    def write_derived(self, derived: pd.DataFrame) -> None:
        """derived.csv; a table without repro intervals (no panel spread known) gets them empty."""
        derived = derived.reindex(columns=list(DERIVED_COLUMNS))
        atomic_write_text(self.derived_path, derived.to_csv(index=False))


def migrate_derived(derived: pd.DataFrame, schema_version: int) -> pd.DataFrame:
    """A derived table written under ``schema_version``, with every id renamed since then under its new name
    (renames apply in version order, so an id renamed twice ends under its latest name)."""
    derived = derived.copy()
    for version in sorted(v for v in RENAMED_QUANTITIES if v > schema_version):
        derived["quantity"] = derived["quantity"].replace(RENAMED_QUANTITIES[version])
    return derived


def _read_parquet(path: Path, columns: list[str] | None = None, filters=None) -> pd.DataFrame:
    try:
        frame = pd.read_parquet(path, columns=columns, filters=filters)
    except Exception as exc:  # pyarrow raises several types for truncated or foreign files
        raise UsageError(f"{path} is not a readable parquet file ({exc.__class__.__name__}): it is "
                         "truncated or foreign; delete it and finish the run with `gpuatlas run --resume`"
                         ) from None
    needed = set(columns or CORE_COLUMNS) - set(TELEMETRY_COLUMNS)
    if not needed <= set(frame.columns):
        raise UsageError(f"{path} lacks columns {sorted(needed - set(frame.columns))}: not a gpuatlas "
                         "measurements file")
    return with_telemetry(frame, columns)


def with_telemetry(frame: pd.DataFrame, columns: list[str] | None = None) -> pd.DataFrame:
    """``frame`` with every telemetry column (of ``columns``, if given) it lacks filled empty (schema 1)."""
    wanted = [c for c in TELEMETRY_COLUMNS if columns is None or c in columns]
    missing = [c for c in wanted if c not in frame.columns]
    if not missing:
        return frame
    frame = frame.copy()
    for column in missing:
        frame[column] = TELEMETRY_EMPTY[column]
    return frame.astype({"clock_event_reasons": "int64"}) if "clock_event_reasons" in missing else frame


def _whole_parameters(frame: pd.DataFrame) -> pd.DataFrame:
    """Probe parameters that hold whole numbers as integers again: a parameter column is empty in other
    probes' rows, and a merged file stores it as float for them; nullable Int64 keeps 4096 an integer."""
    for column in frame.columns.difference(MEASUREMENT_COLUMNS):
        if frame[column].dtype.kind == "f":
            values = frame[column].to_numpy()
            present = values[~np.isnan(values)]
            if present.size and (present == np.round(present)).all():
                frame[column] = frame[column].astype("Int64")
    return frame


def load_run(path: str | os.PathLike) -> tuple[dict, pd.DataFrame]:
    """Read and validate a run directory: ``(run.json as a dict, measurements)``."""
    run = RunDir(Path(path))
    return run.read_meta(), run.read_measurements()
