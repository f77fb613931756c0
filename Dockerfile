# bpecore service image: build wheels (Cython core compiled here), then a slim runtime with no
# compiler, running as uid 10001 with the vocab files baked into the wheel (nothing is downloaded at
# start-up). Targets: `build`, `test` (pytest against the installed wheel), `runtime` (default).
#   docker build -t bpecore-service .
#   docker build --target test .
ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS build
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends build-essential \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY bpecore/ bpecore/
COPY service/ service/
RUN pip wheel --no-cache-dir --wheel-dir /wheels ".[service]"

FROM ${PYTHON_IMAGE} AS test
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index /wheels/*.whl \
    && pip install --no-cache-dir "pytest==8.3.5" "hypothesis==6.131.0" "httpx==0.28.1" "websockets==15.0.1" \
        "tiktoken==0.9.0" "kubernetes-validate==1.33.0"
# Run from a directory without the sources, so the tests import the installed wheel.
WORKDIR /t
COPY pyproject.toml Dockerfile ./
COPY tests/ tests/
COPY deploy/ deploy/
RUN python -m pytest -q tests/service

FROM ${PYTHON_IMAGE} AS runtime
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index /wheels/*.whl \
    && rm -rf /wheels \
    && python -c "import bpecore; [bpecore.get_encoding(n) for n in bpecore.list_encodings()]" \
    && useradd --uid 10001 --no-create-home --shell /usr/sbin/nologin bpesvc
# Every interface, explicitly (the CMD says it too): `bpecore serve` alone listens on 127.0.0.1.
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    BPESVC_HOST=0.0.0.0 \
    BPESVC_PORT=8000
EXPOSE 8000
USER 10001
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/readyz', timeout=2)"]
CMD ["uvicorn", "bpecore_service.main:app", "--host", "0.0.0.0", "--port", "8000", "--loop", "uvloop", "--http", "httptools", "--no-access-log", "--timeout-graceful-shutdown", "25"]
