# syntax=docker/dockerfile:1
# One image for every Waystation process: `waystation api` (default), `waystation worker`,
# `waystation migrate`. docker-compose.yml picks the command per service.

FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src
COPY . .
# Waystation and the mobile kind, a distribution of its own (kinds/mobile).
RUN pip install . ./kinds/mobile

FROM python:3.11-slim
# Production unless told otherwise: a plain `docker run` then refuses the dev JWT secret and
# secrets key, and webhooks to private networks (waystation/settings.py).
ENV PATH=/opt/venv/bin:$PATH \
    WAYSTATION_ENV=production \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    WAYSTATION_API_HOST=0.0.0.0 \
    WAYSTATION_API_PORT=8000 \
    WAYSTATION_DATA_DIR=/home/waystation/.waystation
# The artifact folder exists, owned by the app user, so a named volume mounted on it (shared
# by the API and the workers in docker-compose.yml) starts with that owner.
RUN groupadd --system --gid 10001 waystation \
    && useradd --system --uid 10001 --gid waystation --create-home \
       --home-dir /home/waystation waystation \
    && mkdir -p /var/lib/waystation/artifacts \
    && chown -R waystation:waystation /var/lib/waystation
COPY --from=build /opt/venv /opt/venv
USER waystation
WORKDIR /home/waystation
EXPOSE 8000
CMD ["waystation", "api"]
