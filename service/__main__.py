"""``python -m service``: serve on BPESVC_HOST:BPESVC_PORT (default 0.0.0.0:8000)."""

from service.main import run

run()
