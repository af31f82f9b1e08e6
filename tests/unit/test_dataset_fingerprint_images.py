"""The compare fingerprint hashes the image files a dataset's rows name, not only its text.

Images are prefill: the same jsonl with other pictures is other work, so swapping one file must
change the dataset's hash (and compare's differences must name it), while a dataset without
images keeps the plain file hash that earlier runs stored.
"""

from __future__ import annotations

import hashlib
import json

from loadtest.fingerprint import differences, fingerprint
from loadtest.workload.dataset_images import image_files


def _scenario(path) -> dict:
    return {"name": "i", "target": {"base_url": "http://127.0.0.1:1/v1", "model": "m"},
            "workload": {"dataset": {"path": str(path)}}, "load": {"levels": [1]}}


def test_swapping_an_image_file_changes_the_dataset_hash(tmp_path):
    (tmp_path / "img").mkdir()
    (tmp_path / "img" / "a.png").write_bytes(b"first picture")
    (tmp_path / "b.png").write_bytes(b"second picture")
    data = tmp_path / "rows.jsonl"
    data.write_text(json.dumps({"prompt": "what is this", "images": ["img/a.png", "https://example.invalid/x.png"]})
                    + "\n" + json.dumps({"prompt": "and this", "images": "b.png"}) + "\n")
    before = fingerprint(_scenario(data))
    assert before["datasets"][str(data)] != hashlib.sha256(data.read_bytes()).hexdigest()  # the images joined it
    (tmp_path / "b.png").write_bytes(b"another second picture")
    after = fingerprint(_scenario(data))
    digest_b, digest_a = before["datasets"][str(data)], after["datasets"][str(data)]
    assert digest_a != digest_b and before["hash"] != after["hash"]
    assert differences(before, after) == [f"datasets.{data}: {digest_b} → {digest_a}"]
    (tmp_path / "b.png").write_bytes(b"second picture")  # back as it was: the same fingerprint again
    assert fingerprint(_scenario(data)) == before


def test_a_dataset_without_image_files_keeps_its_plain_hash(tmp_path):
    data = tmp_path / "rows.jsonl"
    data.write_text(json.dumps({"prompt": "an image of text, no images"}) + "\n"
                    + json.dumps({"prompt": "url only", "images": "https://example.invalid/x.png"}) + "\n"
                    + json.dumps({"prompt": "gone", "images": "missing.png"}) + "\n")
    assert fingerprint(_scenario(data))["datasets"][str(data)] == hashlib.sha256(data.read_bytes()).hexdigest()


def test_sharegpt_rows_name_their_images_too(tmp_path):
    (tmp_path / "cat.jpg").write_bytes(b"cat")
    data = tmp_path / "llava.json"
    conversation = {"conversations": [{"from": "human", "value": "<image> what"}, {"from": "gpt", "value": "a cat"}]}
    data.write_text(json.dumps([{**conversation, "image": "cat.jpg"}, {**conversation, "image": "cat.jpg"}]))
    assert image_files(data) == [("cat.jpg", tmp_path / "cat.jpg")]  # each file once, as the rows spell it
    before = fingerprint(_scenario(data))["datasets"][str(data)]
    (tmp_path / "cat.jpg").write_bytes(b"dog")
    assert fingerprint(_scenario(data))["datasets"][str(data)] != before


def test_a_file_that_is_not_json_names_no_images(tmp_path):
    data = tmp_path / "rows.jsonl"
    data.write_bytes(b'\xff\xfe "images": not json')
    assert image_files(data) == []
    assert fingerprint(_scenario(data))["datasets"][str(data)] == hashlib.sha256(data.read_bytes()).hexdigest()
