"""Parse Prometheus text format 0.0.4 in tests, strictly enough to catch bad lines."""

import re
import urllib.request

SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})? (\S+)$")
LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(text: str) -> tuple[dict, list]:
    """(types by metric, [(metric, labels, value)])."""
    types, samples = {}, []
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            types[name] = kind
        elif line.startswith("# HELP ") or not line:
            continue
        else:
            match = SAMPLE.match(line)
            assert match, f"unparseable line: {line!r}"
            name, labels, value = match.groups()
            pairs = LABEL.findall(labels or "")
            assert [k for k, _ in pairs] == list(dict(pairs)), f"repeated label: {line!r}"
            samples.append((name, pairs, float(value)))
    return types, [(name, dict(pairs), value) for name, pairs, value in samples]


def scrape_text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return response.read().decode()


def scrape(url: str) -> tuple[dict, list]:
    return parse(scrape_text(url))


def series(samples, metric, **labels):
    return [
        (found, value)
        for name, found, value in samples
        if name == metric and all(found.get(key) == want for key, want in labels.items())
    ]
