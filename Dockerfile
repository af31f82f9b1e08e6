# One image for every role: the simulated server, the Locust master and its workers.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY loadtest ./loadtest
COPY scenarios ./scenarios
RUN pip install --no-cache-dir .
ENTRYPOINT ["loadtest"]
CMD ["--help"]
