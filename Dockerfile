# The app image: Django + gunicorn, the same code the local stack runs.
# Build deps (compiler, MariaDB headers) stay in the first stage.
FROM python:3.11-slim-bookworm AS build
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev libmariadb-dev pkg-config \
    && rm -rf /var/lib/apt/lists/*
COPY requirements.txt /tmp/requirements.txt
RUN python -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir --require-hashes -r /tmp/requirements.txt

FROM python:3.11-slim-bookworm
# mtail: the edge's exporter (compose's edge-exporter runs this image), which counts
# the purchases' answers in the log lines nginx sends it (monitoring/nginx.mtail).
RUN apt-get update \
    && apt-get install -y --no-install-recommends libmariadb3 mtail \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 10001 flashsale
COPY --from=build /opt/venv /opt/venv
WORKDIR /app
COPY --chown=flashsale:flashsale . /app
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    DJANGO_SETTINGS_MODULE=flashsale.settings.base \
    DJANGO_STATIC_ROOT=/app/static
USER 10001
# The static files, for nginx (compose shares them through the `static` volume).
RUN python manage.py collectstatic --noinput --verbosity=0
EXPOSE 8000
HEALTHCHECK --interval=5s --timeout=3s --start-period=10s --retries=5 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/readyz', timeout=2)"]
# Migrations are not run here: the compose file's one-shot `migrate` service runs
# them once, before any instance starts. flashsale.serve starts the server
# (FLASHSALE_SERVER) with the workers' metrics directory emptied where
# PROMETHEUS_MULTIPROC_DIR is set (the compose file's apps).
CMD ["python", "-m", "flashsale.serve", "--bind=0.0.0.0:8000", "--workers=2", "--threads=8"]
