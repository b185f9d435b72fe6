# The demo service (demos/service_app.py) as an image, for docker/replicas-compose.yml.
#
#   docker compose -f docker/replicas-compose.yml up --build
#
# Built from the repository root (the compose file's context), so the package
# is installed from this checkout with the extras a replica needs.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md LICENSE MANIFEST.in ./
COPY src ./src
COPY demos ./demos
RUN pip install --no-cache-dir ".[local,pgvector,service]"
EXPOSE 8000
