# The portal's image: web (gunicorn), worker and beat run from it with
# different commands (docker-compose.yml, deploy/). Small (slim base, only
# runtime dependencies, pinned by requirements.lock), and not run as root.
FROM python:3.11-slim AS build
WORKDIR /app
COPY pyproject.toml requirements.lock ./
# The runtime dependencies of pyproject.toml at the lock's versions (no test tools).
RUN python -m venv /venv \
 && /venv/bin/pip install --no-cache-dir --upgrade pip \
 && /venv/bin/python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" > runtime.txt \
 && /venv/bin/pip install --no-cache-dir -r runtime.txt -c requirements.lock
COPY . .
# Static files collected into the image; whitenoise serves them.
RUN DJANGO_SECRET_KEY=collectstatic-only PORTAL_VAR_DIR=/app/var \
    /venv/bin/python manage.py collectstatic --noinput -v0

FROM python:3.11-slim
RUN useradd --system --uid 10001 --home-dir /app --shell /usr/sbin/nologin portal
WORKDIR /app
COPY --from=build /venv /venv
COPY --from=build --chown=root:root /app /app
ENV PATH=/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PORTAL_VAR_DIR=/app/var \
    PROMETHEUS_MULTIPROC_DIR=/tmp/prometheus
USER 10001
EXPOSE 8000
CMD ["gunicorn", "portal.wsgi:application"]
