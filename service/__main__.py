"""``python -m bpecore_service``: serve on BPESVC_HOST:BPESVC_PORT (default 127.0.0.1:8000)."""

from bpecore_service.main import run

run()
