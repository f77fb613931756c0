"""/healthz, /readyz before and after load, load failures, extra vocab files from settings."""

from __future__ import annotations

import threading
import time

import pytest
from fastapi.testclient import TestClient

import bpecore
import bpecore_service.main
from bpecore_service.config import HFFile, Settings, TiktokenFile
from bpecore_service.main import create_app


def test_ready_after_load(client):
    assert client.get("/healthz").status_code == 200
    r = client.get("/readyz")
    assert r.status_code == 200 and r.json()["status"] == "ok"
    assert set(r.json()["encodings"]) == set(bpecore.list_encodings())


def test_not_ready_before_lifespan():
    c = TestClient(create_app(Settings()))  # no `with`: the lifespan has not run
    assert c.get("/healthz").status_code == 200
    r = c.get("/readyz")
    assert r.status_code == 503 and r.json()["status"] == "loading"
    r = c.post("/v1/count", json={"text": "a"})
    assert r.status_code == 503 and r.json()["error"]["type"] == "not_ready"


def test_background_load_gates_readiness(monkeypatch):
    gate = threading.Event()
    real = bpecore_service.main.load_encodings

    def slow_load(settings):
        gate.wait(10)
        return real(settings)

    monkeypatch.setattr(bpecore_service.main, "load_encodings", slow_load)
    with TestClient(create_app(Settings(encodings=["cl100k_base"]))) as c:
        assert c.get("/readyz").status_code == 503
        assert c.get("/healthz").status_code == 200
        assert c.post("/v1/count", json={"text": "a"}).status_code == 503
        gate.set()
        deadline = time.monotonic() + 10
        while c.get("/readyz").status_code != 200:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert c.post("/v1/count", json={"text": "hello world"}).json()["count"] == 2
        assert c.get("/v1/encodings").json()["data"][0]["name"] == "cl100k_base"


def test_load_failure_background_not_alive(tmp_path):
    bad = tmp_path / "bad.tiktoken"
    bad.write_text("not base64!! 1\n")
    with TestClient(
        create_app(
            Settings(encodings=["cl100k_base"], tiktoken_files=[TiktokenFile(path=str(bad))])
        )
    ) as c:
        deadline = time.monotonic() + 10
        while c.get("/healthz").status_code == 200:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        r = c.get("/healthz")
        assert r.status_code == 503 and "bad.tiktoken" in r.json()["detail"]
        assert c.get("/readyz").json()["status"] == "failed"
        assert c.post("/v1/count", json={"text": "a"}).status_code == 503


def test_load_failure_foreground_raises(tmp_path):
    app = create_app(
        Settings(
            encodings=["cl100k_base"],
            load_in_background=False,
            hf_files=[HFFile(path=str(tmp_path / "missing.json"))],
        )
    )
    with pytest.raises(bpecore.VocabError):
        with TestClient(app):
            pass


def test_default_encoding_must_be_loaded():
    app = create_app(Settings(encodings=["o200k_base"], load_in_background=False))
    with pytest.raises(ValueError, match="default_encoding"):
        with TestClient(app):
            pass


def test_extra_vocab_files(toy_tiktoken, toy_hf):
    settings = Settings(
        encodings=["cl100k_base"],
        load_in_background=False,
        tiktoken_files=[
            TiktokenFile(path=str(toy_tiktoken), pattern="r50k", special_tokens={"<|end|>": 260})
        ],
        hf_files=[HFFile(path=str(toy_hf))],
    )
    with TestClient(create_app(settings)) as c:
        names = {e["name"]: e for e in c.get("/v1/encodings").json()["data"]}
        assert set(names) == {"cl100k_base", "toy", "toyhf"}
        assert names["toy"]["special_tokens"] == {"<|end|>": 260}
        assert names["toy"]["pattern"] == bpecore.registry.R50K_PATTERN
        for name in ("toy", "toyhf"):
            body = c.post(
                "/v1/encode",
                json={"text": "hello hello<|end|>", "encoding": name, "allowed_special": "all"},
            ).json()
            assert body["tokens"] == [259, 32, 259, 260], name
        assert (
            c.post("/v1/count", json={"text": "hello", "encodings": ["toy", "toyhf"]}).json()[
                "count"
            ]
            == 1
        )


def test_settings_from_environment(monkeypatch):
    monkeypatch.setenv("BPESVC_MAX_TEXTS", "3")
    monkeypatch.setenv("BPESVC_ENCODINGS", '["o200k_base"]')
    monkeypatch.setenv("BPESVC_TIKTOKEN_FILES", '[{"path": "/x.tiktoken", "pattern": null}]')
    s = Settings()
    assert s.max_texts == 3 and s.encodings == ["o200k_base"]
    assert s.tiktoken_files[0].path == "/x.tiktoken" and s.tiktoken_files[0].pattern is None
