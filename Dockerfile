# agentwatch in one container: `docker build -t agentwatch .`
# `docker run -p 8000:8000 -v agentwatch:/data agentwatch`

FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    AGENTWATCH_INSTANCE_PATH=/data

WORKDIR /app
COPY pyproject.toml README.md wsgi.py ./
COPY webapp ./webapp
# The same install `make run` does, plus the PostgreSQL driver (pure Python: no compiler).
RUN pip install --no-cache-dir '.[postgres]' \
 && rm -rf build *.egg-info \
 && useradd --system --home /data agentwatch \
 && mkdir -p /data && chown agentwatch /data

USER agentwatch
VOLUME ["/data"]
EXPOSE 8000
HEALTHCHECK CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/login')"
CMD ["agentwatch", "serve", "--host", "0.0.0.0", "--port", "8000"]
