"""The container recipe, exercised without Docker (these machines have a docker
CLI but no engine): the Dockerfile's build stage runs in a temporary directory
against a copy of the build context, and the runtime-only virtualenv it makes
serves the portal as the image and docker-compose.yml would. Everything is
read from the Dockerfile and the compose file, so this cannot drift from them."""

import json
import os
import re
import secrets
import shlex
import shutil
import socket
import subprocess
import tempfile
import tomllib
import urllib.error
import urllib.request
from fnmatch import fnmatch
from pathlib import Path

import pytest
import yaml

from tests.waiting import stop, wait_for

ROOT = Path(__file__).resolve().parents[2]
# The directories of the image the recipe names, each mapped to one of ours.
IMAGE_DIRS = ("/app", "/venv", "/tmp")


def instructions():
    """The Dockerfile's stages, each a list of (INSTRUCTION, arguments)."""
    lines = (ROOT / "Dockerfile").read_text().splitlines()
    text = "\n".join(line for line in lines if not line.lstrip().startswith("#"))
    stages = []
    for line in text.replace("\\\n", " ").splitlines():
        keyword, _, arguments = line.strip().partition(" ")
        if keyword.upper() == "FROM":
            stages.append([])
        if keyword:
            stages[-1].append((keyword.upper(), arguments.strip()))
    return stages


def ignored(relative, patterns):
    # Docker's `**/` matches no directory too; fnmatch's `*` also crosses `/`,
    # which only ever leaves out more than Docker would.
    return any(fnmatch(relative, p) or fnmatch(relative, p.removeprefix("**/")) for p in patterns)


def copy_context(destination):
    """The source tree as `COPY . .` sees it: without what .dockerignore lists."""
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    patterns = [p.strip().rstrip("/") for p in lines if p.strip() and not p.startswith("#")]
    assert not [p for p in patterns if p.startswith("!")], "exceptions are not modelled here"

    def ignore(directory, names):
        relative = Path(directory).relative_to(ROOT)
        return {name for name in names if ignored((relative / name).as_posix(), patterns)}

    shutil.copytree(ROOT, destination, ignore=ignore, symlinks=True, dirs_exist_ok=True)


def pypi_reachable():
    try:
        urllib.request.urlopen("https://pypi.org/simple/pip/", timeout=5).close()
    except OSError:
        return False
    return True


@pytest.fixture(scope="module")
def image():
    """Runs the build stage; returns the final stage's paths, environment and command."""
    if not pypi_reachable():
        pytest.skip("PyPI is unreachable: the build stage installs from it")
    build, final = instructions()
    # World-readable (pytest's tmp_path is not): the image's user reads the tree.
    with tempfile.TemporaryDirectory(prefix="portal-image-") as top:
        top = Path(top)
        top.chmod(0o755)
        dirs = {path: top / path.strip("/") for path in IMAGE_DIRS}
        dirs["/tmp"].mkdir(mode=0o1777)
        dirs["/tmp"].chmod(0o1777)

        def local(text):
            return re.sub(r"(?<![\w.])(/app|/venv|/tmp)\b", lambda m: str(dirs[m[1]]), text)

        # The base image's python is the system's python of its version (ours
        # under /root is out of the image user's reach).
        version = re.match(r"python:(\d+\.\d+)", build[0][1])[1]
        python = shutil.which(f"python{version}", path="/usr/local/bin:/usr/bin")
        if python is None:
            pytest.skip(f"no system python{version}, the base image's version")
        base_bin = top / "base-bin"
        base_bin.mkdir()
        (base_bin / "python").symlink_to(python)
        path = f"{base_bin}:/usr/local/bin:/usr/bin:/bin"
        build_env = {k: v for k, v in os.environ.items() if k.startswith("PIP_")}
        build_env |= {"PATH": path, "HOME": os.environ["HOME"]}
        workdir = None
        for keyword, arguments in build:
            if keyword == "FROM":
                continue
            elif keyword == "WORKDIR":
                workdir = Path(local(arguments))
                workdir.mkdir(parents=True, exist_ok=True)
            elif keyword == "COPY":
                *sources, destination = shlex.split(arguments)
                for source in sources:
                    if source == ".":
                        copy_context(workdir / destination)
                    else:
                        shutil.copy2(ROOT / source, workdir / destination)
            elif keyword == "RUN":
                # --no-cache-dir only keeps the image small; here the cache makes it fast.
                command = local(arguments).replace(" --no-cache-dir", "")
                subprocess.run(["sh", "-c", command], cwd=workdir, env=build_env, check=True)
            else:
                pytest.fail(f"the build stage's {keyword} is not modelled here")

        env = {"PATH": path, "HOME": str(dirs["/app"])}
        user = None
        for keyword, arguments in final:
            if keyword == "ENV":
                for pair in shlex.split(arguments):
                    name, _, value = pair.partition("=")
                    env[name] = local(value).replace("$PATH", env["PATH"])
            elif keyword == "USER":
                user = arguments
            elif keyword == "CMD":
                cmd = json.loads(arguments)
            elif keyword == "COPY":
                assert "--from=build" in arguments, "the final stage takes only the build's tree"
            elif keyword == "RUN":
                # Only the user's creation: anything else would be missing here.
                assert arguments.startswith("useradd "), f"not modelled here: RUN {arguments}"
        yield {"dirs": dirs, "env": env, "user": user, "cmd": cmd, "top": top}


def as_image_user(image, command):
    """The command as the image's USER (we run as root in CI): numeric, as the
    Dockerfile gives it, so no passwd entry is needed."""
    if os.geteuid() != 0:
        return command
    uid = image["user"]
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *command]


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def compose():
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def get(url, **headers):
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_the_image_serves_the_portal_as_its_non_root_user(image):
    assert image["user"] not in (None, "0", "root"), "the image must not run as root"
    app, venv = image["dirs"]["/app"], image["dirs"]["/venv"]
    # Only the runtime dependencies: a module that only the dev extras install
    # would fail below.
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    dev = {
        re.split(r"[<>=\[ ]", r)[0].lower()
        for r in pyproject["project"]["optional-dependencies"]["dev"]
    }
    listed = subprocess.run(
        [venv / "bin/python", "-m", "pip", "list", "--format=json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert dev & {p["name"].lower() for p in json.loads(listed)} == set()

    # The compose file's volume: the only place the image's user writes.
    data = image["top"] / "portal-var"
    data.mkdir()
    if os.geteuid() == 0:
        os.chown(data, int(image["user"]), int(image["user"]))
    port = free_port()
    env = image["env"] | {
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        "PORTAL_HTTPS": "true",
        "DATABASE_URL": f"sqlite:///{data}/portal.sqlite3",
        "GUNICORN_BIND": f"127.0.0.1:{port}",
        "GUNICORN_WORKERS": "1",
    }

    def run(command):
        result = subprocess.run(
            as_image_user(image, command), cwd=app, env=env, capture_output=True, text=True
        )
        assert result.returncode == 0, result.stdout + result.stderr

    run(["python", "manage.py", "check", "--deploy", "--fail-level", "WARNING"])
    run(shlex.split(compose()["services"]["migrate"]["command"]))

    log = (image["top"] / "gunicorn.log").open("w+")
    server = subprocess.Popen(
        as_image_user(image, image["cmd"]), cwd=app, env=env, stdout=log, stderr=log
    )
    try:

        def healthz():
            assert server.poll() is None, f"gunicorn exited: {log.seek(0) or log.read()}"
            try:
                return get(f"http://127.0.0.1:{port}/healthz")
            except OSError:
                return None

        assert wait_for(healthz, timeout=30) == (200, b'{"status": "ok"}')
        # A file collected into the image (Django admin's, not in static/), served by whitenoise.
        collected = app / "var/staticfiles/admin/css/base.css"
        status, body = get(
            f"http://127.0.0.1:{port}/static/admin/css/base.css", **{"X-Forwarded-Proto": "https"}
        )
        assert (status, body) == (200, collected.read_bytes())
    finally:
        stop(server)
        log.close()


def settings_variables():
    """The environment variables the portal reads: its settings and gunicorn's."""
    read = re.compile(r"(?:env_\w+|_int|os\.environ\.get)\(\s*\"([A-Z][A-Z0-9_]*)\"")
    return {
        name
        for path in ("portal/settings.py", "gunicorn.conf.py")
        for name in read.findall((ROOT / path).read_text())
    }


def test_compose_runs_the_image_as_the_portal_expects(image):
    services = compose()["services"]
    assert {"postgres", "redis", "migrate", "web", "worker", "beat"} <= set(services)
    assert services["beat"]["deploy"]["replicas"] == 1
    assert shlex.split(services["web"]["command"]) == image["cmd"]
    built = {name: s for name, s in services.items() if "build" in s}
    assert {"migrate", "web", "worker", "beat"} <= set(built)
    known = settings_variables()
    for name, service in built.items():
        assert set(service.get("environment", {})) <= known, name
        # The command exists in the runtime virtualenv and loads (celery -A portal
        # imports the portal's app even for --help); web and migrate run for real above.
        command = shlex.split(service["command"])
        assert (image["dirs"]["/venv"] / "bin" / command[0]).is_file(), name
        result = subprocess.run(
            [*command, "--help"],
            cwd=image["dirs"]["/app"],
            env=image["env"] | {"DJANGO_SECRET_KEY": "help-only"},
            capture_output=True,
            text=True,
        )
        assert result.returncode == 0, f"{name}: {result.stderr}"
