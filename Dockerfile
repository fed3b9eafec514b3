# agentwatch in one container: `docker build -t agentwatch .`
# `docker run -p 8000:8000 -v agentwatch:/data agentwatch`

# The wheel is built where a C compiler is, for the relay's compiled writer
# (webapp/watch/_fanout.c); the image that runs it has none.
FROM python:3.11 AS build
WORKDIR /src
COPY pyproject.toml setup.py README.md wsgi.py ./
COPY webapp ./webapp
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    AGENTWATCH_INSTANCE_PATH=/data

WORKDIR /app
COPY --from=build /wheels /wheels
COPY wsgi.py ./
# The same install `make run` does, plus the PostgreSQL driver.
RUN pip install --no-cache-dir --find-links /wheels 'agentwatch[postgres]' \
 && rm -rf /wheels \
 && useradd --system --home /data agentwatch \
 && mkdir -p /data && chown agentwatch /data

USER agentwatch
VOLUME ["/data"]
EXPOSE 8000
HEALTHCHECK CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/login')"
CMD ["agentwatch", "serve", "--host", "0.0.0.0", "--port", "8000"]
