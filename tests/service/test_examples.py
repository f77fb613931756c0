"""The docs' "Try it out" works: every request example in the OpenAPI schema, sent as the UI sends
it, is answered 200 (and as the library answers); a body sent as a form or text gets a 415 that
says to send JSON, not a puzzling 422."""

from __future__ import annotations

import pytest

import bpecore


@pytest.fixture(scope="module")
def spec(client):
    return client.get("/openapi.json").json()


def request_bodies(spec):
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            if "requestBody" in op:
                yield path, method, op["requestBody"]["content"]["application/json"]


def test_every_route_with_a_body_has_examples(spec):
    bodies = list(request_bodies(spec))
    assert len(bodies) >= 11
    for path, method, media in bodies:
        assert media.get("examples"), (method, path)


def test_every_example_succeeds(client, spec):
    sent = 0
    for path, method, media in request_bodies(spec):
        for name, example in media["examples"].items():
            r = client.request(method.upper(), path, json=example["value"])
            assert r.status_code == 200, (path, name, r.text)
            sent += 1
    assert sent >= 12  # /tokenize has one example per body shape


def test_examples_answer_as_the_library(client, spec):
    enc = bpecore.get_encoding("cl100k_base")  # the test server's default
    examples = {
        path: media["examples"] for path, _, media in request_bodies(spec) if path.startswith("/v1")
    }
    (count,) = examples["/v1/count"].values()
    assert client.post("/v1/count", json=count["value"]).json()["count"] == enc.count(
        count["value"]["text"]
    )
    (decode,) = examples["/v1/decode"].values()
    assert client.post("/v1/decode", json=decode["value"]).json()["text"] == "Hello, world!"
    (split,) = examples["/v1/split"].values()
    body = split["value"]
    assert client.post("/v1/split", json=body).json()["offset"] == enc.split_at(
        body["text"], body["max_tokens"]
    )


@pytest.mark.parametrize(
    "headers",
    [
        {"content-type": "application/x-www-form-urlencoded"},  # curl -d
        {"content-type": "text/plain; charset=utf-8"},
        {"content-type": "multipart/form-data; boundary=x"},
        {},  # no Content-Type at all
    ],
    ids=["form", "text", "multipart", "none"],
)
@pytest.mark.parametrize("path", ["/v1/count", "/v1/encode", "/v1/chunk", "/tokenize"])
def test_non_json_content_type_is_415(client, headers, path):
    r = client.post(path, content=b'{"text": "hi"}', headers=headers)
    assert r.status_code == 415, r.text
    err = r.json()["error"]
    assert err["type"] == "unsupported_media_type" and err["code"] == 415
    assert "Content-Type: application/json" in err["message"]
    media = headers.get("content-type", "none").split(";")[0]
    assert f"not {media}" in err["message"]


def test_json_content_types_still_parse(client):
    for ct in ("application/json", "application/json; charset=utf-8", "application/vnd.api+json"):
        r = client.post("/v1/count", content=b'{"text": "hi"}', headers={"content-type": ct})
        assert r.status_code == 200 and r.json()["count"] == 1, ct
    # a JSON body that breaks the schema is still a 422
    r = client.post("/v1/count", json={"text": 1})
    assert r.status_code == 422 and r.json()["error"]["type"] == "validation_error"


def test_415_is_documented(spec):
    assert "415" in spec["paths"]["/v1/count"]["post"]["responses"]
