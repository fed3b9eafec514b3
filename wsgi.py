"""WSGI entry point for any server: `gunicorn -k gthread --threads 64 wsgi:app`."""

from webapp.server import build_app

app = build_app()
