# flagbot in a container: `flagbot serve` talks to Slack (Socket Mode by default: outbound only,
# no public URL) and to the GPU hosts over SSH (asyncssh, pure Python: no ssh client needed).
#
#   docker build -t flagbot .
#   docker run -d --name flagbot --env-file /etc/flagbot/secrets.env \
#     -v /etc/flagbot:/etc/flagbot:ro -v flagbot-state:/app/state flagbot
#
# Config: a mounted file ($FLAGBOT_CONFIG, /etc/flagbot/flagbot.toml); the SSH key and known_hosts
# are mounted too and named in it (targets.NAME.ssh.key_path / known_hosts). Secrets only from the
# environment: SLACK_BOT_TOKEN, SLACK_APP_TOKEN (Socket Mode), SLACK_SIGNING_SECRET (HTTP mode),
# FLAGBOT_DATABASE_URL (PostgreSQL; unset: SQLite in /app/state). docs/operations.md has the rest.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# --- builder: a venv at /opt/venv with flagbot and its dependencies (all wheels: no compiler) ---
FROM ${PYTHON_IMAGE} AS builder
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/venv
WORKDIR /src
COPY pyproject.toml README.md ./
# bot/playbooks is a link to the top-level playbooks/ (the built-in playbooks and the flag
# knowledge base); the wheel carries them as package data of `bot`, so the link's target comes too.
COPY playbooks ./playbooks
COPY bot ./bot
RUN /opt/venv/bin/pip install --upgrade pip \
 && /opt/venv/bin/pip install /src

# --- runtime: the same Python, the venv, a non-root user, state on a volume ---
FROM ${PYTHON_IMAGE} AS runtime
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    FLAGBOT_CONFIG=/etc/flagbot/flagbot.toml
# The only OS packages flagbot needs at run time (python:slim usually has both; stated, not assumed):
# CA certificates for TLS to Slack, tzdata for [schedules] time zones. asyncssh is pure Python
# (no ssh client), psycopg[binary] carries libpq, matplotlib/numpy/scipy wheels carry their libraries.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates tzdata \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --create-home --home-dir /home/flagbot --uid 10001 --user-group --shell /usr/sbin/nologin flagbot \
 && mkdir -p /app/state /etc/flagbot \
 && chown flagbot:flagbot /app/state
COPY --from=builder /opt/venv /opt/venv
# flagbot runs in /app: the default database.sqlite_path (state/flagbot.db), the host flag-list
# cache (state/cache) and evidence files (state/evidence) all land on the volume.
WORKDIR /app
USER flagbot
VOLUME ["/app/state"]
# HTTP mode only (`serve --http 0.0.0.0:3000`); Socket Mode listens on nothing.
EXPOSE 3000
# What this proves: the mounted config is valid and the database answers (SQLite on the volume,
# or PostgreSQL). It cannot see the Slack connection: Socket Mode reconnects by itself, and a
# `flagbot serve` that stops ends the container.
HEALTHCHECK --interval=60s --timeout=20s --start-period=30s --retries=3 \
  CMD ["/opt/venv/bin/flagbot", "db", "current"]
ENTRYPOINT ["/opt/venv/bin/flagbot"]
CMD ["serve"]
