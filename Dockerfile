# The sandbox's relay, one static binary (replayhub/sandbox/relaybin.py): built
# here so that the worker image carries no compiler.
FROM debian:bookworm-slim AS relay
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev \
 && rm -rf /var/lib/apt/lists/*
COPY replayhub/sandbox/relay.c /src/relay.c
RUN gcc -static -Os -s -o /relay /src/relay.c

FROM python:3.11-slim-bookworm
RUN apt-get update \
 && apt-get install -y --no-install-recommends git bubblewrap util-linux libseccomp2 \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml README.md ./
COPY replayhub replayhub
COPY reviews reviews
RUN pip install --no-cache-dir .
COPY . .
COPY --from=relay /relay /usr/local/libexec/replayhub/relay
ENV DJANGO_SETTINGS_MODULE=replayhub.settings REPLAYHUB_VAR_DIR=/var/lib/replayhub \
    REPLAYHUB_STATIC_RELAY=/usr/local/libexec/replayhub/relay
RUN SECRET_KEY=build-only python manage.py collectstatic --no-input -v0
EXPOSE 8000
# --timeout: an upload of the largest allowed file is imported in the request.
CMD ["gunicorn", "replayhub.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3", "--timeout", "300"]
