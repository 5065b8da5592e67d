# flagbot in a container: the bot talks to Slack (Socket Mode by default, no public URL needed)
# and to GPU hosts over SSH. Mount the config, the SSH key and known_hosts, and state/.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1

RUN apt-get update \
 && apt-get install -y --no-install-recommends openssh-client ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --create-home --uid 10001 flagbot

WORKDIR /app
COPY pyproject.toml README.md ./
COPY bot ./bot
COPY playbooks ./playbooks
RUN pip install . && mkdir -p /app/state && chown flagbot:flagbot /app/state

USER flagbot
VOLUME ["/app/state"]
ENV FLAGBOT_CONFIG=/app/flagbot.toml
# Secrets come from the environment: SLACK_BOT_TOKEN, SLACK_APP_TOKEN, SLACK_SIGNING_SECRET,
# FLAGBOT_DATABASE_URL (optional; SQLite in /app/state otherwise).
ENTRYPOINT ["flagbot"]
CMD ["--help"]
