"""The rules a batch job and a window must follow, as {field: [message]} dicts.

Shared by the API, the web forms and the actions, so every door gives the
same answer. Pure functions over plain values (plus the catalog rows passed in).
"""

import re
from datetime import time

from django.utils import timezone

from batch import occurrences
from teams import inputs

# Kubernetes' classic rule for environment variable names.
ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
# Names that say "this is a secret": their values belong in a Secret.
SECRET_NAME = re.compile(
    r"(PASSWORD|PASSWD|SECRET|TOKEN|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIAL)", re.I
)
# Values that are recognisably credentials, whatever the variable is called.
SECRET_VALUE = re.compile(
    r"^(AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,}|hf_[A-Za-z0-9]{20,}|xox[abp]-)"
)
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
SECRET_KEY = re.compile(r"^[-._a-zA-Z0-9]{1,253}$")
# An image reference: [registry[:port]/]path[:tag][@digest], no spaces or control characters.
IMAGE = re.compile(
    r"^[a-z0-9]([a-z0-9._:-]*[a-z0-9])?(/[a-z0-9]([a-z0-9._-]*[a-z0-9])?)*"
    r"(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$"
)

MAX_ITEMS = 100  # command, args and env entries
MAX_ITEM_LENGTH = 4096
MAX_GPUS = 10_000
MAX_RUNTIME_MINUTES = 14 * 24 * 60
MAX_PRIORITY = 100


def normalize_image(image):
    """`python:3.12` -> `docker.io/library/python:3.12`, as a container runtime reads it."""
    first, _, rest = image.partition("/")
    if not rest or ("." not in first and ":" not in first and first != "localhost"):
        path = image if rest else f"library/{image}"
        return f"docker.io/{path}"
    return image


def image_errors(image, prefixes):
    if not isinstance(image, str) or not image:
        return ["Give a container image, e.g. nvcr.io/nvidia/pytorch:24.05-py3."]
    if len(image) > 512 or not IMAGE.match(image):
        return [f"{image[:80]!r} is not a container image reference."]
    full = normalize_image(image)
    if not any(full.startswith(prefix) for prefix in prefixes):
        allowed = ", ".join(prefixes) or "(none yet: ask a platform admin)"
        return [f"{image} is not from an allowed registry. Allowed: {allowed}."]
    return []


def _strings(value, field):
    if isinstance(value, str):
        return [
            f'Give {field} as a list of strings, e.g. ["python", "train.py"]; '
            "it is run as is, never by a shell."
        ]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        return [f"Give {field} as a list of strings."]
    if len(value) > MAX_ITEMS:
        return [f"At most {MAX_ITEMS} items."]
    for item in value:
        if "\x00" in item:
            return ["NUL characters are not allowed."]
        if len(item) > MAX_ITEM_LENGTH:
            return [f"Keep each item to {MAX_ITEM_LENGTH} characters."]
    return []


def env_errors(env):
    """Env: [{"name", "value"}] or [{"name", "secret": {"name", "key"}}]."""
    if not isinstance(env, list) or len(env) > MAX_ITEMS:
        return [f'Give env as a list of at most {MAX_ITEMS} {{"name", "value"}} objects.']
    errors, seen = [], set()
    for item in env:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            errors.append('Each entry needs a "name" and a "value" or a "secret".')
            continue
        name = item["name"]
        if not ENV_NAME.match(name) or len(name) > 253:
            errors.append(f"{name[:80]!r} is not a valid variable name (letters, digits, _ . -).")
            continue
        if name in seen:
            errors.append(f"{name} is given twice.")
        seen.add(name)
        extra = set(item) - {"name", "value", "secret"}
        if extra or ("value" in item) == ("secret" in item):
            errors.append(f'{name}: give exactly one of "value" or "secret".')
            continue
        if "secret" in item:
            ref = item["secret"]
            if (
                not isinstance(ref, dict)
                or set(ref) != {"name", "key"}
                or not isinstance(ref["name"], str)
                or not isinstance(ref["key"], str)
                or not DNS_LABEL.match(ref["name"])
                or not SECRET_KEY.match(ref["key"])
            ):
                errors.append(
                    f'{name}: a secret is {{"name": secret name, "key": key}} of a Secret in '
                    "your team's namespace."
                )
            continue
        value = item["value"]
        if isinstance(value, str) and "\x00" in value:
            errors.append(f"{name}: the value holds a NUL character, which is not allowed.")
        elif not isinstance(value, str) or len(value) > MAX_ITEM_LENGTH:
            errors.append(
                f"{name}: the value must be text of at most {MAX_ITEM_LENGTH} characters."
            )
        elif SECRET_NAME.search(name) or SECRET_VALUE.match(value):
            errors.append(
                f"{name} looks like a secret: keep it in a Secret in your team's namespace and "
                'give {"name": ..., "secret": {"name": ..., "key": ...}} instead of the value.'
            )
    return errors


ANNOTATION_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)


def annotation_errors(annotations):
    if not isinstance(annotations, dict) or len(annotations) > 20:
        return ['Give annotations as an object of at most 20 "key": "value" pairs.']
    for key, value in annotations.items():
        if not ANNOTATION_KEY.match(key):
            return [f"{key[:80]!r} is not an annotation key."]
        if not isinstance(value, str) or "\x00" in value or len(value) > 1000:
            return [f"{key}: the value must be text of at most 1,000 characters."]
    return []


def name_errors(name):
    """A job's or window's name: one line of 1 to 100 characters. It goes into email
    subjects, where a line break raised BadHeaderError."""
    if not isinstance(name, str) or not name.strip() or len(name) > 100:
        return ["Give a name of 1 to 100 characters."]
    if inputs.has_control_characters(name):
        return [inputs.ONE_LINE_MESSAGE + "."]
    return []


def _whole(value, field, low, high):
    if isinstance(value, bool) or not isinstance(value, int):
        return {field: ["A whole number is required."]}
    if not low <= value <= high:
        return {field: [f"Use a number from {low} to {high:,}."]}
    return {}


def job_errors(data, *, prefixes, windows, usable_without_spot=None):
    """Errors of a job's fields. `windows`: [(window, occurrence list, capacity by flavor id)]
    for the enabled windows, over the planning horizon. `usable_without_spot`: the
    flavor's GPUs on nodes a job without spot may land on (None: not known)."""
    errors = {}
    if message := name_errors(data.get("name")):
        errors["name"] = message
    if message := image_errors(data.get("image"), prefixes):
        errors["image"] = message
    for field in ("command", "args"):
        if message := _strings(data.get(field, []), field):
            errors[field] = message
    if message := env_errors(data.get("env", [])):
        errors["env"] = message
    if message := annotation_errors(data.get("annotations", {})):
        errors["annotations"] = message
    errors |= _whole(data.get("gpus"), "gpus", 1, MAX_GPUS)
    errors |= _whole(data.get("parallelism", 1), "parallelism", 1, MAX_GPUS)
    errors |= _whole(data.get("completions", 1), "completions", 1, 100_000)
    errors |= _whole(
        data.get("expected_runtime_minutes"), "expected_runtime_minutes", 1, MAX_RUNTIME_MINUTES
    )
    errors |= _whole(data.get("max_runtime_minutes"), "max_runtime_minutes", 1, MAX_RUNTIME_MINUTES)
    errors |= _whole(data.get("priority", 0), "priority", -MAX_PRIORITY, MAX_PRIORITY)
    counts_valid = "parallelism" not in errors and "completions" not in errors
    if counts_valid and data.get("parallelism", 1) > data.get("completions", 1):
        errors["parallelism"] = ["Parallelism cannot exceed completions."]
    expected, maximum = data.get("expected_runtime_minutes"), data.get("max_runtime_minutes")
    runtimes_valid = (
        "expected_runtime_minutes" not in errors and "max_runtime_minutes" not in errors
    )
    if runtimes_valid and maximum < expected:
        errors["max_runtime_minutes"] = ["The maximum runtime cannot be below the expected."]

    flavor = data.get("flavor")
    if flavor is None or errors.keys() & {"gpus", "parallelism", "max_runtime_minutes"}:
        return errors
    if not flavor.is_active:
        errors["flavor"] = [f"{flavor.name} is no longer offered."]
        return errors
    target = data.get("window")
    fitting = [(w, occ, cap) for w, occ, cap in windows if cap.get(flavor.pk)]
    if target is not None:
        fitting = [(w, occ, cap) for w, occ, cap in fitting if w.pk == target.pk]
        if not fitting:
            errors["window"] = [f"{target.name} is not open for {flavor.name} batch jobs."]
            return errors
    if not fitting:
        errors["flavor"] = [f"No enabled window sets {flavor.name} GPUs aside for batch."]
        return errors
    total = data["gpus"] * data.get("parallelism", 1)
    most = max(cap[flavor.pk] for _, _, cap in fitting)
    if total > most:
        errors["gpus"] = [
            f"{total} GPUs at once (GPUs x parallelism) is more than any window gives: "
            f"at most {most} {flavor.name}."
        ]
    elif usable_without_spot is not None and not data.get("spot_allowed"):
        # Kept off spot nodes (the Job's affinity), it can only use the others.
        if usable_without_spot == 0:
            errors["spot_allowed"] = [
                f"{flavor.name}'s nodes are all spot: a job that may not run on spot would "
                "never start. Allow spot, or pick another flavor."
            ]
        elif total > usable_without_spot:
            errors["gpus"] = [
                f"Without spot, {total} GPUs at once is more than {flavor.name}'s other nodes "
                f"hold: at most {usable_without_spot}. Allow spot, or ask for fewer."
            ]
    longest = max((o.duration for _, occ, _ in fitting for o in occ), default=None)
    if longest is not None and maximum * 60 > longest.total_seconds():
        errors["max_runtime_minutes"] = [
            f"{maximum} minutes is longer than any window: the longest is "
            f"{int(longest.total_seconds() // 60)} minutes."
        ]
    opens_at = data.get("occurrence")
    if opens_at is not None and target is not None:
        window, found, _ = fitting[0]
        if not any(o.opens_at == opens_at for o in found):
            errors["occurrence"] = [
                f"{window.name} has no occurrence opening at "
                f"{timezone.localtime(opens_at):%Y-%m-%d %H:%M %Z} in the next weeks."
            ]
    elif opens_at is not None:
        errors["occurrence"] = ["Name the window of the occurrence too."]
    return errors


def parse_time(value, field):
    """'HH:MM' -> time, or raise ValueError with a message for `field`."""
    if isinstance(value, time):
        return value
    if not isinstance(value, str) or not re.fullmatch(r"\d{2}:\d{2}", value):
        raise ValueError(f'Give {field} as "HH:MM", e.g. "20:00".')
    hour, minute = int(value[:2]), int(value[3:])
    if hour > 23 or minute > 59:
        raise ValueError(f"{value} is not a time of day (00:00 to 23:59).")
    return time(hour, minute)


def window_errors(*, name, timezone, days, start_time, end_time, end_day, exceptions, capacity):
    """Errors of a window's own fields; the capacity check against quota is in actions."""
    errors = {}
    if message := name_errors(name):
        errors["name"] = message
    if not isinstance(days, list) or not all(isinstance(d, str) for d in days):
        errors["days"] = ['Give days as a list, e.g. ["fri", "sat"].']
        days = []
    if not isinstance(exceptions, list) or not all(isinstance(d, str) for d in exceptions):
        errors["exceptions"] = ['Give exceptions as a list of dates, e.g. ["2026-12-24"].']
        exceptions = []
    elif len(exceptions) > 1000:
        errors["exceptions"] = ["At most 1,000 exception dates."]
    if not isinstance(capacity, dict) or not capacity:
        errors["capacity"] = ['Set GPUs aside for at least one flavor, e.g. {"h100": 8}.']
    else:
        for slug, gpus in capacity.items():
            if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
                errors["capacity"] = [
                    f"{slug}: a window needs at least 1 GPU per flavor it lists "
                    "(leave out a flavor it does not serve)."
                ]
                break
            if gpus > MAX_GPUS:
                errors["capacity"] = [f"{slug}: at most {MAX_GPUS:,} GPUs."]
                break
    if start_time is None or end_time is None:
        return errors
    rule = occurrences.WeeklyRule(
        timezone=timezone,
        days=tuple(days),
        start=start_time,
        end=end_time,
        end_day=end_day or None,
        exceptions=frozenset(exceptions),
    )
    for field, messages in rule.errors().items():
        errors.setdefault(field, messages)
    return errors
