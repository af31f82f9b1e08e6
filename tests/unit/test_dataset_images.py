"""Images named by dataset rows: files as data URIs, URLs passed through, the checks, and the figure."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import orjson
import pytest
from PIL import Image

from loadtest.errors import InputError
from loadtest.mock.parse import parse_request
from loadtest.report.image_figure import image_figure
from loadtest.scenario import parse_scenario
from loadtest.workload import Workload
from loadtest.workload.dataset import load_dataset


def _dataset(folder: Path, rows: list[dict], name: str = "rows.jsonl") -> Path:
    (folder / "img").mkdir(exist_ok=True)
    Image.new("RGB", (56, 28), (200, 10, 10)).save(folder / "img" / "red.png")
    Image.new("RGB", (112, 56), (10, 200, 10)).save(folder / "img" / "green.jpeg", quality=90)
    (folder / "img" / "no-extension").write_bytes((folder / "img" / "red.png").read_bytes())
    path = folder / name
    path.write_text("\n".join(json.dumps(r) for r in rows))
    return path


def _scenario(path: Path, api: str = "chat") -> object:
    return parse_scenario({"name": "d", "target": {"api": api}, "load": {"levels": [1]},
                           "workload": {"dataset": {"path": str(path), "order": "sequential"}}}, "s.yaml")


def test_row_images_reach_the_body_recorded_and_charged(tmp_path):
    rows = [{"prompt": "one red", "images": "img/red.png"},
            {"messages": [{"role": "user", "content": "two"}], "images": ["img/red.png", "img/green.jpeg"]},
            {"prompt": "remote one", "images": ["https://images.example/cat.jpg"]},
            {"prompt": "sniffed", "images": "img/no-extension"},
            {"prompt": "no image"}]
    workload = Workload(_scenario(_dataset(tmp_path, rows)))
    planned = [workload.next_request() for _ in rows]
    red, green = ((tmp_path / "img" / n).stat().st_size for n in ("red.png", "green.jpeg"))
    assert [p.images for p in planned] == [1, 2, 1, 1, None]
    assert [p.image_bytes for p in planned] == [red, red + green, None, red, None]  # a URL's size is unknown
    parts = [orjson.loads(p.body)["messages"][-1]["content"] for p in planned]
    assert parts[0][0]["type"] == "text" and parts[0][1]["image_url"]["url"].startswith("data:image/png;base64,")
    assert parts[1][2]["image_url"]["url"].startswith("data:image/jpeg;base64,")
    assert parts[2][1]["image_url"]["url"] == "https://images.example/cat.jpg"  # passed through, never fetched
    assert parts[3][1]["image_url"]["url"].startswith("data:image/png;base64,")  # Pillow told the type
    assert isinstance(parts[4], str)
    # the mock charges a file its pixels and a URL (which it never fetches) its per-image tokens
    # (56 × 28 / 784 = 2 tokens, 112 × 56 / 784 = 8; the rows' words: "one red", "two", "remote one")
    tokens = [parse_request(p.body, chat=True, vision=(64, 784)).prompt_tokens for p in planned[:3]]
    assert tokens == [2 + 64 + 2, 1 + 64 + 2 + 64 + 8, 2 + 64]


def test_bad_image_references_fail_in_one_line(tmp_path):
    cases = [
        ({"prompt": "x", "images": ["img/missing.png"]}, "line 1: images[0]: no such image file"),
        ({"prompt": "x", "images": []}, "line 1: 'images' must be a path or URL"),
        ({"prompt": "x", "images": [3]}, "line 1: images[0] must be a non-empty string"),
    ]
    for i, (row, words) in enumerate(cases):
        path = _dataset(tmp_path, [row], f"bad{i}.jsonl")
        with pytest.raises(InputError) as err:
            load_dataset(_scenario(path).workload.dataset)
        assert str(err.value).startswith(f"{path}: {words}"), str(err.value)
    ok = _dataset(tmp_path, [{"prompt": "x", "images": "img/red.png"}], "ok.jsonl")
    with pytest.raises(InputError) as err:
        Workload(_scenario(ok, "completions"))
    assert str(err.value) == f"{ok}: 1 rows name images; only target.api chat sends them (image_url parts), not completions"


def test_llava_sharegpt_rows_name_their_image(tmp_path):
    _dataset(tmp_path, [])
    path = tmp_path / "llava.json"
    path.write_text(json.dumps([{"id": "1", "image": "img/green.jpeg", "conversations": [
        {"from": "human", "value": "<image>\nWhat is green?"}, {"from": "gpt", "value": "the picture"}]}]))
    spec = parse_scenario({"name": "d", "load": {"levels": [1]},
                           "workload": {"dataset": {"path": str(path), "format": "sharegpt"}}}, "s.yaml")
    assert load_dataset(spec.workload.dataset).entries[0].images == (str(tmp_path / "img" / "green.jpeg"),)


def test_the_figure_has_ttft_by_count_and_by_size_per_level():
    class Level:
        label = "2 concurrent users"
        images = {"ttft_ms_by_count": {"1": {"p50": 40.0, "p95": 50.0, "n": 9}, "3": {"p50": 100.0, "p95": 120.0, "n": 8}}}
        samples = {"image_bytes": np.array([2048.0, 6144.0]), "image_ttft_ms": np.array([41.0, 99.0])}

    class Run:
        levels = [Level()]

    fig = image_figure(Run())  # type: ignore[arg-type]
    lines = [t for t in fig.data if t.mode == "lines+markers"]
    assert [list(t.x) for t in lines] == [[1, 3], [1, 3]] and [list(t.y) for t in lines] == [[40, 100], [50, 120]]
    (scatter,) = [t for t in fig.data if t.mode == "markers"]
    assert list(scatter.x) == [2.0, 6.0] and list(scatter.y) == [41.0, 99.0]  # kilobytes


def test_served_images_go_as_urls_of_the_runs_own_server(tmp_path):
    """``images_as: served``: the run's image server on 127.0.0.1 serves exactly the rows' files."""
    import urllib.request  # only this test fetches: from the image server it started on 127.0.0.1

    from loadtest.workload.image_server import serving_images  # only this test starts the image server

    path = _dataset(tmp_path, [{"prompt": "a", "images": ["img/red.png", "https://images.example/x.jpg"]}])
    scenario = parse_scenario({"name": "d", "load": {"levels": [1]}, "workload": {
        "dataset": {"path": str(path), "images_as": "served"}}}, "s.yaml")
    with pytest.raises(InputError, match="the run's image server does not serve it"):
        Workload(scenario).next_request()  # no server running: never sent another way
    with serving_images(scenario) as urls:
        assert list(urls) == [str(tmp_path / "img" / "red.png")]  # files only; the URL row stays as it is
        planned = Workload(scenario).next_request()
        parts = orjson.loads(planned.body)["messages"][-1]["content"]
        url = parts[1]["image_url"]["url"]
        assert url.startswith("http://127.0.0.1:") and parts[2]["image_url"]["url"] == "https://images.example/x.jpg"
        with urllib.request.urlopen(url, timeout=5) as answer:
            assert answer.read() == (tmp_path / "img" / "red.png").read_bytes()
            assert answer.headers["Content-Type"] == "image/png"
        guess = url.rsplit("/", 2)[0] + "/0/../../rows.jsonl"
        with pytest.raises(urllib.error.HTTPError):  # nothing but the listed files, by number
            urllib.request.urlopen(guess, timeout=5)
    assert planned.images == 2 and planned.image_bytes is None  # the URL's size is unknown
