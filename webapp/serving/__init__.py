"""How `agentwatch serve` holds connections: gunicorn's gthread worker, with each request
read whole by the main loop before a thread takes it (worker.py, framing.py) and
long-lived connections outside the request pool (pool.py). docs/security.md, "Server
model"."""
