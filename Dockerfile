# One slim, non-root image with both entry points:
#   mas-operator  the kopf operator (charts/mas-operator runs it)
#   mas-ctl       the agent runtime the operator's pods run (mas-ctl serve)
# Dependencies are exactly the versions in requirements.lock (the runtime lock, no dev tools;
# docs/dependencies.md), hash-checked, installed into a virtualenv in a build stage.

FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# Dependencies first, from the lock alone, so a source change reuses this layer.
COPY requirements.lock ./
RUN python -m venv /opt/maslab \
 && /opt/maslab/bin/pip install --upgrade pip \
 && /opt/maslab/bin/pip install --require-hashes --no-deps -r requirements.lock
COPY pyproject.toml README.md ./
COPY runtime/ runtime/
COPY operator/ operator/
RUN /opt/maslab/bin/pip install --no-deps . \
 && /opt/maslab/bin/pip check \
 && /opt/maslab/bin/mas-operator --help >/dev/null \
 && /opt/maslab/bin/mas-ctl --help >/dev/null

FROM python:3.11-slim
LABEL org.opencontainers.image.title="maslab" \
      org.opencontainers.image.description="MAS Lab: mas-operator and the mas-ctl agent runtime" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN groupadd --gid 10001 maslab \
 && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /tmp --shell /usr/sbin/nologin maslab
COPY --from=build /opt/maslab /opt/maslab
ENV PATH=/opt/maslab/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp
USER 10001:10001
WORKDIR /tmp
EXPOSE 8080 9090 9464
# The chart and the operator's Deployments set the command; this default shows the help.
ENTRYPOINT []
CMD ["mas-operator", "--help"]
