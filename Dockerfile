FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY labelq ./labelq
COPY workers ./workers
COPY cli ./cli
RUN pip install --no-cache-dir .
ENTRYPOINT []
CMD ["labelq", "--help"]
