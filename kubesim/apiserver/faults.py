"""Injected failures for Kubernetes API paths: error statuses, latency, dropped connections."""

import random
import re
import threading
from dataclasses import asdict, dataclass, field


@dataclass
class FaultConfig:
    error_rate: float = 0.0
    statuses: list[int] = field(default_factory=lambda: [500, 503, 429])
    retry_after: int = 1
    latency_ms: int = 0
    drop_rate: float = 0.0
    paths: str | None = None  # regex on the request path; None: every API path
    methods: list[str] | None = None  # e.g. ["POST"]; None: every method


class Faults:
    def __init__(self, seed: int | None = None):
        self._lock = threading.Lock()
        self._random = random.Random(seed)
        self.config = FaultConfig()

    def get(self) -> dict:
        return asdict(self.config)

    def set(self, **settings) -> dict:
        unknown = set(settings) - set(FaultConfig.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown fault settings: {sorted(unknown)}")
        if settings.get("paths"):
            re.compile(settings["paths"])
        with self._lock:
            self.config = FaultConfig(**settings)
        return self.get()

    def clear(self) -> None:
        self.set()

    def decide(self, method: str, path: str) -> tuple[str, int | None, float]:
        """("ok" | "error" | "drop", status, latency seconds) for one API request."""
        config = self.config
        if config.paths and not re.search(config.paths, path):
            return "ok", None, 0.0
        if config.methods and method not in config.methods:
            return "ok", None, 0.0
        latency = config.latency_ms / 1000
        with self._lock:
            roll_drop, roll_error = self._random.random(), self._random.random()
            status = self._random.choice(config.statuses) if config.statuses else 500
        if roll_drop < config.drop_rate:
            return "drop", None, latency
        if roll_error < config.error_rate:
            return "error", status, latency
        return "ok", None, latency
