FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY labelq ./labelq
COPY workers ./workers
COPY cli ./cli
RUN pip install --no-cache-dir . \
    && useradd --system --uid 10001 --home-dir /app --shell /usr/sbin/nologin labelq \
    && mkdir -p /app/exports /data \
    && chown labelq:labelq /app/exports
# not root: the services run as this user (docker-compose.yml says so too); exports is the
# one directory it writes (a named volume initialised with this ownership)
USER labelq
ENTRYPOINT []
CMD ["labelq", "--help"]
