# syntax=docker/dockerfile:1
# Wizard Arena: one image for the API (`wizard-arena serve`, the default command) and the
# workers (`wizard-arena worker`). Both need REDIS_URL; docker-compose.yml wires them up.

# ---- build: install the package and its dependencies into a virtualenv -------------------
FROM python:3.11-slim AS build

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Compilers for the engine's compiled modules (setup.py: mypyc), and in case a dependency
# has no wheel for this platform; none of this stage's tooling reaches the final image.
RUN apt-get update \
    && apt-get install -y --no-install-recommends build-essential \
    && rm -rf /var/lib/apt/lists/*

RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH

WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY requirements ./requirements
COPY wizard ./wizard
COPY ranking ./ranking
COPY contract ./contract
COPY sdk ./sdk
COPY service ./service
COPY worker ./worker
COPY bench ./bench
COPY wizard_arena ./wizard_arena
# Reproducible: every package at the version, and with the hashes, of requirements/lock.txt
# (`make lock` writes it from pyproject.toml's server extra); then the project itself alone.
RUN pip install --require-hashes -r requirements/lock.txt \
    && pip install --no-deps '.[server]'

# ---- runtime -------------------------------------------------------------------------------
FROM python:3.11-slim

ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1

RUN groupadd --system --gid 10001 arena \
    && useradd --system --uid 10001 --gid arena --home-dir /app --shell /usr/sbin/nologin arena \
    && mkdir -p /app \
    && chown arena:arena /app

COPY --from=build /opt/venv /opt/venv

WORKDIR /app
USER arena

EXPOSE 8000

# Liveness: /healthz answers 200 while this process serves HTTP, whatever Redis and the
# archive are doing (urlopen raises on a refused connection or a timeout). An orchestrator that
# replaces unhealthy containers (swarm) then restarts a hung API, never every API at once over
# an outage that a restart cannot cure; whether to route traffic here is /readyz's answer
# (docker-compose.yml). The slim image has no curl: Python does the asking. The worker has
# no HTTP port: docker-compose.yml gives it a check of its own.
HEALTHCHECK --interval=10s --timeout=5s --start-period=15s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"]

CMD ["wizard-arena", "serve", "--host", "0.0.0.0", "--port", "8000"]
