"""Where the history goes: one spool file per metric family (or per block, with
--split), and the answer file (JSON or CSV)."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import shutil
import tempfile

from kubesim.clock import format_time

from .workload import as_datetime

ANSWER_FIELDS = [
    "hour",
    "namespace",
    "pod",
    "job",
    "node",
    "resource",
    "gpus",
    "held_minutes",
    "gpu_minutes",
    "busy_gpu_minutes",
    "idle_gpu_minutes",
    "unobserved_gpu_minutes",
    "mean_utilisation",
    "peak_fb_used_mib",
]


class Spools:
    """One temporary file per family while the steps run; `finish` concatenates them
    into OpenMetrics (families must not interleave)."""

    def __init__(self, out: str, families: list, selected):
        self.out = out
        directory = os.path.dirname(os.path.abspath(out))
        self.tmp = tempfile.TemporaryDirectory(prefix=".kubesim-history-", dir=directory)
        self.families = [f for f in families if selected(f.name)]
        self.files = {
            family.name: open(  # noqa: SIM115 (closed in finish)
                os.path.join(self.tmp.name, family.name), "w", buffering=1 << 20
            )
            for family in self.families
        }
        self.lines = 0

    def write(self, family: str, text: str, lines: int) -> None:
        handle = self.files.get(family)
        if handle is not None and lines:
            handle.write(text)
            self.lines += lines

    def finish(self, out: str) -> None:
        tmp_out = out + ".tmp"
        with open(tmp_out, "wb") as target:
            for family in self.families:
                self.files[family.name].close()
                # OpenMetrics wants counters named *_total; DCGM's are not, so they are
                # declared `unknown`: the series and values stay those of a scrape.
                kind = family.kind if family.kind == "gauge" else "unknown"
                header = f"# HELP {family.name} {family.help}\n# TYPE {family.name} {kind}\n"
                target.write(header.encode())
                spool = os.path.join(self.tmp.name, family.name)
                with open(spool, "rb") as source:
                    shutil.copyfileobj(source, target, 1 << 22)
                os.remove(spool)  # the disk holds the output plus one family, not twice it
            target.write(b"# EOF\n")
        os.replace(tmp_out, out)
        self.tmp.cleanup()

    def abort(self) -> None:
        for handle in self.files.values():
            handle.close()
        self.tmp.cleanup()
        with contextlib.suppress(FileNotFoundError):
            os.remove(self.out + ".tmp")

    def step(self, at: float) -> None:
        """Called before each step's samples (a whole file has no parts to close)."""


class SplitSpools:
    """`--split`: one OpenMetrics file per `split` seconds of history (aligned to the
    epoch, as promtool aligns its blocks), OUT.000, OUT.001 ..., each written whole
    as soon as its last step is played and announced on stdout as a JSON line, so a
    loader can turn it into a block while the next is generated. promtool parses its
    whole input once per block it writes: a file per block is parsed once."""

    def __init__(self, out: str, families: list, selected, split: float, announce=print):
        self.out, self.families, self.selected = out, families, selected
        self.split, self.announce = split, announce
        self.current: Spools | None = None
        self.boundary = None
        self.paths: list[str] = []
        self.lines = 0

    def _path(self) -> str:
        return f"{self.out}.{len(self.paths):03d}"

    def step(self, at: float) -> None:
        if self.current is not None and at < self.boundary:
            return
        self._close()
        self.boundary = (at // self.split + 1) * self.split
        self.current = Spools(self._path(), self.families, self.selected)

    def write(self, family: str, text: str, lines: int) -> None:
        self.current.write(family, text, lines)

    def _close(self) -> None:
        if self.current is None:
            return
        path = self._path()
        self.current.finish(path)
        self.lines += self.current.lines
        self.paths.append(path)
        self.current = None
        self.announce(
            json.dumps({"written": path, "until": format_time(as_datetime(self.boundary))})
        )

    def finish(self, out: str) -> None:
        self._close()

    def abort(self) -> None:
        if self.current is not None:
            self.current.abort()
        for path in self.paths:
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)


# --- answer files ---


class _AnswerFile:
    handle = None
    path = ""

    def abort(self) -> None:
        if self.handle is not None:
            self.handle.close()
        with contextlib.suppress(FileNotFoundError):
            os.remove(self.path + ".tmp")


class JsonAnswer(_AnswerFile):
    def __init__(self, path: str, meta: dict):
        self.handle = open(path + ".tmp", "w")  # noqa: SIM115 (closed in close)
        self.path = path
        head = json.dumps(meta)[:-1]
        self.handle.write(head + ', "rows": [\n')
        self.first = True
        self.count = 0

    def write(self, row: dict) -> None:
        self.handle.write(("" if self.first else ",\n") + json.dumps(row))
        self.first = False
        self.count += 1

    def close(self) -> None:
        self.handle.write("\n]}\n")
        self.handle.close()
        os.replace(self.path + ".tmp", self.path)


class CsvAnswer(_AnswerFile):
    def __init__(self, path: str, meta: dict):
        self.handle = open(path + ".tmp", "w", newline="")  # noqa: SIM115 (closed in close)
        self.path = path
        self.writer = csv.DictWriter(self.handle, fieldnames=ANSWER_FIELDS)
        self.writer.writeheader()
        self.count = 0

    def write(self, row: dict) -> None:
        self.writer.writerow({k: "" if v is None else v for k, v in row.items()})
        self.count += 1

    def close(self) -> None:
        self.handle.close()
        os.replace(self.path + ".tmp", self.path)
